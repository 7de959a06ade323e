from functools import cache

from accounts import permissions
from review import selectors


def badges(request):
    """The navigation: which of its links this user may follow (each only for those it answers), and its
    counts: tasks waiting for this reviewer, unread inbox items (one query). The counts are read when a template
    first shows one, so a fragment without the navigation (an htmx poll every second) costs no query."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    counts = cache(lambda: selectors.nav_counts(user=user))
    return {
        "nav_member": permissions.can_view(user),
        "nav_review": permissions.can_review(user),
        "review_queue_count": lambda: counts()[0],
        "inbox_unread_count": lambda: counts()[1],
    }
