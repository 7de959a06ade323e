import hashlib
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from authoring import services
from authoring.models import Environment, Tag, Task, TaskVersion
from tests.authoring.conftest import RUBRIC, task_content


def form_data(version=1, **overrides):
    data = {
        "title": "Answer the question",
        "prompt": "What is *six* times seven?",
        "rubric": json.dumps(RUBRIC),
        "solution_script": "",
        "solution_answer": "42",
        "tags": "maths",
        "metadata": "{}",
        "message": "",
        "base_version": str(version),
    }
    data.update(overrides)
    return data


def test_anonymous_visitors_only_see_the_login_page(client, task):
    for url in ("/", f"/tasks/{task.slug}/", "/environments/", "/account/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert client.get("/accounts/login/").status_code == 200


def test_login_with_a_password_then_logout(client, author):
    response = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    client.post("/accounts/logout/")
    assert client.get("/").status_code == 302


def test_an_author_creates_a_task_in_the_browser_form(client, author, environment):
    client.force_login(author)
    data = {**form_data(), "slug": "new-task", "environment": "shell"}
    del data["base_version"]
    response = client.post("/tasks/new/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Task.objects.get(slug="new-task").latest_version.spec["solution"]["answer"] == "42"


def test_files_attached_with_a_role_keep_it_and_an_unknown_role_is_a_form_error(client, author, environment, task):
    client.force_login(author)
    data = {**form_data(), "slug": "with-roles", "environment": "shell"}
    del data["base_version"]
    upload = SimpleUploadedFile("test_it.py", b"import unittest\n")
    response = client.post("/tasks/new/", {**data, "files": [upload], "upload_role:test_it.py": "owner"})
    assert response.status_code == 400
    assert (
        "test_it.py: the role &#x27;owner&#x27; is not one of grader, protected, workspace."
        in response.content.decode()
    )
    upload = SimpleUploadedFile("test_it.py", b"import unittest\n")
    response = client.post("/tasks/new/", {**data, "files": [upload], "upload_role:test_it.py": "protected"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Task.objects.get(slug="with-roles").latest_version.spec["files"][0]["role"] == "protected"

    # A file attached while editing takes its role too; the files already attached keep theirs.
    edit = {**form_data(), "base_version": 1, "file_role_0": "protected"}
    upload = SimpleUploadedFile("grade.sh", b"exit 0\n")
    response = client.post("/tasks/with-roles/edit/", {**edit, "files": [upload], "upload_role:grade.sh": "grader"})
    assert response.status_code == 302, response.content.decode()[:2000]
    files = {f["path"]: f.get("role") for f in Task.objects.get(slug="with-roles").latest_version.spec["files"]}
    assert files == {"test_it.py": "protected", "grade.sh": "grader"}
    page = client.get("/tasks/with-roles/").content.decode()
    assert 'data-role="grader">grader</span>' in page and 'data-role="protected">protected</span>' in page


def test_the_new_task_form_offers_the_environment_the_author_works_in(client, author, environment):
    """An import makes an `imported` environment; the form must not then lose the one the author uses."""

    def offered(url="/tasks/new/"):
        page = client.get(url).content.decode()
        select = re.search(r'<select name="environment".*?</select>', page, re.S).group(0)
        chosen = re.findall(r'<option value="([^"]*)"[^>]*selected', select)
        return chosen[0] if chosen else None

    client.force_login(author)
    assert offered() == "shell"  # the only one
    services.environment_create(slug="imported", name="imported", author=author, spec={"network": "none"})
    assert offered() in (None, "")  # two, and no task yet: the author chooses
    services.task_create(slug="in-shell", environment=environment, author=author, content=task_content())
    assert offered() == "shell"  # the one of the task this author last changed
    imported = Environment.objects.get(slug="imported")
    services.task_create(
        slug="from-a-pack", environment=imported, author=author, content=task_content(), message=services.IMPORT_MESSAGE
    )
    assert offered() == "shell"  # an import's tasks are newer, but the author works in shell
    assert offered("/tasks/new/?environment=imported") == "imported"  # the environment page's New task here
    assert offered("/tasks/new/?environment=nowhere") == "shell"
    page = client.get("/environments/imported/").content.decode()
    assert 'href="/tasks/new/?environment=imported"' in page


def test_the_change_note_typed_on_a_new_task_is_kept_for_v1(client, author, environment):
    client.force_login(author)
    data = {**form_data(), "slug": "noted", "environment": "shell", "message": "First draft from the SME call"}
    del data["base_version"]
    assert client.post("/tasks/new/", data).status_code == 302
    assert Task.objects.get(slug="noted").latest_version.message == "First draft from the SME call"
    data = {**data, "slug": "unnoted", "message": ""}
    assert client.post("/tasks/new/", data).status_code == 302
    assert Task.objects.get(slug="unnoted").latest_version.message == "created"


def test_a_broken_rubric_comes_back_with_the_pointer_and_everything_typed(client, author, task):
    client.force_login(author)
    rubric = json.loads(json.dumps(RUBRIC))
    rubric["checks"][1]["pattern"] = "("
    response = client.post(f"/tasks/{task.slug}/edit/", form_data(rubric=json.dumps(rubric), prompt="My long prompt"))
    assert response.status_code == 400
    html = response.content.decode()
    assert "/rubric/checks/1/pattern" in html
    assert "My long prompt" in html and "&quot;pattern&quot;: &quot;(&quot;" in html
    assert task.versions.count() == 1


def test_unparseable_rubric_json_says_where(client, author, task):
    client.force_login(author)
    response = client.post(f"/tasks/{task.slug}/edit/", form_data(rubric='{"checks": [}'))
    assert response.status_code == 400
    assert "line 1, column 13" in response.content.decode()


def test_saving_twice_makes_two_versions_and_the_history_and_diff_show_them(client, author, task):
    client.force_login(author)
    assert client.post(f"/tasks/{task.slug}/edit/", form_data(title="Second")).status_code == 302
    history = client.get(f"/tasks/{task.slug}/versions/").content.decode()
    assert history.count('class="version-row"') == 2
    diff = client.get(f"/tasks/{task.slug}/diff/?a=1&b=2").content.decode()
    assert "Second" in diff and "Answer the question" in diff


def test_a_stale_edit_shows_the_conflict_and_keeps_what_was_typed(client, author, task):
    client.force_login(author)
    services.task_version_create(task=task, author=author, base_version=1, content=task_content(title="Theirs"))
    response = client.post(f"/tasks/{task.slug}/edit/", form_data(version=1, title="Mine", prompt="My careful prompt"))
    assert response.status_code == 409
    html = response.content.decode()
    assert "Theirs" in html and "My careful prompt" in html and 'value="Mine"' in html
    assert 'name="base_version" value="2"' in html
    task.refresh_from_db()
    assert task.latest_version.number == 2 and task.latest_version.spec["title"] == "Theirs"
    # Saving the kept edit on top of the latest works.
    response = client.post(f"/tasks/{task.slug}/edit/", form_data(version=2, title="Mine", prompt="My careful prompt"))
    assert response.status_code == 302
    assert task.versions.get(number=3).spec["prompt"] == "My careful prompt"


def test_a_stale_edit_keeps_its_attached_files_and_their_roles_for_the_next_save(client, author, task):
    """The conflict page is the task editor: a file attached to the refused save is kept, with the role chosen
    for it, and saving the kept edit attaches it."""
    client.force_login(author)
    services.task_version_create(task=task, author=author, base_version=1, content=task_content(title="Theirs"))
    upload = SimpleUploadedFile("grade.sh", b"exit 0\n")
    data = {**form_data(version=1, title="Mine"), "files": [upload], "upload_role:grade.sh": "grader"}
    response = client.post(f"/tasks/{task.slug}/edit/", data)
    assert response.status_code == 409
    html = response.content.decode()
    assert 'id="rubric-editor"' in html and "<code>grade.sh</code>" in html  # the editor, and the file kept
    token = re.search(r'name="kept_files" value="([^"]+)"', html).group(1)
    response = client.post(f"/tasks/{task.slug}/edit/", {**form_data(version=2, title="Mine"), "kept_files": token})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert task.versions.get(number=3).spec["files"] == [
        {"path": "grade.sh", "sha256": hashlib.sha256(b"exit 0\n").hexdigest(), "role": "grader"}
    ]


def test_a_stale_edit_without_example_answers_shows_no_example_change(client, author, task):
    """The editor sends [] for no example answers; a saved task without them has no "examples" key. The
    conflict page showed "Example answers − null + []" for that: both mean none."""
    client.force_login(author)
    services.task_version_create(task=task, author=author, base_version=1, content=task_content(title="Theirs"))
    response = client.post(f"/tasks/{task.slug}/edit/", form_data(version=1, title="Mine"))
    assert response.status_code == 409
    mine = response.content.decode().split("Your edit compared to v2")[1].split("Your edit, kept")[0]
    assert "Theirs" in mine and "Mine" in mine  # the title, the one change
    assert "Example answers" not in mine and "null" not in mine
    assert [f.name for f in response.context["mine_vs_latest"]["fields"] if f.changed] == ["Title"]


EXAMPLES = [{"name": "right", "answer": "42", "expect": "pass"}]


def test_the_diff_page_shows_example_answers_once_and_no_null(client, author, task):
    """v1 has no example answers, v2 adds one: the page showed them as a table of verdicts, then again as
    a JSON diff whose first line was "null". They are one section: the verdicts, and what changed in them."""
    client.force_login(author)
    services.task_version_create(task=task, author=author, base_version=1, content=task_content(examples=EXAMPLES))
    page = client.get(f"/tasks/{task.slug}/diff/?a=1&b=2").content.decode()
    assert page.count("Example answers") == 1  # the section's heading, and nothing else
    section = page.split('id="examples"')[1].split("</section>")[0]
    assert 'data-example="right"' in section and 'id="examples-diff"' in section
    lines = [
        line for line in section.split('id="examples-diff"')[1].split("<tr") if "diff-add" in line or "diff-del" in line
    ]
    assert lines and all("diff-add" in line for line in lines)  # only added lines: none says "null"
    assert "null" not in page

    # Unchanged example answers: their verdicts, and no JSON diff.
    services.task_version_create(
        task=task, author=author, base_version=2, content=task_content(examples=EXAMPLES, title="Retitled")
    )
    page = client.get(f"/tasks/{task.slug}/diff/?a=2&b=3").content.decode()
    assert 'id="examples-diff"' not in page and page.count("Example answers") == 1


def test_no_example_answers_and_an_empty_list_are_the_same_in_a_diff():
    from authoring.diff import task_version_diff

    for a, b in (({}, {"examples": []}), ({"examples": None}, {"examples": []}), ({"examples": []}, {})):
        examples = next(f for f in task_version_diff(a, b)["fields"] if f.key == "examples")
        assert not examples.changed, (a, b)
    added = next(f for f in task_version_diff({}, {"examples": EXAMPLES})["fields"] if f.key == "examples")
    assert added.changed and added.lines[0].op == "insert" and added.lines[0].text == "["
    assert all(line.op == "insert" for line in added.lines)


def test_another_author_cannot_edit(client, other_author, task):
    client.force_login(other_author)
    assert client.get(f"/tasks/{task.slug}/edit/").status_code == 403
    assert client.post(f"/tasks/{task.slug}/edit/", form_data(title="hijack")).status_code == 403
    assert task.versions.count() == 1


def test_attaching_files_and_refusing_oversize_uploads(client, author, task, settings):
    client.force_login(author)
    data = form_data()
    data["files"] = [SimpleUploadedFile("notes.txt", b"hello")]
    assert client.post(f"/tasks/{task.slug}/edit/", data).status_code == 302
    task.refresh_from_db()
    assert task.latest_version.spec["files"][0]["path"] == "notes.txt"
    settings.UPLOAD_MAX_BYTES = 100
    data = form_data(version=2, prompt="kept text")
    data["files"] = [SimpleUploadedFile("big.bin", b"x" * 1000)]
    response = client.post(f"/tasks/{task.slug}/edit/", data)
    assert response.status_code == 400
    html = response.content.decode()
    assert "upload limit" in html and "kept text" in html
    assert task.versions.count() == 2


def test_non_utf8_form_input_is_not_a_server_error(client, author, task):
    client.force_login(author)
    body = b"title=%FF%FE&prompt=x&rubric=%7B%7D&base_version=1"
    response = client.generic(
        "POST", f"/tasks/{task.slug}/edit/", body, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 400


def test_markdown_preview_is_sanitised(client, author):
    client.force_login(author)
    html = client.post(
        "/markdown/preview/", {"prompt": "# Hi\n<script>alert(1)</script>\n[x](javascript:alert(1))"}
    ).content.decode()
    assert "<h1>Hi</h1>" in html and "<script" not in html and "javascript:" not in html


def test_an_author_gets_an_api_token_on_the_account_page(client, author):
    client.force_login(author)
    response = client.post("/account/")
    key = response.context["new_key"]
    assert key and key in response.content.decode()
    assert client.get("/api/tasks/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200


def test_the_first_token_does_not_speak_of_an_old_one_and_a_replacement_does(client, author):
    client.force_login(author)
    first = client.post("/account/")
    assert "Your API token was created." in first.content.decode() and "old one" not in first.content.decode()
    second = client.post("/account/")
    assert "the old one no longer works" in second.content.decode()
    client.logout()
    assert client.get("/api/tasks/", HTTP_AUTHORIZATION=f"Token {first.context['new_key']}").status_code == 401


def test_environment_form_creates_and_versions_an_environment(client, author):
    client.force_login(author)
    data = {
        "slug": "py",
        "name": "Python",
        "network": "none",
        "cpus": "1",
        "memory_mb": "512",
        "timeout_s": "60",
        "max_steps": "10",
        "tools": ["bash", "submit"],
        "custom_tools": "[]",
    }
    assert client.post("/environments/new/", data).status_code == 302
    env = Environment.objects.get(slug="py")
    assert env.latest_version.spec["limits"]["memory_mb"] == 512
    data.pop("slug")
    data.update({"setup": "echo ready", "base_version": "1"})
    assert client.post("/environments/py/edit/", data).status_code == 302
    assert env.versions.count() == 2
    bad = client.post("/environments/py/edit/", {**data, "base_version": "2", "custom_tools": "[{"})
    assert bad.status_code == 400 and "not valid JSON" in bad.content.decode()


def _bulk_tasks(count, owner, environment):
    """Many tasks fast: one bulk insert per table, the same shape the services write."""
    env_version = environment.latest_version
    tags = [Tag.objects.get_or_create(name=f"tag{i}")[0] for i in range(5)]
    tasks = Task.objects.bulk_create(
        [
            Task(slug=f"bulk-{i:05d}", title=f"Bulk {i}", environment=environment, owner=owner, status="draft")
            for i in range(count)
        ],
        batch_size=2000,
    )
    TaskVersion.objects.bulk_create(
        [
            TaskVersion(
                task=t,
                number=1,
                spec={"title": t.title},
                sha256="0" * 64,
                content_sha256="0" * 64,
                environment_version=env_version,
                author=owner,
            )
            for t in tasks
        ],
        batch_size=2000,
    )
    Task.tags.through.objects.bulk_create(
        [Task.tags.through(task=t, tag=tags[i % 5]) for i, t in enumerate(tasks)], batch_size=5000
    )
    # latest_version pointers (the service sets them; here one UPDATE per task would be slow, so a join update)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE authoring_task SET latest_version_id = (SELECT v.id FROM authoring_taskversion v "
            "WHERE v.task_id = authoring_task.id) WHERE latest_version_id IS NULL"
        )
    return tasks


@pytest.mark.parametrize("url", ["/?page=120", "/?tag=tag3&status=draft&q=bulk-0000", "/?environment=shell"])
def test_the_task_list_makes_a_constant_number_of_queries_at_ten_thousand_tasks(
    client, author, environment, django_assert_max_num_queries, url
):
    _bulk_tasks(10_000, author, environment)
    client.force_login(author)
    client.get(url)  # warm the session and role caches
    with CaptureQueriesContext(connection) as small_page:
        response = client.get(url)
    assert response.status_code == 200
    # The same page must cost the same queries whatever the row count: prove it with 10k and with 10.
    Task.objects.filter(slug__startswith="bulk-").exclude(slug__in=[f"bulk-{i:05d}" for i in range(10)]).delete()
    with CaptureQueriesContext(connection) as tiny:
        client.get(url)
    assert len(small_page.captured_queries) == len(tiny.captured_queries) <= 12


def test_the_task_list_page_query_count_is_pinned(client, author, environment, django_assert_num_queries):
    _bulk_tasks(10_000, author, environment)
    client.force_login(author)
    client.get("/")
    # session, user with its roles, count, the page's task ids, those tasks (with env/owner/version/author
    # joined), their tags, environments and tags for the filter selects, the nav's two counts
    with django_assert_num_queries(9):
        response = client.get("/?page=7")
    assert response.status_code == 200 and b"bulk-" in response.content


def test_the_history_button_counts_the_versions_the_reader_can_open(client, author, admin, lab, environment):
    """Not the latest version's number: a task imported as v3 has one version; a lab member opens approved ones."""
    from review.services import versions_approve_on_import

    [(_, imported)], rejected = services.tasks_bulk_create(
        author=author,
        items=[
            {
                "slug": "imported-v3",
                "environment_version": environment.latest_version,
                "content": task_content(),
                "number": 3,
            }
        ],
    )
    assert not rejected and imported.number == 3

    def history(user) -> tuple[str, int]:
        client.force_login(user)
        button = re.search(r"History \((\d+)\)", client.get("/tasks/imported-v3/").content.decode())[1]
        return button, client.get("/tasks/imported-v3/versions/").content.decode().count('class="version-row"')

    assert history(author) == ("1", 1)
    versions_approve_on_import(versions=[imported], admin=admin)
    task = Task.objects.get(slug="imported-v3")
    for number in (4, 5):  # v5 approved, v4 stays a draft
        version, _ = services.task_version_create(
            task=task, author=author, base_version=number - 1, content=task_content(title=f"v{number}")
        )
    versions_approve_on_import(versions=[version], admin=admin)
    assert history(author) == ("3", 3)
    assert history(lab) == ("2", 2)


def test_the_task_page_query_count_is_pinned_for_each_kind_of_reader(
    client, author, admin, lab, environment, django_assert_num_queries
):
    from review.services import versions_approve_on_import
    from tests.grading.test_example_answers import EXAMPLES

    task = services.task_create(
        slug="pinned", environment=environment, author=author, content=task_content(examples=EXAMPLES)
    )
    for number in range(2, 6):  # v2 and v5 approved
        version, _ = services.task_version_create(
            task=task,
            author=author,
            base_version=number - 1,
            content=task_content(title=f"v{number}", examples=EXAMPLES),
        )
        if number in (2, 5):
            versions_approve_on_import(versions=[version], admin=admin)
    # session, user with its roles, the task (joined rows), tags, activity, the nav's unread inbox count; the example
    # answers' run, the version before and its run; previews, their rollout counts, the gates' previews, the
    # examples gate's run, the latest submission, reviews; for the gates also the environment's judge choice
    # (grading.EnvironmentJudge) and the blind scores of the task's rollouts (review.blind, the human prediction
    # gate). A lab member's version is the approved one (its environment version and author are read on their own),
    # and the activity keeps the versions they may read.
    for user, count in ((author, 17), (lab, 20)):
        client.force_login(user)
        client.get("/tasks/pinned/")
        with django_assert_num_queries(count):
            response = client.get("/tasks/pinned/")
        assert response.status_code == 200 and "v5" in response.content.decode()


def test_an_oversized_upload_with_csrf_checks_on_is_a_clear_400_that_keeps_the_fields(author, task, settings):
    """The CSRF middleware reads the body first: the upload cap must not turn that into a 500."""
    from django.test import Client

    settings.UPLOAD_MAX_BYTES = 1000
    client = Client(enforce_csrf_checks=True)
    client.force_login(author)
    client.get(f"/tasks/{task.slug}/edit/")
    token = client.cookies["csrftoken"].value
    data = form_data(prompt="typed before the file")
    data["csrfmiddlewaretoken"] = token
    data["files"] = [SimpleUploadedFile("huge.bin", b"x" * 3_000_000)]
    data["message"] = "typed after the file"
    response = client.post(f"/tasks/{task.slug}/edit/", data)
    assert response.status_code == 400
    html = response.content.decode()
    assert "upload limit" in html and "typed before the file" in html and "typed after the file" in html
    assert task.versions.count() == 1


def test_the_task_page_says_what_each_check_does(client, author, task):
    client.force_login(author)
    html = client.get(f"/tasks/{task.slug}/").content.decode()
    # The expected value and the pattern are on the page, not only in the raw JSON.
    rubric_table = html.split("<h2>Rubric")[1].split("Raw JSON")[0]
    assert "the answer contains “42”" in rubric_table
    assert "the answer matches /\\d+/" in rubric_table


def test_a_prompt_saved_from_the_browser_with_crlf_is_not_reported_as_changed(client, author, environment):
    services.task_create(
        slug="multi-line",
        environment=environment,
        author=author,
        content=task_content(prompt="Step one.\nStep two.", solution={"script": "echo 1\necho 2"}),
    )
    client.force_login(author)
    # A browser submits every textarea with CRLF line ends.
    data = form_data(
        prompt="Step one.\r\nStep two.", solution_script="echo 1\r\necho 2", solution_answer="", title="Renamed"
    )
    assert client.post("/tasks/multi-line/edit/", data).status_code == 302
    version = Task.objects.get(slug="multi-line").latest_version
    assert version.number == 2 and version.spec["prompt"] == "Step one.\nStep two."
    diff = client.get("/tasks/multi-line/diff/?a=1&b=2").content.decode()
    assert "Renamed" in diff and "Step two." not in diff


def test_an_added_check_shows_in_the_diff_as_json_not_a_python_dict(client, author, task):
    client.force_login(author)
    rubric = json.loads(json.dumps(RUBRIC))
    rubric["checks"].append(
        {"id": "mentions_unit", "kind": "string_match", "points": 1, "expected": "meters", "case_sensitive": True}
    )
    rubric["checks"].pop(0)
    assert client.post(f"/tasks/{task.slug}/edit/", form_data(rubric=json.dumps(rubric))).status_code == 302
    diff = client.get(f"/tasks/{task.slug}/diff/?a=1&b=2").content.decode()
    added = diff.split('class="check-diff-added"')[1].split("</tr>")[0]
    removed = diff.split('class="check-diff-removed"')[1].split("</tr>")[0]
    assert "&quot;id&quot;: &quot;mentions_unit&quot;" in added and "&quot;case_sensitive&quot;: true" in added
    assert "&quot;id&quot;: &quot;says_42&quot;" in removed
    assert "&#x27;id&#x27;" not in diff and "True" not in added


def test_a_key_a_check_leaves_out_reads_as_its_default_in_the_diff_and_the_words(client, author, task):
    """A string_match without a mode is graded "contains"; the task page said "equals", and the diff of a change
    to "equals" read `mode null → equals`, so a real change of rule looked like none."""
    client.force_login(author)
    rubric = json.loads(json.dumps(RUBRIC))
    rubric["checks"] = [{"id": "says_paris", "kind": "string_match", "points": 1, "expected": "Paris"}]
    assert client.post(f"/tasks/{task.slug}/edit/", form_data(rubric=json.dumps(rubric))).status_code == 302
    page = client.get(f"/tasks/{task.slug}/").content.decode()
    assert "the answer contains “Paris”" in page and "equals “Paris”" not in page
    rubric["checks"][0]["mode"] = "equals"
    assert client.post(f"/tasks/{task.slug}/edit/", form_data(2, rubric=json.dumps(rubric))).status_code == 302
    diff = client.get(f"/tasks/{task.slug}/diff/?a=2&b=3").content.decode()
    assert "(not set: contains)" in diff and "null" not in diff.split("says_paris")[1].split("</tr>")[0]


def test_the_task_page_shows_each_versions_own_rubric_though_a_process_keeps_the_last_few(client, author, task):
    """The rubric's JSON and table are kept per version hash (authoring.views._rubric_shown): a new version shows its
    own, and an old one is never shown for it."""
    client.force_login(author)
    first = client.get(f"/tasks/{task.slug}/").content.decode()
    assert "says_42" in first and "renamed_check" not in first
    rubric = {**RUBRIC, "checks": [{**RUBRIC["checks"][0], "id": "renamed_check"}]}
    services.task_version_create(task=task, author=author, base_version=1, content=task_content(rubric=rubric))
    for _ in range(2):  # the second view is served from what the process kept
        page = client.get(f"/tasks/{task.slug}/").content.decode()
        assert "renamed_check" in page and "says_42" not in page and "(1 checks" in page


def test_files_attached_to_a_save_that_failed_are_kept_for_the_next_try(
    client, author, other_author, environment, task
):
    """A browser empties a file input when the page comes back: a create that failed (a slug taken, then bad
    examples) lost its attached file without a word, and the task was made without it."""
    import re as re_

    client.force_login(author)
    data = {**form_data(), "slug": task.slug, "environment": environment.slug}
    data["files"] = [SimpleUploadedFile("notes.md", b"# notes\n")]
    first = client.post("/tasks/new/", data)
    assert first.status_code == 400 and 'id="kept-files"' in first.content.decode()
    assert "<code>notes.md</code>" in first.content.decode()
    token = re_.search(r'name="kept_files" value="([^"]+)"', first.content.decode())[1]
    second = client.post(
        "/tasks/new/",
        {
            **form_data(),
            "slug": "with-notes",
            "environment": environment.slug,
            "examples": '[{"expect": "maybe"}]',
            "kept_files": token,
        },
    )
    assert second.status_code == 400 and "<code>notes.md</code>" in second.content.decode()  # still kept
    token = re_.search(r'name="kept_files" value="([^"]+)"', second.content.decode())[1]
    client.force_login(other_author)  # another user's try: the token is not theirs
    assert (
        client.post(
            "/tasks/new/", {**form_data(), "slug": "theirs", "environment": environment.slug, "kept_files": token}
        ).status_code
        == 302
    )
    assert Task.objects.get(slug="theirs").latest_version.spec["files"] == []
    client.force_login(author)
    assert (
        client.post(
            "/tasks/new/", {**form_data(), "slug": "with-notes", "environment": environment.slug, "kept_files": token}
        ).status_code
        == 302
    )
    assert [f["path"] for f in Task.objects.get(slug="with-notes").latest_version.spec["files"]] == ["notes.md"]


def test_a_diff_without_a_rubric_change_says_so_instead_of_an_empty_table(client, author, task):
    """The walkthrough's diff of a prompt edit read "0 check(s) changed" above an empty CHECK/CHANGE/DETAILS table."""
    client.force_login(author)
    services.task_version_create(task=task, author=author, base_version=1, content=task_content(prompt="Reworded."))
    rubric = {**RUBRIC, "checks": [{**RUBRIC["checks"][0], "points": 3}, RUBRIC["checks"][1]]}
    services.task_version_create(
        task=task, author=author, base_version=2, content=task_content(prompt="Reworded.", rubric=rubric)
    )
    page = client.get(f"/tasks/{task.slug}/diff/?a=1&b=2").content.decode()
    assert "No check changed." in page and 'class="check-diff"' not in page and "check(s)" not in page
    assert "<h2>Prompt</h2>" in page
    page = client.get(f"/tasks/{task.slug}/diff/?a=2&b=3").content.decode()
    assert "1 check changed, 0 added, 0 removed." in page and 'class="check-diff-changed"' in page
    assert "No check changed." not in page


def test_a_diff_against_a_version_that_does_not_exist_says_which(client, author, task):
    client.force_login(author)
    response = client.get(f"/tasks/{task.slug}/diff/?a=1&b=99")
    page = response.content.decode()
    assert response.status_code == 404
    assert f"{task.slug} v99 does not exist." in page
    response = client.get("/no/such/page/")
    assert response.status_code == 404 and 'id="not-found-message"' not in response.content.decode()


def test_a_process_keeps_the_rubric_of_a_teams_working_set_of_task_pages(monkeypatch):
    """Spread over the web processes, a team views hundreds of task pages: each process kept the rubric table of
    the last 64 only, so on 200 distinct pages most views worked it out again."""
    from types import SimpleNamespace

    from authoring import views

    monkeypatch.setattr(views, "_RUBRICS_SHOWN", type(views._RUBRICS_SHOWN)(**vars_of(views._RUBRICS_SHOWN)))
    versions = [
        SimpleNamespace(sha256=f"{i:064x}", rubric={**RUBRIC, "checks": [{**RUBRIC["checks"][0], "id": f"c{i}"}]})
        for i in range(300)
    ]
    shown = [views._rubric_shown(version) for version in versions]
    monkeypatch.setattr(views, "_check_rows_html", lambda items: pytest.fail("worked out again"))
    assert [views._rubric_shown(version) for version in versions] == shown
    assert all(f"c{i}" in shown[i][0] and f"c{i}" in shown[i][1] for i in (0, 299))


def vars_of(kept) -> dict:
    """The limits a process cache was made with (gymwright.process_cache.Kept)."""
    return {"entries": kept.entries, "max_size": kept.max_size, "max_value": kept.max_value, "size": kept.size}


def test_a_refused_environment_says_every_problem_in_one_answer_and_no_pointer_at_a_field(client, author, settings):
    # The fields' bounds, the custom tools, the checks module and this server's ceilings came in three rounds,
    # each after another submit; a ceiling's sentence under Memory read "...: /limits/memory_mb: memory_mb ...".
    settings.SANDBOX_MAX_MEMORY_MB = 4096
    client.force_login(author)
    data = {
        "slug": "py",
        "name": "Python",
        "network": "none",
        "cpus": "0",  # under the field's bound
        "memory_mb": "8192",  # within the field's bound, over this server's ceiling
        "timeout_s": "60",
        "max_steps": "10",
        "tools": ["bash", "submit"],
        "custom_tools": '[{"name": "x"}]',  # a tool with no command
    }
    response = client.post("/environments/new/", data)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert set(errors) >= {"cpus", "memory_mb", "custom_tools"}, errors
    assert errors["memory_mb"] == [
        "Limits over the server's ceilings: memory_mb 8192 MB is over this server's ceiling of 4096 MB "
        "(GYMWRIGHT_MAX_MEMORY_MB)"
    ]
    assert not Environment.objects.filter(slug="py").exists()
    # A field in error is not blamed twice: its own bound, not the spec's check of the default put in its place.
    assert len(errors["cpus"]) == 1
    # Fixed, it saves.
    data.update({"cpus": "1", "memory_mb": "512", "custom_tools": "[]"})
    assert client.post("/environments/new/", data).status_code == 302
