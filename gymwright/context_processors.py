from django.conf import settings


def limits(request):
    return {"upload_max_bytes": settings.UPLOAD_MAX_BYTES}
