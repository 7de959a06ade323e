"""Never lose an edit: leaving the task editor with unsaved changes asks first."""

from __future__ import annotations

import pytest

from authoring import services
from tests.e2e.conftest import wait_for_editor
from tests.sandbox.factories import RUBRIC

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def task(author, environment):
    return services.task_create(
        slug="guarded",
        environment=environment,
        author=author,
        content={"title": "Guarded", "prompt": "Say 42.", "rubric": RUBRIC, "solution": {"answer": "42"}},
    )


def open_editor(page, live_server, task):
    page.goto(f"{live_server.url}/tasks/{task.slug}/edit/")
    wait_for_editor(page)
    page.wait_for_selector("#task-form[data-guard-ready=true]")


def test_an_in_app_link_asks_before_dropping_unsaved_changes(logged_in, live_server, task):
    page = logged_in
    dialogs = []
    choice = {"accept": False}

    def answer(dialog):
        dialogs.append((dialog.type, dialog.message))
        dialog.accept() if choice["accept"] else dialog.dismiss()

    page.on("dialog", answer)
    open_editor(page, live_server, task)
    # Untouched: the Cancel link leaves without asking.
    page.click("text=Cancel")
    page.wait_for_url(f"{live_server.url}/tasks/{task.slug}/")
    assert dialogs == []

    open_editor(page, live_server, task)
    # A structured rubric edit (written into the JSON by the editor, no input event on the form).
    page.locator('#rubric-structured .re-card[data-pointer="/checks/0"] [data-key=points] input').fill("7")
    page.click("text=Cancel")
    assert dialogs and dialogs[-1][0] == "confirm" and "unsaved changes" in dialogs[-1][1]
    assert page.url == f"{live_server.url}/tasks/{task.slug}/edit/"
    assert '"points": 7' in page.input_value("#rubric-json")  # still there

    choice["accept"] = True
    page.click("nav >> text=Tasks")
    page.wait_for_url(f"{live_server.url}/")
    assert task.versions.count() == 1


def test_closing_or_reloading_with_unsaved_changes_asks_through_beforeunload(logged_in, live_server, task):
    page = logged_in
    open_editor(page, live_server, task)
    page.fill("#id_title", "Guarded, retitled")
    with page.expect_event("dialog") as dialog_info:
        page.close(run_before_unload=True)
    dialog = dialog_info.value
    assert dialog.type == "beforeunload"
    dialog.dismiss()
    assert not page.is_closed()  # dismissed: the author stays with the edit
    assert page.input_value("#id_title") == "Guarded, retitled"


def test_saving_does_not_ask(logged_in, live_server, task):
    page = logged_in
    open_editor(page, live_server, task)
    page.fill("#id_title", "Guarded, saved")
    seen = []
    page.on("dialog", lambda d: (seen.append(d.type), d.dismiss()))
    page.click("#save-button")
    page.wait_for_url(f"{live_server.url}/tasks/{task.slug}/")
    assert seen == [] and task.versions.count() == 2


def test_a_reload_mid_edit_offers_the_unsaved_draft_back(logged_in, live_server, task):
    import json

    from playwright.sync_api import expect

    page = logged_in
    page.on("dialog", lambda dialog: dialog.accept())  # "leave the page?" on reload: yes
    open_editor(page, live_server, task)
    page.fill("#id_title", "Guarded, renamed")
    page.click("button[data-view=raw]")
    rubric = json.loads(page.input_value("#rubric-json"))
    rubric["pass_threshold"] = 0.9
    page.fill("#rubric-json", json.dumps(rubric, indent=2))
    page.wait_for_function(
        "() => Object.keys(localStorage).some((key) => key.startsWith('gymwright:draft:')"
        " && localStorage.getItem(key).includes('0.9'))"
    )
    page.reload()
    wait_for_editor(page)
    bar = page.locator("#draft-restore")
    expect(bar).to_contain_text("This browser kept unsaved changes to this page")
    assert page.input_value("#id_title") == "Guarded"  # nothing is put back unasked
    bar.get_by_role("button", name="Restore them").click()
    expect(bar).to_have_count(0)
    assert page.input_value("#id_title") == "Guarded, renamed"
    assert json.loads(page.input_value("#rubric-json"))["pass_threshold"] == 0.9
    page.click("#save-button")
    page.wait_for_url(f"{live_server.url}/tasks/{task.slug}/")
    assert task.versions.order_by("-number").first().spec["rubric"]["pass_threshold"] == 0.9
    # Saved: the draft is gone, nothing is offered on the next visit.
    open_editor(page, live_server, task)
    expect(page.locator("#draft-restore")).to_have_count(0)


def test_a_draft_is_the_signed_in_user_s_and_signing_out_drops_it(logged_in, live_server, task, author):
    """On a shared browser nobody finds another's unsaved task text: the draft's key names its user, and
    signing out (even with a draft save pending on the way out) leaves no draft in localStorage."""
    page = logged_in
    page.on("dialog", lambda dialog: dialog.accept())  # "leave the page?" on signing out: yes
    open_editor(page, live_server, task)
    page.fill("#id_title", "Guarded, unsaved secret")
    page.wait_for_function(
        "() => Object.keys(localStorage).some((key) => key.startsWith('gymwright:draft:')"
        " && localStorage.getItem(key).includes('unsaved secret'))"
    )
    keys = page.evaluate("Object.keys(localStorage).filter((key) => key.startsWith('gymwright:draft:'))")
    assert keys == [f"gymwright:draft:{author.pk}:/tasks/{task.slug}/edit/:{task.versions.get().number}"], keys
    page.fill("#id_title", "Guarded, typed just before signing out")  # its save is still pending
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{live_server.url}/**")
    page.goto(f"{live_server.url}/accounts/login/")
    assert page.evaluate("Object.keys(localStorage).filter((key) => key.startsWith('gymwright:draft:'))") == []
