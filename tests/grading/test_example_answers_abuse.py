"""Hostile example answers: what an author (or a script through the API) can put in `examples` is
bounded and refused with the field named; nothing is saved and nothing is written outside a
fresh workspace."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from authoring.models import TaskVersion
from grading.engine.models import (
    EXAMPLE_ANSWER_MAX_CHARS,
    EXAMPLE_FILE_MAX_CHARS,
    EXAMPLE_MAX_FILES,
    MAX_EXAMPLES,
)
from grading.models import ExampleRun
from tests.grading.test_example_answers import content, environment, task  # noqa: F401

pytestmark = pytest.mark.django_db


def post_examples(task, examples) -> tuple[int, dict]:
    api = APIClient()
    api.force_authenticate(task.owner)
    response = api.post(
        f"/api/tasks/{task.slug}/versions/", {**content(examples=examples), "base_version": 1}, format="json"
    )
    return response.status_code, response.json()


def pointers(body: dict) -> dict[str, str]:
    return {detail["pointer"]: detail["message"] for detail in body["error"]["details"]}


def one(**example) -> list[dict]:
    return [{"name": "attack", "answer": "x", "expect": "fail", **example}]


@pytest.mark.parametrize(
    "path, words",
    [
        ("/etc/passwd", "is absolute"),
        ("../../outside.txt", "contains '..'"),
        ("out/../../x", "contains '..'"),
        ("C:/Windows/x", "is absolute"),
        ("a\\..\\b", "contains a backslash"),
        ("a//b", "empty segment"),
        ("nul\x00byte", "NUL"),
    ],
)
def test_hostile_paths_are_refused_at_the_file(task, path, words):
    status, body = post_examples(task, one(files=[{"path": path, "content": "x"}]))
    assert status == 400
    assert words in pointers(body)["/examples/0/files/0/path"]


def test_a_path_that_is_both_a_file_and_a_folder_is_refused(task):
    status, body = post_examples(task, one(files=[{"path": "out", "content": "x"}, {"path": "out/a", "content": "y"}]))
    assert status == 400 and "both a file and a folder" in pointers(body)["/examples/0/files/1/path"]


def test_huge_answers_files_and_counts_are_refused(task):
    status, body = post_examples(task, one(answer="A" * (EXAMPLE_ANSWER_MAX_CHARS + 1)))
    assert status == 400 and "at most" in pointers(body)["/examples/0/answer"]
    status, body = post_examples(task, one(files=[{"path": "big.txt", "content": "B" * (EXAMPLE_FILE_MAX_CHARS + 1)}]))
    assert status == 400 and "at most" in pointers(body)["/examples/0/files/0/content"]
    files = [{"path": f"f{i}", "content": ""} for i in range(EXAMPLE_MAX_FILES + 1)]
    status, body = post_examples(task, one(files=files))
    assert status == 400 and "too many items" in pointers(body)["/examples/0/files"]
    many = [{"name": f"e{i}", "answer": "x", "expect": "fail"} for i in range(MAX_EXAMPLES + 1)]
    status, body = post_examples(task, many)
    assert status == 400 and "too many items" in pointers(body)["/examples"]
    assert TaskVersion.objects.filter(task=task).count() == 1


def test_control_characters_and_nul_bytes_are_refused(task):
    status, body = post_examples(task, one(name="line\nbreak"))
    assert status == 400 and "/examples/0/name" in pointers(body)
    status, body = post_examples(task, one(answer="before\x00after"))
    assert status == 400 and any(pointer.startswith("/examples") for pointer in pointers(body)), body


def test_not_a_list_and_not_objects_are_refused_with_pointers(task):
    status, body = post_examples(task, {"name": "x"})
    assert status == 400 and "/examples" in pointers(body)
    status, body = post_examples(task, ["just text"])
    assert status == 400 and "/examples/0" in pointers(body)


def test_a_pattern_that_backtracks_on_an_example_is_stopped_not_the_server(author, environment):
    from authoring import services as authoring_services

    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [{"id": "slow", "kind": "regex", "points": 1, "pattern": "(a+)+$"}],
    }
    task = authoring_services.task_create(
        slug="slow",
        environment=environment,
        author=author,
        content=content(rubric=rubric, examples=[{"name": "evil", "answer": "a" * 40 + "!", "expect": "fail"}]),
    )
    run = ExampleRun.objects.get(task_version=task.latest_version)
    assert run.status == ExampleRun.Status.DONE
    # Bounded by the check's CPU budget (or the child's limits): no verdict, never a pass.
    assert run.results[0]["status"] in ("as_expected", "incomplete", "error")
    assert run.results[0]["got"] != "pass"
