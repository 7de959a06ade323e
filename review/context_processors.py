from authoring import permissions
from review import selectors


def badges(request):
    """The navigation: which of its links this user may follow (each only for those it answers), and its
    counts: tasks waiting for this reviewer, unread inbox items (one query). The roles came with the user."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    review_queue_count, inbox_unread_count = selectors.nav_counts(user=user)
    return {"nav_member": permissions.can_view(user), "nav_review": permissions.can_review(user),
            "review_queue_count": review_queue_count, "inbox_unread_count": inbox_unread_count}
