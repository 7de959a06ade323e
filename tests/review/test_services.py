"""Submit and review: every transition and who may make it."""

import pytest

from authoring import services as authoring_services
from authoring.models import AuditEvent, Task
from gymwright.errors import ConflictError, DomainError, NotAllowed
from review import services
from review.models import Comment, InboxItem, Review, Submission
from tests.review.conftest import finished_preview, pass_gates, task_content


def test_audit_events_record_create_new_version_submit_and_approve(task, author, reviewer):
    authoring_services.task_version_create(task=task, author=author, base_version=1, content=task_content(title="v2"))
    pass_gates(task.latest_version, author)
    services.task_submit(task=task, user=author)
    services.review_create(task_version=task.latest_version, reviewer=reviewer, decision="approve")
    from authoring.selectors import audit_events_for

    verbs = [(e.verb, e.actor.username) for e in reversed(list(audit_events_for(task)))]
    assert verbs == [("create", "alice"), ("new_version", "alice"), ("submit", "alice"), ("approve", "rita")]
    task.refresh_from_db()
    assert task.status == Task.Status.APPROVED and task.approved_version.number == 2


def test_a_draft_cannot_be_reviewed_only_a_submitted_version(task, reviewer):
    for decision in ("approve", "request_changes", "comment"):
        with pytest.raises(ConflictError) as caught:
            services.review_create(task_version=task.latest_version, reviewer=reviewer, decision=decision, comment="x")
        assert caught.value.code == "not_in_review"
    task.refresh_from_db()
    assert task.status == Task.Status.DRAFT and task.approved_version is None
    assert not Review.objects.exists()


def test_approval_belongs_to_the_exact_version_in_review(submitted, author, reviewer):
    old = submitted.latest_version
    authoring_services.task_version_create(
        task=submitted, author=author, base_version=1, content=task_content(title="changed")
    )
    with pytest.raises(ConflictError):
        services.review_create(task_version=old, reviewer=reviewer, decision="approve")


def test_nobody_approves_a_task_they_own_or_a_version_they_wrote_admins_included(
    task, author, admin, reviewer, django_user_model
):
    from tests.support.users import make_user

    owner_admin = make_user(django_user_model, "olga", "admin", "author")
    own = authoring_services.task_create(
        slug="admins-own", environment=task.environment, author=owner_admin, content=task_content()
    )
    pass_gates(own.latest_version, owner_admin)
    services.task_submit(task=own, user=owner_admin)
    with pytest.raises(NotAllowed, match="You own"):
        services.review_create(task_version=own.latest_version, reviewer=owner_admin, decision="approve")

    # an admin who edited someone else's task wrote that version: not theirs to approve either
    authoring_services.task_version_create(
        task=task, author=admin, base_version=1, content=task_content(title="admin's edit")
    )
    pass_gates(task.latest_version, author)
    services.task_submit(task=task, user=author)
    with pytest.raises(NotAllowed, match="You wrote v2"):
        services.review_create(task_version=task.latest_version, reviewer=admin, decision="approve")
    services.review_create(task_version=task.latest_version, reviewer=reviewer, decision="approve")
    task.refresh_from_db()
    assert task.status == Task.Status.APPROVED


def test_a_request_for_changes_needs_a_comment_on_the_task_or_a_check(submitted, reviewer):
    version = submitted.latest_version
    for comment, check_comments in (("", {}), ("   ", {"says_42": "  "})):
        with pytest.raises(DomainError) as caught:
            services.review_create(
                task_version=version,
                reviewer=reviewer,
                decision="request_changes",
                comment=comment,
                check_comments=check_comments,
            )
        assert caught.value.code == "comment_required"
    services.review_create(
        task_version=version,
        reviewer=reviewer,
        decision="request_changes",
        check_comments={"says_42": "Accept 42.0 too."},
    )
    submitted.refresh_from_db()
    assert submitted.status == Task.Status.CHANGES_REQUESTED
    thread = Comment.objects.get()
    assert (thread.check_id, thread.body, thread.task_version_id) == ("says_42", "Accept 42.0 too.", version.pk)


def test_a_comment_on_an_unknown_check_says_which(submitted, reviewer):
    with pytest.raises(DomainError) as caught:
        services.review_create(
            task_version=submitted.latest_version, reviewer=reviewer, decision="comment", check_comments={"nope/x": "?"}
        )
    assert caught.value.details[0]["pointer"] == "/check_comments/nope~1x"


def test_a_new_version_of_an_approved_task_is_a_draft_and_the_approved_version_stays(submitted, author, reviewer):
    services.review_create(task_version=submitted.latest_version, reviewer=reviewer, decision="approve")
    authoring_services.task_version_create(
        task=submitted, author=author, base_version=1, content=task_content(title="changed")
    )
    submitted.refresh_from_db()
    assert submitted.status == Task.Status.DRAFT
    assert submitted.approved_version.number == 1 and submitted.latest_version.number == 2


def test_submit_is_refused_until_every_gate_passes_for_that_version(task, author):
    with pytest.raises(DomainError) as caught:
        services.task_submit(task=task, user=author)
    assert caught.value.code == "gates_failed" and caught.value.http_status == 409
    assert {d["pointer"] for d in caught.value.details} == {
        "/gates/oracle",
        "/gates/nop",
        "/gates/hack:echo-prompt",
        "/gates/hack:keyword-stuffing",
        "/gates/hack:exhaust",
    }
    finished_preview(task.latest_version, author, "oracle", [1.0, 1.0, 0.0])  # the oracle fails once
    finished_preview(task.latest_version, author, "nop", [0.0, 0.0, 0.0])
    finished_preview(task.latest_version, author, "hack:echo-prompt", [0.0])
    finished_preview(task.latest_version, author, "hack:keyword-stuffing", [0.0])
    finished_preview(task.latest_version, author, "hack:exhaust", [0.0])
    with pytest.raises(DomainError) as caught:
        services.task_submit(task=task, user=author)
    assert [d["pointer"] for d in caught.value.details] == ["/gates/oracle"]
    assert "2 of 3 passed" in caught.value.details[0]["message"]
    task.refresh_from_db()
    assert task.status == Task.Status.DRAFT and not Submission.objects.exists()


def test_previews_of_an_earlier_version_do_not_open_the_gates(task, author):
    pass_gates(task.latest_version, author)
    authoring_services.task_version_create(task=task, author=author, base_version=1, content=task_content(title="v2"))
    with pytest.raises(DomainError, match="until every gate passes"):
        services.task_submit(task=task, user=author)


def test_only_an_admin_overrides_failing_gates_and_the_reason_is_audited(task, author, admin):
    with pytest.raises(NotAllowed):
        services.task_submit(task=task, user=author, override_reason="trust me")
    submission = services.task_submit(task=task, user=admin, override_reason="oracle needs the network")
    assert submission.override_reason == "oracle needs the network"
    assert {gate["gate"] for gate in submission.gates if gate["status"] != "pass"} >= {"oracle", "nop"}
    event = AuditEvent.objects.filter(verb="submit").get()
    assert event.data["override_reason"] == "oracle needs the network" and "overridden" in event.summary


def test_roles_limit_who_reviews_and_submits(submitted, other_author, task):
    with pytest.raises(NotAllowed):
        services.review_create(task_version=submitted.latest_version, reviewer=other_author, decision="approve")
    with pytest.raises(NotAllowed):
        services.task_submit(task=task, user=other_author)


def test_the_author_hears_of_reviews_and_replies_and_the_reviewer_of_the_answers(submitted, author, reviewer):
    services.review_create(
        task_version=submitted.latest_version,
        reviewer=reviewer,
        decision="request_changes",
        comment="Tighten the regex.",
    )
    thread = Comment.objects.get()
    services.comment_create(task=submitted, user=author, body="Done in v2.", parent=thread)
    services.comment_resolve(comment=thread, user=author)
    author_items = list(InboxItem.objects.filter(recipient=author).values_list("kind", flat=True))
    reviewer_items = list(InboxItem.objects.filter(recipient=reviewer).order_by("id").values_list("kind", flat=True))
    assert author_items == ["changes_requested"]
    assert reviewer_items == ["reply", "resolved"]
    thread.refresh_from_db()
    assert thread.is_resolved and thread.resolved_by == author


def test_an_approval_tells_the_author_its_task_comment_and_every_check_comment(submitted, author, reviewer):
    services.review_create(
        task_version=submitted.latest_version,
        reviewer=reviewer,
        decision="approve",
        comment="Clear and well graded.",
        check_comments={"says_42": "Worth more points."},
    )
    item = InboxItem.objects.get(recipient=author)
    assert item.kind == "approved"
    assert item.text == "Clear and well graded.\nsays_42: Worth more points."


def test_a_comment_that_fits_its_box_fits_the_limit_whatever_its_line_ends(submitted, reviewer, settings):
    """A browser's maxlength counts a line end as one character and sends CRLF: the limit counts \n."""
    settings.REVIEW_COMMENT_MAX_CHARS = 9  # "line\nline"; sent as "line\r\nline", 10
    review = services.review_create(
        task_version=submitted.latest_version, reviewer=reviewer, decision="comment", comment="line\r\nline"
    )
    assert review.comment == "line\nline"


def test_comments_are_bounded_and_refuse_nul(submitted, reviewer, settings):
    settings.REVIEW_COMMENT_MAX_CHARS = 10
    with pytest.raises(DomainError) as caught:
        services.comment_create(task=submitted, user=reviewer, body="x" * 11)
    assert caught.value.code == "too_long" and "GYMWRIGHT_REVIEW_COMMENT_MAX_CHARS" in caught.value.message
    with pytest.raises(DomainError) as caught:
        services.review_create(
            task_version=submitted.latest_version,
            reviewer=reviewer,
            decision="comment",
            check_comments={"says_42": "a\x00b"},
        )
    assert caught.value.details[0]["pointer"] == "/check_comments/says_42"


def test_a_hack_probe_that_scores_blocks_submission_and_names_the_check_that_rewarded_it(task, author):
    from grading.services import grade_from_document, grade_record

    pass_gates(task.latest_version, author)
    run = finished_preview(task.latest_version, author, "hack:keyword-stuffing", [0.75])
    rollout = run.rollouts.get()
    document = {
        "schema": "gymwright.grade/v1",
        "reward": 0.75,
        "earned": 3,
        "max": 4,
        "passed": True,
        "gated": False,
        "complete": True,
        "checks": [
            {"id": "says_42", "kind": "string_match", "status": "scored", "score": 1.0, "points": 3, "awarded": 3},
            {"id": "report_exists", "kind": "file_exists", "status": "scored", "score": 0.0, "points": 1, "awarded": 0},
        ],
    }
    rollout.grade = grade_record(
        grade=grade_from_document(document), task_version=task.latest_version, source="rollout", rollout_id=rollout.pk
    )
    rollout.save(update_fields=["grade"])
    with pytest.raises(DomainError) as caught:
        services.task_submit(task=task, user=author)
    [detail] = caught.value.details
    assert detail["pointer"] == "/gates/hack:keyword-stuffing"
    assert "above its limit of 0.10: rewarded by says_42" in detail["message"]


@pytest.mark.parametrize("decision", ["approve", "request_changes", "comment"])
def test_submitting_and_every_review_decision_make_the_tasks_updated_time_current(task, author, reviewer, decision):
    pass_gates(task.latest_version, author)
    before_submit = Task.objects.get(pk=task.pk).updated_at
    services.task_submit(task=task, user=author)
    submitted_at = Task.objects.get(pk=task.pk).updated_at
    assert submitted_at > before_submit
    services.review_create(task_version=task.latest_version, reviewer=reviewer, decision=decision, comment="noted")
    reviewed = Task.objects.get(pk=task.pk)
    review = Review.objects.get(task_version=task.latest_version)
    assert reviewed.updated_at > submitted_at and reviewed.updated_at >= review.created_at


def test_only_reviews_services_write_a_tasks_status():
    """Authoring keeps Task.status; review's services alone change it (a new version reaches review through
    authoring's version-created hook, an approving import through versions_approve_on_import)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    # Task.objects....update(..., status=...) or an assignment `... status = Task.Status.X`
    write = re.compile(r"(Task\.objects[^#]*\.update\([^#]*\bstatus=|status = Task\.Status\.)")
    offenders = [
        f"{path.relative_to(root)}:{number}"
        for app in ("accounts", "authoring", "grading", "sandbox", "packs", "gymwright")
        for path in (root / app).rglob("*.py")
        if "migrations" not in path.parts
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if write.search(line)
    ]
    assert offenders == []
    assert write.search((root / "review" / "services.py").read_text())  # the pattern finds review's own writes


def test_a_task_in_review_or_approved_cannot_be_submitted_again(submitted, author, reviewer):
    for status in (Task.Status.IN_REVIEW, Task.Status.APPROVED):
        if status == Task.Status.APPROVED:
            services.review_create(task_version=submitted.latest_version, reviewer=reviewer, decision="approve")
        submitted.refresh_from_db()
        assert submitted.status == status
        with pytest.raises(DomainError) as caught:
            services.task_submit(task=submitted, user=author)
        assert caught.value.code == "invalid_state" and caught.value.http_status == 409
        assert submitted.slug in caught.value.message and "only a draft" in caught.value.message
        submitted.refresh_from_db()
        assert submitted.status == status  # unchanged: no second submission, no audit event
        assert Submission.objects.filter(task_version__task=submitted).count() == 1
        assert AuditEvent.objects.filter(verb="submit").count() == 1


def test_a_task_with_changes_requested_can_be_submitted_again(submitted, author, reviewer):
    services.review_create(
        task_version=submitted.latest_version, reviewer=reviewer, decision="request_changes", comment="tighten it"
    )
    services.task_submit(task=submitted, user=author)
    submitted.refresh_from_db()
    assert submitted.status == Task.Status.IN_REVIEW
    assert Submission.objects.filter(task_version__task=submitted).count() == 2


def test_only_the_latest_version_can_be_submitted(task, author):
    first = task.latest_version
    authoring_services.task_version_create(task=task, author=author, base_version=1, content=task_content(title="v2"))
    pass_gates(task.latest_version, author)
    with pytest.raises(ConflictError) as caught:
        services.task_submit(task=task, user=author, task_version=first)
    assert caught.value.code == "not_latest" and caught.value.extra == {"latest_version": 2}
    task.refresh_from_db()
    assert task.status == Task.Status.DRAFT and not Submission.objects.exists()
    services.task_submit(task=task, user=author, task_version=task.latest_version)
    assert Submission.objects.get().task_version.number == 2


def test_an_override_reason_is_kept_only_when_it_overrode_a_failing_gate(task, admin, author):
    pass_gates(task.latest_version, author)
    submission = services.task_submit(task=task, user=admin, override_reason="just in case")
    assert submission.override_reason == ""  # every gate passed: nothing was overridden
    event = AuditEvent.objects.filter(verb="submit").get()
    assert "overridden" not in event.summary and "override_reason" not in event.data
