"""The review API: the paths labs and scripts rely on, every answer in the error envelope."""

import pytest

from authoring.models import Task
from review.models import Comment
from tests.review.conftest import api_client, pass_gates


def url(task, number, action):
    return f"/api/tasks/{task.slug}/versions/{number}/{action}/"


def test_submit_answers_409_gates_failed_listing_the_gates_then_200(task, author):
    api = api_client(author)
    response = api.post(url(task, 1, "submit"), {}, format="json")
    body = response.json()["error"]
    assert response.status_code == 409 and body["code"] == "gates_failed"
    assert {d["pointer"] for d in body["details"]} == {
        "/gates/oracle",
        "/gates/nop",
        "/gates/hack:echo-prompt",
        "/gates/hack:keyword-stuffing",
        "/gates/hack:exhaust",
    }
    assert {g["gate"]: g["status"] for g in body["gates"]}["oracle"] == "not_run"
    # each says what to do next
    assert {d["pointer"]: d["what_to_do"] for d in body["details"]}["/gates/nop"] == (
        "Click Run gates, and wait for its previews to finish."
    )
    assert {g["gate"]: g["what_to_do"] for g in body["gates"]}["rubric"] == ""

    pass_gates(task.latest_version, author)
    response = api.post(url(task, 1, "submit"), {}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "in_review" and response.json()["version"] == 1


def test_an_admin_submits_past_failing_gates_with_a_reason_an_author_cannot(task, author, admin):
    response = api_client(author).post(url(task, 1, "submit"), {"override_reason": "please"}, format="json")
    assert response.status_code == 403 and response.json()["error"]["details"][0]["pointer"] == "/override_reason"
    response = api_client(admin).post(url(task, 1, "submit"), {"override_reason": "no sandbox here"}, format="json")
    assert response.status_code == 200 and response.json()["override_reason"] == "no sandbox here"


def test_reviews_answer_201_409_403_and_400_as_documented(task, author, reviewer, admin):
    review = {"decision": "approve", "comment": "ok"}
    response = api_client(reviewer).post(url(task, 1, "reviews"), review, format="json")
    assert response.status_code == 409 and response.json()["error"]["code"] == "not_in_review"

    pass_gates(task.latest_version, author)
    api_client(author).post(url(task, 1, "submit"), {}, format="json")
    response = api_client(author).post(url(task, 1, "reviews"), review, format="json")
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"

    response = api_client(reviewer).post(
        url(task, 1, "reviews"),
        {"decision": "request_changes", "comment": "", "check_comments": {"says_42": ""}},
        format="json",
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == "comment_required"
    response = api_client(reviewer).post(url(task, 1, "reviews"), {"decision": "maybe"}, format="json")
    assert response.status_code == 400 and response.json()["error"]["details"][0]["pointer"] == "/decision"
    # a misnamed field is refused, not dropped (an approval was recorded without the comment sent as "body")
    response = api_client(reviewer).post(
        url(task, 1, "reviews"), {"decision": "approve", "body": "Looks right"}, format="json"
    )
    assert response.status_code == 400 and response.json()["error"]["details"][0]["pointer"] == "/body"
    assert "unknown field" in response.json()["error"]["details"][0]["message"]

    response = api_client(reviewer).post(
        url(task, 1, "reviews"),
        {"decision": "request_changes", "check_comments": {"says_42": "Also accept 'forty-two'."}},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["check_comments"] == {"says_42": "Also accept 'forty-two'."}
    assert Task.objects.get(pk=task.pk).status == "changes_requested"
    listing = api_client(author).get(url(task, 1, "reviews")).json()
    assert listing["count"] == 1 and listing["results"][0]["decision"] == "request_changes"


def test_gates_are_read_and_run_gates_starts_only_the_missing_previews(
    task, author, enqueued, django_capture_on_commit_callbacks
):
    api = api_client(author)
    body = api.get(url(task, 1, "gates")).json()
    assert body["all_pass"] is False
    assert body["missing_previews"] == [
        {"policy": "oracle", "n": 3},
        {"policy": "nop", "n": 3},
        {"policy": "hack:echo-prompt", "n": 1},
        {"policy": "hack:keyword-stuffing", "n": 1},
        {"policy": "hack:exhaust", "n": 1},
    ]

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(url(task, 1, "gates/run"))
    assert response.status_code == 201 and len(response.json()["preview_runs"]) == 5
    from sandbox.models import PreviewRun

    assert sorted(PreviewRun.objects.values_list("policy", "n")) == [
        ("hack:echo-prompt", 1),
        ("hack:exhaust", 1),
        ("hack:keyword-stuffing", 1),
        ("nop", 3),
        ("oracle", 3),
    ]
    assert len(enqueued) == 9  # oracle ×3, nop ×3, three hack probes ×1
    assert api.post(url(task, 1, "gates/run")).json()["preview_runs"] == []  # nothing missing any more


def test_comment_threads_reply_and_resolve(task, author, reviewer):
    base = f"/api/tasks/{task.slug}/comments/"
    response = api_client(reviewer).post(base, {"body": "Why 42?", "check_id": "says_42"}, format="json")
    assert response.status_code == 201
    thread_id = response.json()["id"]
    response = api_client(author).post(base, {"body": "It is the answer.", "parent": thread_id}, format="json")
    assert response.status_code == 201 and [r["body"] for r in response.json()["replies"]] == ["It is the answer."]
    response = api_client(author).post(f"{base}{thread_id}/resolve/", {}, format="json")
    assert response.status_code == 200 and response.json()["resolved"] is True
    threads = api_client(reviewer).get(base).json()
    assert [(t["check_id"], t["resolved"], len(t["replies"])) for t in threads] == [("says_42", True, 1)]

    bad = api_client(reviewer).post(base, {"body": "?", "check_id": "nope"}, format="json")
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["pointer"] == "/check_id"
    missing = api_client(reviewer).post(base, {"body": "?", "parent": 999999}, format="json")
    assert missing.status_code == 400 and missing.json()["error"]["details"][0]["pointer"] == "/parent"
    assert Comment.objects.count() == 2


def test_queue_and_inbox(task, author, reviewer):
    pass_gates(task.latest_version, author)
    api_client(author).post(url(task, 1, "submit"), {}, format="json")
    queue = api_client(reviewer).get("/api/review-queue/").json()
    assert [item["slug"] for item in queue["results"]] == [task.slug] and queue["results"][0]["submitted_at"]
    assert api_client(author).get("/api/review-queue/").status_code == 403  # an author reviews nothing
    assert api_client(reviewer).get("/api/review-queue/?older_than_days=x").status_code == 400
    assert api_client(reviewer).get("/api/review-queue/?environment=other").json()["count"] == 0

    api_client(reviewer).post(url(task, 1, "reviews"), {"decision": "approve"}, format="json")
    inbox = api_client(author).get("/api/inbox/?unread=1").json()
    assert [(i["kind"], i["actor"], i["read"]) for i in inbox["results"]] == [("approved", "rita", False)]
    assert api_client(author).post("/api/inbox/read/").json() == {"marked": 1}
    assert api_client(author).get("/api/inbox/?unread=1").json()["count"] == 0


def test_agreement_needs_exactly_one_scope(task, reviewer):
    api = api_client(reviewer)
    assert api.get("/api/agreement/").status_code == 400
    assert api.get(f"/api/agreement/?task={task.slug}&environment=shell").status_code == 400
    assert api.get("/api/agreement/?task=nope").status_code == 404
    body = api.get(f"/api/agreement/?task={task.slug}").json()
    calibration = body["overall"].pop("calibration")
    assert body["overall"] == {"labels": 0, "answers": 0, "agreed": 0, "rate": None, "kappa": None, "reword": False}
    assert (calibration["answers"], calibration["tpr"], calibration["tnr"], calibration["validated"]) == (
        0,
        None,
        None,
        False,
    )
    assert body["rule"] == {"min_labels": 50, "min_per_class": 25, "min_rate": 0.85, "blocking": False}


def test_the_review_paths_are_in_the_openapi_schema(client, author):
    client.force_login(author)
    schema = client.get("/api/schema/?format=json").json()
    for path in (
        "/api/tasks/{slug}/versions/{number}/submit/",
        "/api/tasks/{slug}/versions/{number}/reviews/",
        "/api/review-queue/",
        "/api/inbox/",
        "/api/tasks/{slug}/versions/{number}/gates/",
        "/api/tasks/{slug}/versions/{number}/gates/run/",
        "/api/tasks/{slug}/comments/",
        "/api/tasks/{slug}/comments/{comment_id}/resolve/",
        "/api/agreement/",
        "/api/previews/{preview_run_id}/calibration/",
    ):
        assert path in schema["paths"], path
    submit = schema["paths"]["/api/tasks/{slug}/versions/{number}/submit/"]["post"]["responses"]
    assert "409" in submit


@pytest.fixture
def enqueued(monkeypatch):
    from sandbox.tasks import rollout_run

    sent = []
    monkeypatch.setattr(rollout_run, "apply_async", lambda args=None, **options: sent.append(args[0]))
    return sent


def test_submitting_a_task_already_in_review_answers_409_invalid_state(submitted, author):
    response = api_client(author).post(url(submitted, 1, "submit"), {}, format="json")
    body = response.json()["error"]
    assert response.status_code == 409 and body["code"] == "invalid_state", body
    assert "in review" in body["message"]
    submitted.refresh_from_db()
    assert submitted.status == Task.Status.IN_REVIEW
