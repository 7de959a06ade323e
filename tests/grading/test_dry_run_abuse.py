"""Abuse suite for dry runs: a hostile rubric or file posted to the editor's dry-run panel is graded
in a limited child process, so it cannot stall the web process, and every stop is reported."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.support.users import make_user

pytestmark = pytest.mark.django_db

CATASTROPHIC = r"(a+)+$"
EVIL = "a" * 5000 + "!"


def hostile_rubric(count: int) -> dict:
    return {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {"id": f"evil_{index}", "kind": "regex", "points": 1, "pattern": CATASTROPHIC} for index in range(count)
        ]
        + [{"id": "says_a", "kind": "string_match", "points": 1, "expected": "aaa"}],
    }


@pytest.fixture
def logged_in(client, django_user_model, settings):
    settings.OPENAI_BASE_URL = ""
    settings.JUDGE_MODEL = ""
    client.force_login(make_user(django_user_model, "ada", "author"))
    return client


def post(client, rubric, answer="", **extra):
    return client.post(
        "/grading/dry-run/", {"rubric": json.dumps(rubric), "answer": answer, **extra}, HTTP_HX_REQUEST="true"
    )


def test_a_hostile_rubric_is_graded_outside_the_web_process(logged_in, monkeypatch):
    # Four catastrophic checks at 1.5 s each: 6 s of CPU that must not be spent by the web process. A spy on the
    # engine's check evaluation, in this (the web) process only: a child process's calls never reach this list.
    from grading.engine import scoring

    evaluated_here, evaluate = [], scoring.evaluate
    monkeypatch.setattr(scoring, "evaluate", lambda *a, **kw: evaluated_here.append(a[0]) or evaluate(*a, **kw))
    monkeypatch.setenv("GYMWRIGHT_CHECK_CPU_S", "1.5")
    response = post(logged_in, hostile_rubric(4), answer=EVIL)
    assert response.status_code == 200
    text = " ".join(response.content.decode().split())
    assert text.count("CPU-time budget") >= 4, text[:2000]  # each check was graded, and stopped at its budget ...
    assert evaluated_here == [], "the web process graded the dry run itself"  # ... in another process


def test_a_dry_run_over_its_cpu_limit_is_stopped_with_the_setting_named(logged_in, monkeypatch, settings):
    monkeypatch.setenv("GYMWRIGHT_CHECK_CPU_S", "30")
    settings.DRY_RUN_CPU_S = 2
    response = post(logged_in, hostile_rubric(2), answer=EVIL)
    assert response.status_code == 400
    text = " ".join(response.content.decode().split())
    assert "The dry run was stopped" in text and "GYMWRIGHT_DRY_RUN_CPU_S" in text, text[:2000]


def test_a_dry_run_over_its_wall_time_is_stopped_with_the_setting_named(logged_in, monkeypatch, settings):
    monkeypatch.setenv("GYMWRIGHT_CHECK_CPU_S", "30")
    settings.DRY_RUN_TIMEOUT_S = 1
    response = post(logged_in, hostile_rubric(2), answer=EVIL)
    assert response.status_code == 400
    assert "GYMWRIGHT_DRY_RUN_TIMEOUT_S" in response.content.decode()


def test_an_xlsx_bomb_uploaded_to_a_dry_run_is_refused_unread(logged_in):
    from tests.grading.engine.test_engine_abuse import _bomb

    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {
                "id": "q3",
                "kind": "table_cell",
                "points": 1,
                "path": "model.xlsx",
                "row": "Revenue",
                "column": "Q3",
                "expected": 5,
            }
        ],
    }
    response = post(logged_in, rubric, files=[SimpleUploadedFile("model.xlsx", _bomb(1024))], paths=["model.xlsx"])
    assert response.status_code == 200
    assert "GYMWRIGHT_XLSX_MAX_MB" in response.content.decode()


@pytest.mark.parametrize(
    "path, problem",
    [
        ("out/evil\nname.txt", "contains control characters"),
        ("a/" * 200 + "x", "is longer than 255 characters"),
        ("./.", "names the workspace itself"),
        ("a//b", "contains an empty segment"),
    ],
)
def test_a_workspace_path_is_held_to_the_one_set_of_path_rules(logged_in, path, problem):
    from authoring.services import safe_relative_path
    from grading.engine import validate_task
    from gymwright.errors import DomainError

    response = post(
        logged_in,
        {
            "schema": "gymwright.rubric/v1",
            "checks": [{"id": "says_a", "kind": "string_match", "points": 1, "expected": "a"}],
        },
        "a",
        files=[SimpleUploadedFile("f.txt", b"x")],
        paths=[path],
    )
    assert response.status_code == 400 and problem in response.content.decode()
    # An attached file's name and a task document's file path are refused for the same reason.
    with pytest.raises(DomainError, match=problem):
        safe_relative_path(path)
    if problem != "names the workspace itself":  # a document keeps "./." as written; only stored names fold
        assert any(
            problem in issue.message
            for issue in validate_task({"files": [{"path": path}]})
            if issue.pointer == "/files/0/path"
        )
