"""Answering a reviewer in the task editor keeps the author's unsaved work. Reply and Resolve on a comment
thread were plain form posts: the page reloaded, Chromium asked "Leave site?", and accepting (natural: one
only meant to reply) dropped unsaved edits to the rubric and the example answers. They now post in place
(htmx) and the thread is redrawn where it was; leaving the page for real still asks."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from authoring import services
from review import services as review_services
from review.models import Comment
from tests.e2e.conftest import CSP_LISTENER, TIMEOUT_MS, wait_for_editor
from tests.sandbox.factories import RUBRIC

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=TIMEOUT_MS)

EXAMPLES = [{"name": "right", "answer": "42", "expect": "pass"}]


@pytest.fixture
def threads(author, environment, django_user_model):
    """A task with a reviewer's thread on its check says_42 and another on the task itself."""
    reviewer = django_user_model.objects.create_user(username="rhea", password="pw-rhea")
    reviewer.groups.add(Group.objects.get_or_create(name="reviewer")[0])
    task = services.task_create(
        slug="answered",
        environment=environment,
        author=author,
        content={
            "title": "Answered",
            "prompt": "Say 42.",
            "rubric": RUBRIC,
            "solution": {"answer": "42"},
            "examples": EXAMPLES,
        },
    )
    on_check = review_services.comment_create(task=task, user=reviewer, body="Worth 3 points?", check_id="says_42")
    on_task = review_services.comment_create(task=task, user=reviewer, body="Add a file check?")
    return {"task": task, "on_check": on_check, "on_task": on_task}


def open_editor(page, live_server, task):
    page.goto(f"{live_server.url}/tasks/{task.slug}/edit/")
    wait_for_editor(page)
    page.wait_for_selector("#task-form[data-guard-ready=true]")
    page.evaluate("window.__samePage = true")  # gone if the page reloads


def test_reply_and_resolve_keep_unsaved_edits_and_the_guard(watched, live_server, threads):
    page, task = watched, threads["task"]
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(f"{dialog.type}: {dialog.message}"), dialog.dismiss()))
    open_editor(page, live_server, task)
    # Unsaved: a structured rubric edit and the example answers.
    card = page.locator('#rubric-structured .re-card[data-pointer="/checks/0"]')
    card.locator("[data-key=points] input").fill("7")
    edited = [*EXAMPLES, {"name": "wrong", "answer": "41", "expect": "fail"}]
    page.fill("#examples-json", json.dumps(edited))

    # The thread on says_42 sits in its card: reply there.
    thread = card.locator(f"#thread-{threads['on_check'].pk}")
    thread.locator("textarea[name=body]").fill("Yes: it is the whole answer.")
    thread.locator(".reply-form button").click()
    expect(thread.locator(".comment.reply")).to_contain_text("Yes: it is the whole answer.")
    expect(thread.locator("textarea[name=body]")).to_have_value("")
    # Resolve it: redrawn in place, resolved; the open count follows.
    thread.locator(".resolve-form button").click()
    expect(thread).to_have_class(lambda_class("resolved"))
    expect(thread.locator(".resolve-form button")).to_have_text("Reopen")
    expect(page.locator("#review-threads [data-open-threads]")).to_have_text("1")

    # The thread on the task stays in the panel below: reply there too.
    on_task = page.locator(f"#review-threads #thread-{threads['on_task'].pk}")
    on_task.locator("textarea[name=body]").fill("Added one.")
    on_task.locator(".reply-form button").click()
    expect(on_task.locator(".comment.reply")).to_contain_text("Added one.")

    assert page.evaluate("window.__samePage") is True, "the page reloaded"
    assert dialogs == []
    assert card.locator("[data-key=points] input").input_value() == "7"
    assert json.loads(page.input_value("#rubric-json"))["checks"][0]["points"] == 7
    assert json.loads(page.input_value("#examples-json")) == edited
    replies = Comment.objects.filter(parent__isnull=False).order_by("pk")
    assert [(reply.parent_id, reply.body) for reply in replies] == [
        (threads["on_check"].pk, "Yes: it is the whole answer."),
        (threads["on_task"].pk, "Added one."),
    ]
    assert Comment.objects.get(pk=threads["on_check"].pk).is_resolved
    assert task.versions.count() == 1

    # Replying did not switch the unsaved-changes guard off: a real link still asks, and stays on dismiss.
    page.click("text=Cancel")
    assert len(dialogs) == 1 and dialogs[0].startswith("confirm: You have unsaved changes")
    assert page.url == f"{live_server.url}/tasks/{task.slug}/edit/"
    assert page.evaluate("window.__samePage") is True


def test_a_blank_reply_is_refused_in_the_thread(watched, live_server, threads):
    page, task = watched, threads["task"]
    open_editor(page, live_server, task)
    thread = page.locator(f"#thread-{threads['on_task'].pk}")
    thread.locator(".reply-form button").click()  # empty: the browser does not send it
    assert thread.locator("textarea[name=body]").evaluate("(box) => box.validity.valueMissing")
    thread.locator("textarea[name=body]").fill("   ")  # only spaces: the server refuses it, in place
    with page.expect_response(lambda response: "/comments/" in response.url) as answer:
        thread.locator(".reply-form button").click()
    assert answer.value.status == 200  # the thread, saying why (a 4xx would be a console error)
    expect(thread.locator(".thread-error")).to_have_text("Reply not saved: The comment is empty.")
    assert page.evaluate("window.__samePage") is True
    assert not Comment.objects.filter(parent__isnull=False).exists()


def test_the_review_page_replies_in_place_too(page, live_server, threads):
    """The same threads on the review page: a reviewer's comment typed on a check survives a reply."""
    page.context.add_init_script(CSP_LISTENER)
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text) if msg.type == "error" else None)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "rhea")
    page.fill("input[name=password]", "pw-rhea")
    page.click("form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    page.goto(f"{live_server.url}/review/tasks/{threads['task'].slug}/")
    page.evaluate("window.__samePage = true")
    check = page.locator('[data-review-check="report_exists"]')
    check.locator("summary").click()
    check.locator("textarea[data-check-comment]").fill("Name the file in the prompt.")
    thread = page.locator(f"#thread-{threads['on_check'].pk}")
    thread.locator("textarea[name=body]").fill("Or 2?")
    thread.locator(".reply-form button").click()
    expect(thread.locator(".comment.reply")).to_contain_text("Or 2?")
    assert page.evaluate("window.__samePage") is True
    assert check.locator("textarea[data-check-comment]").input_value() == "Name the file in the prompt."
    assert console == [] and page.evaluate("window.__cspViolations") == []


def lambda_class(name):
    import re

    return re.compile(rf"(^|\s){name}(\s|$)")
