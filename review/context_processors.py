from review import selectors


def badges(request):
    """Counts for the navigation: tasks waiting for this reviewer, unread inbox items."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"review_queue_count": selectors.review_queue_count(user=user),
            "inbox_unread_count": selectors.inbox_unread_count(user=user)}
