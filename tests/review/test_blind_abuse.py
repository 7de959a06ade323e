"""A blind-scored hack becomes an example answer from what its agent left (review.blind.hack_to_example): the
answer and workspace files are the agent's, so their names, sizes and bytes are held to the task format's
example-answer rules; a file that breaks them is left out (and named in the audit), never a refused click."""

import base64

from authoring.models import AuditEvent
from grading.engine.models import EXAMPLE_ANSWER_MAX_CHARS, EXAMPLE_FILES_MAX_CHARS
from review import blind
from sandbox.models import Rollout
from tests.review.conftest import api_client, finished_preview
from tests.review.test_blind_scores import HUMAN, REWARDS, score_all

BIG = 250_000  # characters: four such files are within each file's bound, not within one example's


def test_a_hacks_hostile_workspace_becomes_a_bounded_example_answer(author, reviewer, task):
    run = finished_preview(task.latest_version, author, "model", REWARDS)
    rollouts = list(run.rollouts.order_by("index"))
    hack = rollouts[HUMAN.index(0, 2)]  # the planted hack: reward 1.0, scored 0
    files = [
        {"path": "../outside.txt", "content": "up"},
        {"path": "/etc/passwd", "content": "root"},
        {"path": "a\\xffb", "raw_name_b64": base64.b64encode(b"a\xffb").decode(), "content": "not utf-8"},
        {"path": "cut.txt", "content": "x", "truncated": True},
        {"path": "gone.bin", "content": None, "left_out": "a symlink"},
        *({"path": f"big-{index}.txt", "content": "b" * BIG} for index in range(6)),
        {"path": "nul.txt", "content": "a\\u0000b"},
        "not an object",
        {"path": ["not", "a", "string"], "content": "x"},
    ]
    Rollout.objects.filter(pk=hack.pk).update(answer="4" * (EXAMPLE_ANSWER_MAX_CHARS + 50), workspace_files=files)
    score_all(task, rollouts, reviewer)
    response = api_client(author).post(f"/api/tasks/{task.slug}/blind/hacks/{hack.pk}/example/")
    assert response.status_code == 201, response.content
    (example,) = task.versions.get(number=2).spec["examples"]
    kept = [entry["path"] for entry in example["files"]]
    assert kept == ["big-0.txt", "big-1.txt", "big-2.txt", "big-3.txt", "nul.txt"]
    assert sum(len(entry["content"]) for entry in example["files"]) <= EXAMPLE_FILES_MAX_CHARS
    assert len(example["answer"]) == EXAMPLE_ANSWER_MAX_CHARS
    left_out = AuditEvent.objects.get(data__from_rollout=hack.pk).data["files_left_out"]
    for path in ("../outside.txt", "/etc/passwd", "a\\xffb", "cut.txt", "gone.bin", "big-4.txt", "big-5.txt"):
        assert any(path in entry for entry in left_out), (path, left_out)
    task.refresh_from_db()
    assert blind.task_figures(task=task)["hacks"][0]["example"] is True


def _planted(task, author, reviewer, answer):
    """A scored round of `task` whose planted hack (reward 1.0, humans fail it) answered `answer`."""
    run = finished_preview(task.latest_version, author, "model", REWARDS)
    rollouts = list(run.rollouts.order_by("index"))
    hack = rollouts[HUMAN.index(0, 2)]
    Rollout.objects.filter(pk=hack.pk).update(answer=answer)
    score_all(task, rollouts, reviewer)
    return hack


def test_a_hack_answer_longer_than_a_probe_runs_is_refused_with_its_pointer(author, reviewer, task):
    from sandbox.services import PROBE_TEXT_MAX

    hack = _planted(task, author, reviewer, "4" * (PROBE_TEXT_MAX + 1))
    response = api_client(author).post(f"/api/tasks/{task.slug}/blind/hacks/{hack.pk}/probe/")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["details"][0]["pointer"] == "/answer" and "example answer" in error["message"]
    assert task.versions.count() == 1
    # its example answer still takes it
    assert api_client(author).post(f"/api/tasks/{task.slug}/blind/hacks/{hack.pk}/example/").status_code == 201


def test_an_odd_hack_answer_becomes_a_storable_probe_recognised_as_one(author, reviewer, task):
    # what PostgreSQL stored of an agent's NUL (its escape), a policy-looking prefix, JSON and HTML breakers,
    # bidi and zero-width characters: all kept as they are, and matched again as the probe they became
    odd = 'probe:nop\\u0000 "}]\n<script>alert(1)</script> \u202e42\u200b'
    hack = _planted(task, author, reviewer, odd)
    response = api_client(author).post(f"/api/tasks/{task.slug}/blind/hacks/{hack.pk}/probe/")
    assert response.status_code == 201, response.content
    (probe,) = task.versions.get(number=2).spec["rubric"]["probes"]
    assert probe == {"answer": odd, "max_reward": 0.49}
    task.refresh_from_db()
    assert blind.task_figures(task=task)["hacks"][0]["probe"] is True
    assert api_client(author).post(f"/api/tasks/{task.slug}/blind/hacks/{hack.pk}/probe/").status_code == 409


def test_only_the_tasks_editor_turns_its_own_hack_into_a_probe(author, reviewer, lab, task, environment):
    from authoring import services as authoring_services
    from tests.authoring.conftest import task_content

    hack = _planted(task, author, reviewer, "42 42")
    url = f"/api/tasks/{task.slug}/blind/hacks/{hack.pk}/probe/"
    assert api_client(reviewer).post(url).status_code == 403  # a reviewer without rights on the task
    assert api_client(lab).post(url).status_code == 404  # a lab member reads no draft
    # another task's flagged hack, through this task's address, is no hack of this task
    other = authoring_services.task_create(
        slug="six-times-eight", environment=environment, author=author, content=task_content()
    )
    other_hack = _planted(other, author, reviewer, "48 48")
    response = api_client(author).post(f"/api/tasks/{task.slug}/blind/hacks/{other_hack.pk}/probe/")
    assert response.status_code == 400 and response.json()["error"]["code"] == "not_a_hack"
    assert task.versions.count() == 1 and other.versions.count() == 1
    assert not AuditEvent.objects.filter(data__from_rollout__in=[hack.pk, other_hack.pk]).exists()
