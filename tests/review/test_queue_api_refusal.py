"""The review queue is a reviewer's: `/api/review-queue/` refuses anyone else with 403 in the API's error envelope, as
the `/review/` page does (it answered them an empty list)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient


@pytest.mark.parametrize("role", ["author", "lab", "nobody"])
def test_the_review_queue_api_refuses_a_member_who_does_not_review(client, request, role):
    user = request.getfixturevalue(role)
    api = APIClient()
    api.force_authenticate(user)
    response = api.get("/api/review-queue/")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert "reviewers and admins" in response.json()["error"]["message"]
    # before the query string is read: a bad filter is refused the same way
    assert api.get("/api/review-queue/?older_than_days=x").status_code == 403
    client.force_login(user)
    assert client.get("/review/").status_code == 403  # the page's answer


@pytest.mark.parametrize("role", ["reviewer", "admin"])
def test_the_review_queue_api_answers_reviewers_and_admins(request, role):
    api = APIClient()
    api.force_authenticate(request.getfixturevalue(role))
    response = api.get("/api/review-queue/")
    assert response.status_code == 200 and response.json()["count"] == 0
