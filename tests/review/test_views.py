"""Review pages and forms."""

import pytest


@pytest.mark.parametrize(
    "data, expected",
    [
        ({"decision": "comment", "version": "abc"}, "version: Enter a whole number."),
        ({"decision": "maybe", "version": "1"}, "decision: Select a valid choice."),
    ],
)
def test_a_bad_review_form_says_which_field_is_wrong(client, reviewer, task, data, expected):
    client.force_login(reviewer)

    response = client.post(f"/tasks/{task.slug}/review/", data, follow=True)

    shown = [str(message) for message in response.context["messages"]]
    assert response.redirect_chain[-1][1] == 302
    assert any(message.startswith("Review not recorded:") and expected in message for message in shown)


def test_submit_and_review_through_the_task_page(client, author, reviewer, task):
    from tests.review.conftest import pass_gates

    pass_gates(task.latest_version, author)
    client.force_login(author)
    client.post(f"/tasks/{task.slug}/submit/")
    task.refresh_from_db()
    assert task.status == "in_review"
    client.force_login(reviewer)
    page = client.get(f"/tasks/{task.slug}/").content.decode()
    assert 'name="decision"' in page and "checked" not in page.split('name="decision"', 1)[1].split("</form>")[0]
    client.post(f"/tasks/{task.slug}/review/", {"decision": "approve", "version": 1, "comment": "good"})
    task.refresh_from_db()
    assert task.status == "approved"
    page = client.get(f"/tasks/{task.slug}/").content.decode()
    assert "approved" in page and "submitted for review" in page


def test_the_task_page_refuses_a_submit_with_failing_gates_and_says_which(client, author, task):
    client.force_login(author)
    response = client.post(f"/tasks/{task.slug}/submit/", follow=True)
    shown = " ".join(str(message) for message in response.context["messages"])
    assert "until every gate passes" in shown and "Oracle passes (not run)" in shown
    task.refresh_from_db()
    assert task.status == "draft"


def test_the_list_and_the_task_page_show_the_approved_version_beside_the_new_draft(client, submitted, author, reviewer):
    from authoring import services as authoring_services
    from review import services
    from tests.review.conftest import task_content

    services.review_create(task_version=submitted.latest_version, reviewer=reviewer, decision="approve")
    authoring_services.task_version_create(
        task=submitted, author=author, base_version=1, content=task_content(title="v2")
    )
    client.force_login(author)
    for url in ("/", f"/tasks/{submitted.slug}/"):
        page = client.get(url).content.decode()
        assert "approved · v2 draft" in " ".join(page.split()), url
    # The list says who approved, not only who wrote the version (which read as if the author approved it).
    row = " ".join(client.get("/").content.decode().split())
    assert "· v1 approved by rita" in row and "· v2 written by alice" in row


def test_the_review_page_shows_everything_needed_to_decide(client, submitted, author, reviewer):
    from review import services
    from tests.review.conftest import finished_preview

    services.comment_create(task=submitted, user=reviewer, body="Is 42.0 fine?", check_id="says_42")
    client.force_login(reviewer)
    page = client.get(f"/review/tasks/{submitted.slug}/").content.decode()
    text = " ".join(page.split())
    assert "What is <em>six</em> times seven?" in page  # the prompt, rendered
    assert "the answer contains “42”" in text and "the answer matches /\\d+/" in text  # checks in words
    assert 'data-review-check="says_42"' in page and 'data-review-check="has_number"' in page
    assert "Is 42.0 fine?" in page  # the thread, at its check
    assert 'data-gate="oracle" data-status="pass"' in page  # the gates
    assert 'aria-label="Reward histogram of 3 rollouts"' in page  # evidence of this version
    assert 'id="review-form"' in page and 'id="keyboard-help"' in page
    assert "js/review.js" in page and "<script>" not in page  # a module file, no inline script
    assert 'name="check_comment__says_42"' in page
    finished_preview(submitted.latest_version, author, "oracle", [1.0])
    assert 'id="stale-previews"' not in page


def test_the_review_page_warns_when_only_an_older_version_was_previewed(client, task, author, admin, reviewer):
    from authoring import services as authoring_services
    from review import services
    from tests.review.conftest import pass_gates, task_content

    pass_gates(task.latest_version, author)
    authoring_services.task_version_create(task=task, author=author, base_version=1, content=task_content(title="v2"))
    services.task_submit(task=task, user=admin, override_reason="previews later")
    client.force_login(reviewer)
    page = client.get(f"/review/tasks/{task.slug}/").content.decode()
    assert 'id="stale-previews"' in page and "the latest previews are of v1 only" in page
    assert "Submitted past failing gates by adam" in page and "previews later" in page


def test_a_reviewer_requests_changes_with_a_check_comment_from_the_review_page(client, submitted, reviewer, author):
    client.force_login(reviewer)
    response = client.post(
        f"/tasks/{submitted.slug}/review/",
        {"decision": "request_changes", "version": 1, "comment": "", "check_comment__says_42": "Accept 42.0 as well."},
    )
    assert response.status_code == 302
    submitted.refresh_from_db()
    assert submitted.status == "changes_requested"
    client.force_login(author)
    editor = client.get(f"/tasks/{submitted.slug}/edit/").content.decode()
    assert 'data-check-thread="says_42"' in editor and "Accept 42.0 as well." in editor
    inbox = client.get("/inbox/").content.decode()
    assert "requested changes on" in inbox and "six-times-seven" in inbox


def test_the_review_page_diffs_against_the_version_the_reviewer_saw(client, submitted, author, reviewer):
    from authoring import services as authoring_services
    from review import services
    from tests.review.conftest import RUBRIC, pass_gates, task_content

    client.force_login(reviewer)
    client.get(f"/review/tasks/{submitted.slug}/")  # saw v1
    services.review_create(
        task_version=submitted.latest_version, reviewer=reviewer, decision="request_changes", comment="more"
    )
    rubric = {**RUBRIC, "checks": [{**RUBRIC["checks"][0], "expected": "forty-two"}, RUBRIC["checks"][1]]}
    authoring_services.task_version_create(
        task=submitted, author=author, base_version=1, content=task_content(rubric=rubric)
    )
    pass_gates(submitted.latest_version, author)
    services.task_submit(task=submitted, user=author)
    page = client.get(f"/review/tasks/{submitted.slug}/").content.decode()
    assert "Changes since v1" in page and "check-diff-changed" in page and "forty-two" in page


def test_queue_and_inbox_pages_and_nav_badges(client, submitted, reviewer, author):
    client.force_login(reviewer)
    page = client.get("/review/").content.decode()
    assert (
        f'data-task="{submitted.slug}"' in page
        and 'id="nav-review">Review <span class="badge nav-count" data-count="1">' in page
    )
    assert f'data-task="{submitted.slug}"' not in client.get("/review/?environment=nope").content.decode()
    from review import services

    services.review_create(task_version=submitted.latest_version, reviewer=reviewer, decision="approve")
    client.force_login(author)
    assert 'data-count="1"' in client.get("/").content.decode().split('id="nav-inbox"')[1][:200]
    inbox = client.get("/inbox/").content.decode()
    assert 'data-kind="approved"' in inbox and "unread" in inbox
    assert "nav-count" not in client.get("/inbox/").content.decode().split('id="nav-inbox"')[1][:120]
    assert client.get("/review/").status_code == 403  # authors have no queue


def test_label_queue_agreement_page_and_dashboard_render(client, submitted, reviewer):
    client.force_login(reviewer)
    assert client.get("/review/labels/").status_code == 200
    assert client.get(f"/review/labels/?task={submitted.slug}").status_code == 200
    page = client.get("/review/environments/shell/").content.decode()
    assert 'data-values="Draft=0;In review=1;' in page
    assert "not measured=1" in page
    assert client.get("/review/environments/shell/agreement/").status_code == 200


@pytest.mark.parametrize("who", ["author", "reviewer"])
def test_the_review_workspace_links_only_to_pages_the_viewer_may_open(client, submitted, who, request):
    # An author opens the environment's dashboard, its agreement page and a task's review page, but has no review
    # queue or label queue: a link to them answered 403 (found walking the app as the demo author).
    import html
    import re

    client.force_login(request.getfixturevalue(who))
    for page in (
        "/review/environments/shell/",
        "/review/environments/shell/agreement/",
        f"/review/tasks/{submitted.slug}/",
    ):
        body = client.get(page).content.decode()
        links = {html.unescape(href) for href in re.findall(r'href="(/review/[^"]*)"', body)}
        refused = [href for href in sorted(links) if client.get(href).status_code == 403]
        assert not refused, f"{who} on {page}: links to pages that refuse them: {refused}"


HTMX = {"HTTP_HX_REQUEST": "true"}


def test_a_reply_and_a_resolve_from_htmx_answer_with_the_thread_alone(client, submitted, author, reviewer):
    """The editor and the review page reply and resolve in place: the answer is the thread, redrawn, never a
    redirect to a page reload that would drop the author's unsaved edits."""
    from review import services

    thread = services.comment_create(task=submitted, user=reviewer, body="Worth 3 points?", check_id="says_42")
    client.force_login(author)
    editor = client.get(f"/tasks/{submitted.slug}/edit/").content.decode()
    assert f'hx-post="/tasks/{submitted.slug}/comments/"' in editor and 'hx-target="closest .thread"' in editor

    response = client.post(
        f"/tasks/{submitted.slug}/comments/",
        {"parent": thread.pk, "body": "Yes, all of it.", "next": f"/tasks/{submitted.slug}/edit/"},
        **HTMX,
    )
    fragment = response.content.decode()
    assert response.status_code == 200 and fragment.lstrip().startswith(f'<div class="thread" id="thread-{thread.pk}"')
    assert "Worth 3 points?" in fragment and "Yes, all of it." in fragment and "<html" not in fragment
    assert f'name="next" value="/tasks/{submitted.slug}/edit/"' in fragment  # its forms still work without JavaScript

    response = client.post(f"/tasks/{submitted.slug}/comments/{thread.pk}/resolve/", {"resolved": "1"}, **HTMX)
    fragment = response.content.decode()
    assert response.status_code == 200 and f'<div class="thread resolved" id="thread-{thread.pk}"' in fragment
    assert (
        "resolved by alice" in fragment and ">Reopen</button>" in fragment and 'name="resolved" value="0"' in fragment
    )
    thread.refresh_from_db()
    assert thread.is_resolved and [reply.body for reply in thread.replies.all()] == ["Yes, all of it."]

    # Without htmx (no JavaScript) both still post and go back to the page.
    response = client.post(
        f"/tasks/{submitted.slug}/comments/{thread.pk}/resolve/",
        {"resolved": "0", "next": f"/tasks/{submitted.slug}/edit/"},
    )
    assert response.status_code == 302 and response["Location"] == f"/tasks/{submitted.slug}/edit/"


def test_a_refused_reply_from_htmx_says_why_in_the_thread_and_keeps_the_text(
    client, submitted, author, reviewer, settings
):
    from review import services

    settings.REVIEW_COMMENT_MAX_CHARS = 20
    thread = services.comment_create(task=submitted, user=reviewer, body="Why?")
    client.force_login(author)
    response = client.post(f"/tasks/{submitted.slug}/comments/", {"parent": thread.pk, "body": "x" * 21}, **HTMX)
    fragment = response.content.decode()
    assert response.status_code == 200 and f'id="thread-{thread.pk}"' in fragment
    assert "Reply not saved: The comment is longer than the 20 character limit" in fragment
    assert f">\n{'x' * 21}</textarea>" in fragment  # what was typed is still there to shorten
    blank = client.post(f"/tasks/{submitted.slug}/comments/", {"parent": thread.pk, "body": "  "}, **HTMX)
    assert "Reply not saved: The comment is empty." in blank.content.decode()
    assert not thread.replies.exists()

    gone = client.post(f"/tasks/{submitted.slug}/comments/", {"parent": 999999, "body": "hello"}, **HTMX)
    assert gone.status_code == 404 and "That thread no longer exists." in gone.content.decode()
    gone = client.post(f"/tasks/{submitted.slug}/comments/999999/resolve/", {"resolved": "1"}, **HTMX)
    assert gone.status_code == 404 and "That thread no longer exists." in gone.content.decode()


def test_a_refused_decision_comes_back_with_every_comment_typed_and_each_box_carries_the_limit(
    client, submitted, reviewer, settings
):
    """The walkthrough's 10,001-character comment said "Comment not saved: ... longer than the 10000 character
    limit" and came back with the box empty."""
    settings.REVIEW_COMMENT_MAX_CHARS = 50
    client.force_login(reviewer)
    page_url = f"/review/tasks/{submitted.slug}/"
    page = client.get(page_url).content.decode()
    for name in ('name="comment"', 'name="check_comment__says_42"'):
        assert 'maxlength="50"' in page.split(name)[1].split(">")[0], name
    long_comment = "Tighten the pattern: " + "x" * 40
    response = client.post(
        f"/tasks/{submitted.slug}/review/",
        {
            "decision": "request_changes",
            "version": 1,
            "comment": long_comment,
            "next": page_url,
            "check_comment__says_42": "Accept 42.0 as well.",
            "check_comment__has_number": "",
        },
        follow=True,
    )
    page = response.content.decode()
    assert response.redirect_chain[-1][0] == page_url
    assert "longer than the 50 character limit" in page
    assert f'id="task-comment" rows="3" maxlength="50">\n{long_comment}</textarea>' in page
    assert 'aria-label="Comment on says_42">\nAccept 42.0 as well.</textarea>' in page
    assert '<details class="check-comment" open><summary>Comment on says_42' in page
    submitted.refresh_from_db()
    assert submitted.status == "in_review"
    again = client.get(page_url).content.decode()  # kept for the page that was refused, once
    assert long_comment not in again and "Accept 42.0 as well." not in again


def test_a_refused_comment_from_the_comment_form_comes_back_in_its_box(client, submitted, author, settings):
    settings.REVIEW_COMMENT_MAX_CHARS = 20
    client.force_login(author)  # the owner: comments, but does not decide
    page_url = f"/review/tasks/{submitted.slug}/"
    assert 'maxlength="20"' in client.get(page_url).content.decode().split('name="body"')[1].split(">")[0]
    response = client.post(
        f"/tasks/{submitted.slug}/comments/",
        {"body": "Why is 42.0 refused here, exactly?", "check_id": "says_42", "next": page_url},
        follow=True,
    )
    page = response.content.decode()
    assert "Comment not saved" in page and "longer than the 20 character limit" in page
    assert 'aria-label="Comment on says_42">\nWhy is 42.0 refused here, exactly?</textarea>' in page


def test_the_review_page_shows_check_code_and_files_with_a_diff_of_what_changed(client, author, reviewer, environment):
    """What a reviewer approves is on the page: a python check's code, protected and grader files as text, a
    line diff for a file changed since the version compared with, and a binary file named, not shown."""
    from authoring import services as authoring_services
    from review import services
    from tests.review.conftest import pass_gates, task_content

    old_test = authoring_services.blob_store(data=b"def test_answer():\n    assert answer() == 42\n")
    new_test = authoring_services.blob_store(data=b"def test_answer():\n    assert answer() == 41\n")
    grader = authoring_services.blob_store(data=b"#!/bin/sh\necho <b>graded</b>\n")
    binary = authoring_services.blob_store(data=b"\x89PNG\r\n\x1a\n\0\0")
    rubric = {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 0.5,
        "checks": [
            {"id": "says_42", "kind": "string_match", "points": 2, "mode": "contains", "expected": "42"},
            {
                "id": "by_code",
                "kind": "python",
                "points": 1,
                "code": "def check(ctx):\n    return '42' in ctx.answer\n",
            },
        ],
    }

    def files(test_blob):
        return [
            {"path": "tests/test_answer.py", "sha256": test_blob.sha256, "role": "protected"},
            {"path": "grade.sh", "sha256": grader.sha256, "role": "grader"},
            {"path": "logo.png", "sha256": binary.sha256},
        ]

    task = authoring_services.task_create(
        slug="coded", environment=environment, author=author, content=task_content(rubric=rubric, files=files(old_test))
    )
    pass_gates(task.latest_version, author)
    services.task_submit(task=task, user=author)
    services.review_create(task_version=task.latest_version, reviewer=reviewer, decision="approve")
    authoring_services.task_version_create(
        task=task, author=author, base_version=1, content=task_content(rubric=rubric, files=files(new_test))
    )
    task.refresh_from_db()
    pass_gates(task.latest_version, author)
    services.task_submit(task=task, user=author)
    client.force_login(reviewer)

    page = client.get(f"/review/tasks/{task.slug}/").content.decode()

    assert 'data-check-code="by_code"' in page and "return &#x27;42&#x27; in ctx.answer" in page
    assert "echo &lt;b&gt;graded&lt;/b&gt;" in page and "<b>graded</b>" not in page  # text, escaped
    changed = page.split('data-file="tests/test_answer.py"', 1)[1].split("</details>", 1)[0]
    assert 'data-file-status="changed"' in page and "changed since v1" in changed
    assert '<tr class="diff-del">' in changed and "assert answer() == 42" in changed
    assert '<tr class="diff-add">' in changed and "assert answer() == 41" in changed
    assert 'data-role="protected"' in changed
    png = page.split('data-file="logo.png"', 1)[1].split("</details>", 1)[0]
    assert "binary, 10 bytes" in png and "PNG" not in png
