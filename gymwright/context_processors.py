from functools import cache

from django.conf import settings

from gymwright.pages import panels


def limits(request):
    return {"upload_max_bytes": settings.UPLOAD_MAX_BYTES}


def site_panels(request):
    """The layout's panels (base.html: the navigation's links, the account link), which the apps register
    (gymwright.pages); worked out when a template first shows one, so a fragment without the navigation (an htmx
    poll every second) costs nothing."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"site_panels": cache(lambda: panels("base", request=request))}
