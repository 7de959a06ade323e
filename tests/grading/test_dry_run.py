import json
import re
from datetime import timedelta

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from grading.models import DryRun, Grade, ModelEndpoint
from tests.grading.conftest import RUBRIC
from tests.support.openai_server import OpenAIServer
from tests.support.users import make_user

pytestmark = pytest.mark.django_db

JUDGED_RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {"id": "says_42", "kind": "string_match", "points": 3, "expected": "42"},
        {"id": "explains", "kind": "llm_judge", "points": 2, "criterion": "Explains why the answer is 42."},
        {"id": "report", "kind": "file_exists", "points": 1, "path": "out/report.md"},
    ],
}


@pytest.fixture
def logged_in(client, author):
    client.force_login(author)
    return client


@pytest.fixture
def no_judge(settings):
    settings.OPENAI_BASE_URL = ""
    settings.JUDGE_MODEL = ""


@pytest.fixture
def judge_server(monkeypatch):
    monkeypatch.setenv("GYMWRIGHT_TEST_JUDGE_KEY", "test-key")
    with OpenAIServer(default='{"met": true, "explanation": "It says six times seven."}') as server:
        ModelEndpoint.objects.create(
            name="judge",
            role="judge",
            base_url=server.base_url,
            model="test-judge",
            api_key_env="GYMWRIGHT_TEST_JUDGE_KEY",
            is_default=True,
        )
        yield server


def post_dry_run(client, rubric, answer="", **extra):
    data = {"rubric": rubric if isinstance(rubric, str) else json.dumps(rubric), "answer": answer, **extra}
    return client.post("/grading/dry-run/", data, HTTP_HX_REQUEST="true")


def text_of(response) -> str:
    return " ".join(response.content.decode().split())


# ---------------------------------------------------------------- deterministic, in the request


def test_a_deterministic_rubric_is_graded_in_the_request(logged_in, task_version, no_judge):
    # In the request (in a limited child process, see test_dry_run_abuse.py), with nothing queued.
    response = post_dry_run(logged_in, RUBRIC, "It is 42 meters.", task="answer-42", version="1")

    assert response.status_code == 200
    assert "5 / 5 points, reward 1.00, passed" in text_of(response)
    assert DryRun.objects.count() == 0 and Grade.objects.count() == 0  # nothing stored for a quick dry run


def test_the_total_counts_only_met_checks(logged_in, no_judge):
    response = post_dry_run(logged_in, RUBRIC, "It is 42.")

    body = text_of(response)
    assert "3 / 5 points, reward 0.60, not passed" in body
    assert 'data-check-id="says_42"' in body and 'data-check-id="has_unit"' in body


def test_command_checks_need_a_sandbox_and_make_the_grade_incomplete(logged_in, no_judge):
    rubric = {
        **RUBRIC,
        "checks": RUBRIC["checks"] + [{"id": "tests_pass", "kind": "command", "points": 10, "run": "pytest -q"}],
    }

    response = post_dry_run(logged_in, rubric, "42 meters")

    body = text_of(response)
    assert "needs a sandbox" in body
    # No verdict as the headline while 10 of the 15 points could not be scored.
    # The 10 unscored points stay in max: the reward is its lower bound, 5 of 15, and the range is shown.
    assert (
        "incomplete — reward 0.33–1.00, 1 check unscored: needs a sandbox to run in, and none was given" in body
    ) and "passed" not in body
    assert "5 / 15 points earned by the scored checks: reward 0.33–1.00, the lower bound, not a verdict" in body


def test_group_children_are_indented_under_their_group(logged_in, no_judge):
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {
                "id": "core",
                "kind": "group",
                "points": 4,
                "aggregate": "all",
                "checks": [
                    {"id": "a", "kind": "string_match", "points": 1, "expected": "42"},
                    {"id": "b", "kind": "string_match", "points": 1, "expected": "meters"},
                ],
            }
        ],
    }

    response = post_dry_run(logged_in, rubric, "42 meters")

    body = text_of(response)
    assert 'data-check-id="core" data-depth="0"' in body
    assert 'data-check-id="a" data-depth="1"' in body and 'data-check-id="b" data-depth="1"' in body
    assert "4 / 4 points, reward 1.00, passed" in body


def test_workspace_files_are_graded_in_the_request(logged_in, no_judge):
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {"id": "report", "kind": "file_content", "points": 2, "path": "out/report.md", "contains": "revenue"}
        ],
    }
    upload = SimpleUploadedFile("report.md", b"# Q3\nrevenue went up\n")

    response = post_dry_run(logged_in, rubric, "", files=[upload], paths=["out/report.md"])

    assert "2 / 2 points, reward 1.00, passed" in text_of(response)


def test_an_answer_file_is_read_as_utf8(logged_in, no_judge):
    upload = SimpleUploadedFile("answer.txt", "\ufeff42 meters — done".encode())

    response = post_dry_run(logged_in, RUBRIC, "", answer_file=upload)

    assert "5 / 5 points" in text_of(response)


# ---------------------------------------------------------------- the judge


def test_judge_checks_are_unscored_when_no_judge_is_configured(logged_in, no_judge):
    response = post_dry_run(logged_in, JUDGED_RUBRIC, "42")

    body = text_of(response)
    assert response.status_code == 200
    assert "no judge model configured" in body
    assert "2 checks unscored" in body  # the judge check and the file check (no workspace)
    assert re.search(r"incomplete — reward \d\.\d\d–\d\.\d\d, 2 checks unscored: ", body)
    assert DryRun.objects.count() == 0


def test_judge_checks_are_graded_by_a_worker_then_shown(
    logged_in, author, task_version, judge_server, eager_celery, django_capture_on_commit_callbacks
):
    report = SimpleUploadedFile("report.md", b"the report")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = post_dry_run(
            logged_in, JUDGED_RUBRIC, "42, because 6 x 7", task="answer-42", version="1", files=[report], folder="out"
        )

    body = text_of(response)
    dry_run = DryRun.objects.get()
    assert response.status_code == 200
    assert dry_run.status == "queued" and dry_run.task_version == task_version and dry_run.created_by == author
    assert f'hx-get="/grading/dry-runs/{dry_run.pk}/" hx-trigger="every 1s"' in body
    assert "waiting for the judge" in body and "1 judge check pending" in body
    assert "so far 4 / 6 points, reward 0.67–1.00" in body  # the deterministic part, shown at once, no verdict yet
    assert judge_server.calls == 0
    assert len(callbacks) == 1
    stored_name = dry_run.files[0]["name"]
    assert dry_run.files[0]["path"] == "out/report.md" and default_storage.exists(stored_name)

    callbacks[0]()  # the enqueue: runs the job at once (CELERY_TASK_ALWAYS_EAGER)

    dry_run.refresh_from_db()
    assert dry_run.status == "done", dry_run.error
    assert judge_server.calls == 1
    assert judge_server.requests[0]["model"] == "test-judge"
    grade = dry_run.grade
    assert grade.source == "dry_run" and grade.task_version == task_version and grade.created_by == author
    assert (grade.earned, grade.max, grade.reward, grade.passed, grade.complete) == (6, 6, 1.0, True, True)
    assert grade.check_results.get(check_id="explains").explanation == "It says six times seven."
    assert not default_storage.exists(stored_name)  # inputs are cleaned up after grading

    polled = logged_in.get(f"/grading/dry-runs/{dry_run.pk}/", HTTP_HX_REQUEST="true")
    body = text_of(polled)
    assert polled.status_code == 200
    assert "6 / 6 points, reward 1.00, passed" in body
    assert "hx-trigger" not in body.split("grade-table")[0]  # polling stops
    assert "It says six times seven." in body


def test_a_failing_job_shows_an_error_instead_of_polling_forever(
    logged_in, judge_server, eager_celery, monkeypatch, django_capture_on_commit_callbacks
):
    from grading import engine

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        post_dry_run(logged_in, JUDGED_RUBRIC, "42")

    def broken_grade(*args, **kwargs):
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(engine, "grade", broken_grade)
    callbacks[0]()

    dry_run = DryRun.objects.get()
    assert dry_run.status == "error" and "the disk is on fire" in dry_run.error
    body = text_of(logged_in.get(f"/grading/dry-runs/{dry_run.pk}/"))
    assert "the disk is on fire" in body and "hx-trigger" not in body


def test_a_redelivered_job_does_not_grade_twice(
    logged_in, judge_server, eager_celery, django_capture_on_commit_callbacks
):
    from grading.tasks import dry_run_grade

    with django_capture_on_commit_callbacks(execute=True):
        post_dry_run(logged_in, JUDGED_RUBRIC, "42")
    dry_run = DryRun.objects.get()
    assert dry_run.status == "done"

    dry_run_grade.delay(dry_run.pk)  # the broker delivers the same message again

    assert Grade.objects.count() == 1 and judge_server.calls == 1


def test_a_stale_running_dry_run_is_failed_when_polled(logged_in, author):
    dry_run = DryRun.objects.create(
        rubric=RUBRIC,
        answer="42",
        created_by=author,
        status="running",
        started_at=timezone.now() - timedelta(hours=2),
        preview={},
    )

    body = text_of(logged_in.get(f"/grading/dry-runs/{dry_run.pk}/"))

    dry_run.refresh_from_db()
    assert dry_run.status == "error" and "stopped" in body


def test_another_users_dry_run_is_not_found(client, author, django_user_model):
    dry_run = DryRun.objects.create(rubric=RUBRIC, answer="42", created_by=author, preview={})
    client.force_login(make_user(django_user_model, "mallory", "author"))

    response = client.get(f"/grading/dry-runs/{dry_run.pk}/")

    assert response.status_code == 404


# ---------------------------------------------------------------- bad input: clear errors, never a 500


def test_invalid_json_shows_where_it_breaks(logged_in):
    response = post_dry_run(logged_in, '{"schema": "gymwright.rubric/v1", "checks": [}', "42")

    body = text_of(response)
    assert response.status_code == 400
    assert "not valid JSON" in body and "line 1, column" in body


def test_an_invalid_rubric_lists_its_issues_with_pointers(logged_in):
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {"id": "zero", "kind": "string_match", "points": 0, "expected": "a"},
            {"id": "Bad Id", "kind": "regex", "points": 1, "pattern": "("},
        ],
    }

    response = post_dry_run(logged_in, rubric, "42")

    body = text_of(response)
    assert response.status_code == 400
    assert "<code>/checks/0/points</code>" in body
    assert "<code>/checks/1/id</code>" in body and "<code>/checks/1/pattern</code>" in body


def test_an_empty_rubric_is_an_error(logged_in):
    response = post_dry_run(logged_in, "", "42")

    assert response.status_code == 400 and "The rubric is empty" in text_of(response)


def test_an_oversized_upload_is_refused(logged_in, settings):
    settings.UPLOAD_MAX_BYTES = 1000
    upload = SimpleUploadedFile("big.bin", b"x" * 5000)

    response = post_dry_run(logged_in, RUBRIC, "42", files=[upload])

    assert response.status_code == 413
    assert "larger than the upload limit" in text_of(response)


@pytest.mark.parametrize(
    "path, problem",
    [
        ("../../etc/passwd", "contains '..'"),
        ("out/../../secret", "contains '..'"),
        ("/etc/passwd", "is absolute"),
        ("out\\evil.txt", "backslash"),
    ],
)
def test_a_path_outside_the_workspace_is_refused(logged_in, path, problem, tmp_path):
    upload = SimpleUploadedFile("passwd", b"root:x:0:0")

    response = post_dry_run(logged_in, RUBRIC, "42", files=[upload], paths=[path])

    assert response.status_code == 400
    assert problem in text_of(response).replace("&#x27;", "'")


def test_a_folder_that_climbs_out_is_refused(logged_in):
    upload = SimpleUploadedFile("notes.txt", b"hi")

    response = post_dry_run(logged_in, RUBRIC, "42", files=[upload], folder="../up")

    assert response.status_code == 400


def test_a_non_utf8_answer_file_is_refused(logged_in):
    upload = SimpleUploadedFile("answer.txt", "42 mètres".encode("latin-1"))

    response = post_dry_run(logged_in, RUBRIC, "", answer_file=upload)

    body = text_of(response)
    assert response.status_code == 400 and "not UTF-8" in body and "0xe8" in body


def test_a_user_without_a_role_cannot_dry_run(client, django_user_model):
    client.force_login(django_user_model.objects.create_user(username="nobody", password="pw"))

    response = post_dry_run(client, RUBRIC, "42")

    assert response.status_code == 403


def test_an_unknown_task_is_a_clear_404(logged_in):
    response = post_dry_run(logged_in, RUBRIC, "42", task="no-such-task", version="9")

    assert response.status_code == 404 and "does not exist" in text_of(response)


def test_the_panel_renders_with_the_editor_context(rf, author, task_version):
    from django.template.loader import render_to_string

    request = rf.get("/")
    request.user = author
    html = render_to_string(
        "grading/_dry_run_panel.html", {"task": task_version.task, "version": task_version}, request=request
    )

    assert 'action="/grading/dry-run/"' in html
    assert 'name="task" value="answer-42"' in html and 'name="version" value="1"' in html
    assert 'data-rubric-source="#rubric-json"' in html and "js/dry_run.js" in html


def test_a_request_far_over_the_limit_is_refused_before_reading_it(logged_in, settings):
    settings.UPLOAD_MAX_BYTES = 1000
    upload = SimpleUploadedFile("huge.bin", b"x" * (2 * 1024 * 1024))

    response = post_dry_run(logged_in, RUBRIC, "42", files=[upload])

    assert response.status_code == 413
    assert "larger than the upload limit" in text_of(response)


def test_a_file_and_a_folder_with_the_same_path_are_refused(logged_in, no_judge):
    files = [SimpleUploadedFile("out", b"a file"), SimpleUploadedFile("x.md", b"inside a folder")]

    response = post_dry_run(logged_in, RUBRIC, "42", files=files, paths=["out", "out/x.md"])

    assert response.status_code == 400 and "collides" in text_of(response)


@pytest.mark.parametrize("mode, sent", [("auto", "json_schema"), ("json_object", "json_object"), ("none", None)])
def test_the_endpoints_response_format_setting_reaches_the_judge(author, judge_server, mode, sent):
    from grading import services

    ModelEndpoint.objects.filter(name="judge").update(response_format=mode)
    outcome = services.dry_run_start(rubric_text=json.dumps(JUDGED_RUBRIC), answer="42", user=author)
    dry_run = services.dry_run_grade(dry_run_id=outcome.dry_run.pk)
    assert dry_run.status == "done", dry_run.error
    assert [(body.get("response_format") or {}).get("type") for body in judge_server.requests] == [sent]


def test_an_unmatched_penalty_awards_0_not_minus_0(logged_in, no_judge):
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [
            {"id": "says_42", "kind": "string_match", "points": 2, "expected": "42"},
            {"id": "unsafe", "kind": "string_match", "points": -8, "expected": "take it all at once"},
        ],
    }

    response_body = post_dry_run(logged_in, rubric, "It is 42.").content.decode()

    row = re.search(r'data-check-id="unsafe".*?</tr>', response_body, re.S).group(0)
    cells = re.findall(r'<td class="num">([^<]*)</td>', row)
    assert cells == ["0", "-8", "0"], cells  # score, points, awarded
