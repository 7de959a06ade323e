"""Hostile review input: oversized, NUL-laden or ill-typed comments are refused with their field,
never stored, never a 500."""

import pytest

from review.models import Comment, Review
from tests.review.conftest import api_client


@pytest.mark.parametrize(
    "payload, pointer",
    [
        ({"decision": "comment", "comment": "x" * 10_001}, "/comment"),
        ({"decision": "comment", "check_comments": {"says_42": "y" * 10_001}}, "/check_comments/says_42"),
        ({"decision": "comment", "comment": "nul\x00here"}, "/comment"),
        ({"decision": "comment", "check_comments": {"../../etc": "z"}}, "/check_comments/..~1..~1etc"),
        ({"decision": "comment", "check_comments": ["not", "an", "object"]}, "/check_comments"),
        ({"decision": "comment", "check_comments": {"says_42": {"nested": 1}}}, "/check_comments/says_42"),
    ],
)
def test_hostile_review_payloads_are_refused_with_their_pointer(submitted, reviewer, payload, pointer):
    response = api_client(reviewer).post(f"/api/tasks/{submitted.slug}/versions/1/reviews/", payload, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["details"][0]["pointer"] == pointer
    assert not Review.objects.exists() and not Comment.objects.exists()


def test_oversized_comments_and_overlong_check_ids_are_refused(submitted, reviewer):
    base = f"/api/tasks/{submitted.slug}/comments/"
    response = api_client(reviewer).post(base, {"body": "b" * 10_001}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "too_long"
    response = api_client(reviewer).post(base, {"body": "ok", "check_id": "x" * 65}, format="json")
    assert response.status_code == 400 and response.json()["error"]["details"][0]["pointer"] == "/check_id"
    assert not Comment.objects.exists()


def test_a_refused_post_too_large_to_keep_is_not_copied_into_the_session(client, submitted, reviewer):
    """The review page keeps a refused post's boxes in the session for the next view (review.drafts); a post no
    browser's maxlength lets through (past KEEP_MAX_CHARS in all) is refused and not kept: no megabytes copied
    into a session row per request."""
    from review.drafts import KEEP_MAX_CHARS, SESSION_KEY

    client.force_login(reviewer)
    page_url = f"/review/tasks/{submitted.slug}/"
    response = client.post(
        f"/tasks/{submitted.slug}/review/",
        {
            "decision": "request_changes",
            "version": 1,
            "comment": "x" * (KEEP_MAX_CHARS // 2),
            "next": page_url,
            "check_comment__says_42": "y" * (KEEP_MAX_CHARS // 2 + 1),
        },
    )
    assert response.status_code == 302
    assert SESSION_KEY not in client.session
    assert not Review.objects.exists() and not Comment.objects.exists()
