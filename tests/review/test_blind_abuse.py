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
