from authoring import permissions
from review import selectors


def badges(request):
    """The navigation: which of its links this user may follow (each only for those it answers), and its
    counts: tasks waiting for this reviewer, unread inbox items. The roles are read once per request."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"nav_member": permissions.can_view(user), "nav_review": permissions.can_review(user),
            "review_queue_count": selectors.review_queue_count(user=user),
            "inbox_unread_count": selectors.inbox_unread_count(user=user)}
