"""The task and environment editors keep text exactly as typed: a save changes only what the author changed.

The walkthrough edited only a prompt, and the new version's solution script had lost its final newline (Django's
CharField strips by default), so the diff and the reviewer's "Changes" showed a change nobody made. Each test
posts the edit page's own form as a browser would (tests.support.html_forms: CRLF line ends, the newline a
textarea drops after its tag)."""

import pytest

from authoring import services
from authoring.models import Environment, Task
from grading.engine.models import PROMPT_MAX_CHARS
from tests.authoring.conftest import task_content
from tests.support.html_forms import browser_form_data

pytestmark = pytest.mark.django_db

SCRIPT = "cat > fizzbuzz.py <<'EOF'\ndef fizzbuzz(n):\n    return str(n)\nEOF\n"
PROMPT = "\n  Indented first line.\n\nWrite `fizzbuzz(n)`.  \n\n"


def edit_page_data(client, slug: str) -> dict:
    return browser_form_data(client.get(f"/tasks/{slug}/edit/").content.decode(), "task-form")


def test_editing_only_the_prompt_leaves_the_solution_and_everything_else_as_it_was(client, author, environment):
    services.task_create(
        slug="fizzbuzz",
        environment=environment,
        author=author,
        content=task_content(prompt=PROMPT, solution={"script": SCRIPT, "answer": "  1\n2\nFizz\n"}),
    )
    client.force_login(author)
    data = edit_page_data(client, "fizzbuzz")
    assert data["prompt"] == PROMPT.replace("\n", "\r\n")  # the page holds the prompt as saved
    data["prompt"] = data["prompt"] + "One more line.\r\n"
    assert client.post("/tasks/fizzbuzz/edit/", data).status_code == 302

    task = Task.objects.get(slug="fizzbuzz")
    first, second = task.versions.get(number=1).spec, task.latest_version.spec
    assert task.latest_version.number == 2
    assert second["prompt"] == PROMPT + "One more line.\n"
    assert second["solution"] == {"script": SCRIPT, "answer": "  1\n2\nFizz\n"}
    assert {k: v for k, v in first.items() if k not in ("prompt", "version")} == {
        k: v for k, v in second.items() if k not in ("prompt", "version")
    }
    diff = client.get("/tasks/fizzbuzz/diff/?a=1&b=2")
    assert [field.name for field in diff.context["diff"]["fields"] if field.changed] == ["Prompt"]


def test_saving_the_edit_page_unchanged_makes_no_new_version(client, author, environment):
    services.task_create(
        slug="as-typed",
        environment=environment,
        author=author,
        content=task_content(
            title="  Spaced title ",
            prompt=PROMPT,
            solution={"script": SCRIPT, "answer": None},
            metadata={"note": "x"},
            examples=[{"name": "right", "answer": "42\n", "expect": "pass"}],
        ),
    )
    client.force_login(author)
    response = client.post("/tasks/as-typed/edit/", edit_page_data(client, "as-typed"))
    assert response.status_code == 302
    assert Task.objects.get(slug="as-typed").versions.count() == 1


def test_a_new_task_keeps_its_texts_as_typed(client, author, environment):
    client.force_login(author)
    data = browser_form_data(client.get("/tasks/new/").content.decode(), "task-form")
    data.update(
        slug="typed",
        title="Typed",
        prompt="\r\n# Title\r\n\r\nBody  \r\n",
        solution_script="make\r\n",
        solution_answer="\r\n  42\r\n",
    )
    assert client.post("/tasks/new/", data).status_code == 302
    spec = Task.objects.get(slug="typed").latest_version.spec
    assert spec["prompt"] == "\n# Title\n\nBody  \n"
    assert spec["solution"] == {"script": "make\n", "answer": "\n  42\n"}


def test_the_environment_form_keeps_scripts_as_typed_and_an_unchanged_save_makes_no_version(client, author):
    services.environment_create(
        slug="scripted",
        name="Scripted",
        author=author,
        spec={
            "network": "none",
            "setup": "set -e\npip install x\n",
            "dockerfile": "FROM python:3.12-slim\n",
            "checks_module": "def ok(ctx):\n    return True\n",
        },
    )
    client.force_login(author)
    page = client.get("/environments/scripted/edit/").content.decode()
    data = browser_form_data(page, "environment-form")
    assert client.post("/environments/scripted/edit/", data).status_code == 302
    environment = Environment.objects.get(slug="scripted")
    assert environment.versions.count() == 1
    data["setup"] = data["setup"] + "echo ready\r\n"
    assert client.post("/environments/scripted/edit/", data).status_code == 302
    spec = Environment.objects.get(slug="scripted").latest_version.spec
    assert spec["setup"] == "set -e\npip install x\necho ready\n"
    assert spec["dockerfile"] == "FROM python:3.12-slim\n"
    assert spec["checks_module"] == "def ok(ctx):\n    return True\n"


def test_the_prompt_box_carries_the_limit_and_a_longer_prompt_comes_back_with_the_reason(client, author, task):
    client.force_login(author)
    page = client.get(f"/tasks/{task.slug}/edit/").content.decode()
    assert f'maxlength="{PROMPT_MAX_CHARS}"' in page.split('name="prompt"')[1].split(">")[0]
    data = edit_page_data(client, task.slug)
    # The limit counts a line end once, as the browser's maxlength does (the browser sends it as CRLF).
    data["prompt"] = "a\r\n" * (PROMPT_MAX_CHARS // 2)
    assert client.post(f"/tasks/{task.slug}/edit/", data).status_code == 302
    data = edit_page_data(client, task.slug)
    data["prompt"] = "p" * (PROMPT_MAX_CHARS + 1)
    response = client.post(f"/tasks/{task.slug}/edit/", data)
    assert response.status_code == 400
    errors = " ".join(response.context["form"].errors["prompt"])
    assert f"at most {PROMPT_MAX_CHARS:,}" in errors or f"at most {PROMPT_MAX_CHARS}" in errors
    assert "p" * (PROMPT_MAX_CHARS + 1) in response.content.decode()  # what was typed is still in the box
    assert task.versions.count() == 2


def test_a_tag_longer_than_the_tag_table_takes_is_refused_at_the_field(client, author, task):
    """A 65-character tag answered 500 (the tag column holds 64)."""
    client.force_login(author)
    data = edit_page_data(client, task.slug)
    data["tags"] = "maths, " + "x" * 65
    response = client.post(f"/tasks/{task.slug}/edit/", data)
    assert response.status_code == 400
    assert response.context["form"].errors["tags"] == [f"A tag is at most 64 characters: {'x' * 64}… has 65."]
    assert task.versions.count() == 1


def test_a_refused_save_counts_the_fields_to_fix_not_the_summary_line(client, author, task):
    # Two problems in the rubric alone: one field to fix. The summary's own sentence on top ("Invalid task: ...")
    # is not a field, yet the headline counted it ("2 fields to fix" over a single Rubric field).
    import json
    import re

    client.force_login(author)
    data = edit_page_data(client, task.slug)
    rubric = json.loads(data["rubric"])
    rubric["checks"][0]["points"] = "5"
    rubric["checks"][1]["pattern"] = 7
    data["rubric"] = json.dumps(rubric)
    page = client.post(f"/tasks/{task.slug}/edit/", data).content.decode()
    headline = re.search(r"<strong>No new version was saved: ([^<]*)</strong>", page).group(1)
    assert headline == "1 field to fix."
    assert page.count('data-field="rubric"') == 2  # each problem, at the field
