"""The world the permission matrix (test_permission_matrix.py) asks about: a user per role, each with an API token,
and every object a route names, made through the services where there is one (so each is as the product makes it).

- `ENV`, the owner's environment;
- `REVIEW`, the owner's task: v1 approved by the reviewer, then v2 (with example answers, a new title and a new tag,
  which hold `UNAPPROVED` as its prompt does), submitted and in review;
  both with an attached file, a preview (one rollout graded, one still queued) and its grade with a scored judge
  check (v1's labelled by the reviewer, v2's waiting in the labelling queue); the reviewer's comment thread on it;
- `DRAFT`, the owner's task that was never approved, whose gates pass (the owner may submit it);
- `PACK`, the lab member's pack: `1.0.0` built and ready (an archive to download), `2.0.0` still building;
- a dry run of the owner's waiting for the judge, and a judge endpoint, so that judge work is queued for a worker,
  never run here (jobs are enqueued on commit, and the matrix rolls back each request); and another of the owner's
  dry runs, on v1 and done, with its grade (the target `dry-run`).
"""

from __future__ import annotations

from django.contrib.auth.models import Group
from rest_framework.authtoken.models import Token

ANON, NOROLE, OWNER, OTHER, REVIEWER, ADMIN, LAB = "anon", "norole", "owner", "other", "reviewer", "admin", "lab"
ROLES = (ANON, NOROLE, OWNER, OTHER, REVIEWER, ADMIN, LAB)
USERNAMES = {NOROLE: "nobody", OWNER: "alice", OTHER: "bob", REVIEWER: "rita", ADMIN: "adam", LAB: "lena"}
GROUPS = {NOROLE: (), OWNER: ("author",), OTHER: ("author",), REVIEWER: ("reviewer",), ADMIN: ("admin",), LAB: ("lab",)}

ENV, REVIEW, DRAFT, PACK = "matrix-env-q7", "matrix-review-q7", "matrix-draft-q7", "matrix-pack-q7"
UNAPPROVED = "unapproved-words-q7"  # in the prompt of every version no reviewer approved (and in v2's title and
#                                     tags): a lab member never reads it
NAMES = (ENV, REVIEW, DRAFT)  # a member with no role is shown none of them, anywhere

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 2, "mode": "contains", "expected": "42"},
        {"id": "explains", "kind": "llm_judge", "points": 1, "criterion": "Explains how the answer was found."},
    ],
}
PLAIN_RUBRIC = {"schema": "gymwright.rubric/v1", "pass_threshold": 0.5, "checks": [RUBRIC["checks"][0]]}
GRADE = {
    "schema": "gymwright.grade/v1",
    "reward": 1.0,
    "earned": 3,
    "max": 3,
    "passed": True,
    "gated": False,
    "complete": True,
    "checks": [
        {
            "id": "says_42",
            "kind": "string_match",
            "status": "scored",
            "score": 1.0,
            "points": 2,
            "awarded": 2,
            "explanation": "answer contains '42'",
            "duration_ms": 0,
        },
        {
            "id": "explains",
            "kind": "llm_judge",
            "status": "scored",
            "score": 1.0,
            "points": 1,
            "awarded": 1,
            "explanation": "Shows the multiplication.",
            "votes": [True],
            "duration_ms": 5,
        },
    ],
}
EXAMPLES = [{"name": "right", "answer": "It is 42.", "expect": "pass"}]


def content(*, prompt: str, rubric: dict = RUBRIC, **extra) -> dict:
    return {
        "title": "Six times seven",
        "prompt": prompt,
        "rubric": rubric,
        "solution": {"script": None, "answer": "42"},
        "tags": ["maths"],
        **extra,
    }


def password_of(role: str) -> str:
    return f"pw-{USERNAMES[role]}"


def build_world(django_user_model) -> dict:
    """The users (by role), their tokens and the values each route's URL takes (see the module's docstring)."""
    from authoring import services as authoring_services
    from grading.models import CheckResult, DryRun, ExampleRun, ModelEndpoint
    from grading.services import grade_from_document, grade_record, judge_label_record
    from packs import services as pack_services
    from review import gate_evidence as review_gates
    from review import services as review_services
    from review.models import BlindRule
    from sandbox.models import PreviewRun, Rollout
    from tests.packs.conftest import build_and_verify
    from tests.review.conftest import pass_gates

    users = {}
    for role, username in USERNAMES.items():
        user = django_user_model.objects.create_user(username=username, password=password_of(role))
        for group in GROUPS[role]:
            user.groups.add(Group.objects.get_or_create(name=group)[0])
        users[role] = user
    admin = users[ADMIN]
    admin.is_staff = admin.is_superuser = True  # Django's admin site: staff only
    admin.save()
    owner, reviewer = users[OWNER], users[REVIEWER]
    tokens = {role: Token.objects.create(user=user).key for role, user in users.items()}
    ModelEndpoint.objects.create(
        name="matrix-judge",
        role=ModelEndpoint.Role.JUDGE,
        base_url="http://127.0.0.1:9/v1",
        model="judge",
        is_default=True,
    )

    environment = authoring_services.environment_create(
        slug=ENV, name="Matrix shell", author=owner, spec={"network": "none"}
    )
    notes = authoring_services.blob_store(data=b"the notes of the task\n")
    files = [{"path": "notes.txt", "sha256": notes.sha256}]
    task = authoring_services.task_create(
        slug=REVIEW,
        environment=environment,
        author=owner,
        content=content(prompt="What is six times seven?", files=files),
    )
    v1 = task.latest_version
    review_services.task_submit(task=task, user=admin, override_reason="matrix: approved without previews")
    review_services.review_create(task_version=v1, reviewer=reviewer, decision="approve")
    task.refresh_from_db()
    v2, _ = authoring_services.task_version_create(
        task=task,
        author=owner,
        base_version=1,
        content=content(
            title=f"Six sevens ({UNAPPROVED})",
            prompt=f"What is six times seven? ({UNAPPROVED})",
            files=files,
            examples=EXAMPLES,
            tags=["maths", UNAPPROVED],
        ),
    )
    ExampleRun.objects.filter(task_version=v2).update(status=ExampleRun.Status.DONE)  # graded: "Grade again" may run
    task.refresh_from_db()
    review_services.task_submit(task=task, user=admin, override_reason="matrix: in review without previews")
    comment = review_services.comment_create(task=task, user=reviewer, body="Is 42.0 fine?", check_id="says_42")

    previews = {}
    for version in (v1, v2):
        run = PreviewRun.objects.create(
            task_version=version,
            created_by=owner,
            policy="oracle",
            policy_kind="oracle",
            n=2,
            backend="bubblewrap",
            status=PreviewRun.Status.RUNNING,
        )
        done = Rollout.objects.create(preview_run=run, index=0, status=Rollout.Status.DONE, reward=1.0, passed=True)
        Rollout.objects.create(preview_run=run, index=1)  # queued: a cancel changes it
        grade = grade_record(
            grade=grade_from_document(GRADE), task_version=version, source="rollout", user=owner, rollout_id=done.pk
        )
        Rollout.objects.filter(pk=done.pk).update(grade=grade)
        previews[version.number] = {
            "preview_run_id": run.pk,
            "rollout_id": done.pk,
            "grade_id": grade.pk,
            "check_result_id": grade.check_results.get(check_id="explains").pk,
        }
    judge_label_record(
        check_result=CheckResult.objects.get(pk=previews[1]["check_result_id"]), reviewer=reviewer, verdict="agree"
    )  # v1's; v2's judged check waits in the labelling queue

    BlindRule.objects.create(environment=environment)  # the admin's pages of it name one

    draft = authoring_services.task_create(
        slug=DRAFT,
        environment=environment,
        author=owner,
        content=content(prompt=f"A draft ({UNAPPROVED})", rubric=PLAIN_RUBRIC),
    )
    pass_gates(draft.latest_version, owner)
    assert all(result.ok for result in review_gates.gates_evaluate(task_version=draft.latest_version))

    dry_run = DryRun.objects.create(rubric=RUBRIC, answer="It is 42.", created_by=owner)
    dry_run_grade = grade_record(grade=grade_from_document(GRADE), task_version=v1, source="dry_run", user=owner)
    DryRun.objects.create(
        task=task,
        task_version=v1,
        rubric=RUBRIC,
        answer="It is 42.",
        created_by=owner,
        status=DryRun.Status.DONE,
        grade=dry_run_grade,
    )

    pack = pack_services.pack_create(slug=PACK, user=users[LAB], name="Matrix pack")
    ready = pack_services.pack_version_start(
        pack=pack, user=users[LAB], selection=pack_services.Selection(), enqueue=False
    )
    ready = build_and_verify(ready.pk)
    building = pack_services.pack_version_start(
        pack=pack, user=users[LAB], selection=pack_services.Selection(), version="2.0.0", enqueue=False
    )
    assert (ready.version, ready.status, building.status) == ("1.0.0", "ready", "building")

    from packs.models import DatasetCheck

    # A dataset's health report: the importer's (the owner's here), and every admin's to read.
    health = DatasetCheck.objects.create(source="matrix.tar.gz", status=DatasetCheck.Status.DONE, created_by=owner)
    values = {
        "check_id": health.pk,
        "number": 2,
        "path": "notes.txt",
        **previews[2],
        "dry_run_id": dry_run.pk,
        "comment_id": comment.pk,
        "version": "1.0.0",
        "name": "rubric",
    }
    targets = {
        "-": values,
        "v1": {**values, "number": 1, **previews[1]},  # the approved version: a lab member reads it
        "draft": {**values, "task": DRAFT, "number": 1},  # never approved, gates pass
        "building": {**values, "version": "2.0.0"},  # a pack version still building
        "dry-run": {**values, "number": 1, **previews[1], "grade_id": dry_run_grade.pk},  # the owner's, on v1
    }
    return {"users": users, "tokens": tokens, "targets": targets}
