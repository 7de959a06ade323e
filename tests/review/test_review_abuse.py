"""Hostile review input: oversized, NUL-laden or ill-typed comments are refused with their field,
never stored, never a 500."""

import pytest

from review.models import Comment, Review
from tests.review.conftest import api_client


@pytest.mark.parametrize(
    "payload, pointer",
    [
        ({"decision": "comment", "comment": "x" * 10_001}, "/comment"),
        ({"decision": "comment", "check_comments": {"says_42": "y" * 10_001}}, "/check_comments/says_42"),
        ({"decision": "comment", "comment": "nul\x00here"}, "/comment"),
        ({"decision": "comment", "check_comments": {"../../etc": "z"}}, "/check_comments/..~1..~1etc"),
        ({"decision": "comment", "check_comments": ["not", "an", "object"]}, "/check_comments"),
        ({"decision": "comment", "check_comments": {"says_42": {"nested": 1}}}, "/check_comments/says_42"),
    ],
)
def test_hostile_review_payloads_are_refused_with_their_pointer(submitted, reviewer, payload, pointer):
    response = api_client(reviewer).post(f"/api/tasks/{submitted.slug}/versions/1/reviews/", payload, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["details"][0]["pointer"] == pointer
    assert not Review.objects.exists() and not Comment.objects.exists()


def test_oversized_comments_and_overlong_check_ids_are_refused(submitted, reviewer):
    base = f"/api/tasks/{submitted.slug}/comments/"
    response = api_client(reviewer).post(base, {"body": "b" * 10_001}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "too_long"
    response = api_client(reviewer).post(base, {"body": "ok", "check_id": "x" * 65}, format="json")
    assert response.status_code == 400 and response.json()["error"]["details"][0]["pointer"] == "/check_id"
    assert not Comment.objects.exists()


def test_a_refused_post_too_large_to_keep_is_not_copied_into_the_session(client, submitted, reviewer):
    """The review page keeps a refused post's boxes in the session for the next view (review.drafts); a post no
    browser's maxlength lets through (past KEEP_MAX_CHARS in all) is refused and not kept: no megabytes copied
    into a session row per request."""
    from review.drafts import KEEP_MAX_CHARS, SESSION_KEY

    client.force_login(reviewer)
    page_url = f"/review/tasks/{submitted.slug}/"
    response = client.post(
        f"/tasks/{submitted.slug}/review/",
        {
            "decision": "request_changes",
            "version": 1,
            "comment": "x" * (KEEP_MAX_CHARS // 2),
            "next": page_url,
            "check_comment__says_42": "y" * (KEEP_MAX_CHARS // 2 + 1),
        },
    )
    assert response.status_code == 302
    assert SESSION_KEY not in client.session
    assert not Review.objects.exists() and not Comment.objects.exists()


def _review_page_with_changed_file(client, author, reviewer, environment, old: bytes, new: bytes) -> str:
    """The review page of v2 of a task whose attached file went from `old` to `new` since the approved v1."""
    from authoring import services as authoring_services
    from review import services
    from tests.review.conftest import pass_gates, task_content

    def files(data: bytes) -> list[dict]:
        return [{"path": "data.txt", "sha256": authoring_services.blob_store(data=data).sha256}]

    task = authoring_services.task_create(
        slug="repeats", environment=environment, author=author, content=task_content(files=files(old))
    )
    pass_gates(task.latest_version, author)
    services.task_submit(task=task, user=author)
    services.review_create(task_version=task.latest_version, reviewer=reviewer, decision="approve")
    authoring_services.task_version_create(
        task=task, author=author, base_version=1, content=task_content(files=files(new))
    )
    client.force_login(reviewer)
    response = client.get(f"/review/tasks/{task.slug}/")
    assert response.status_code == 200
    return response.content.decode().split('data-file="data.txt"', 1)[1].split("</details>", 1)[0]


# One line repeated, against two lines alternating: difflib's matcher finds a longest match of one line at a
# time, each search over every pair, so its work grows with the cube of the lines (600 lines: seconds; the
# 64 KB the page shows of a file: hours of a web worker).
REPEATED = b"x\n" * 600
ALTERNATING = b"x\ny\n" * 300


def test_a_file_diff_over_the_line_pairs_limit_is_shown_whole_and_says_so(
    client, author, reviewer, environment, settings
):
    settings.DIFF_MAX_CELLS = 10_000
    shown = _review_page_with_changed_file(client, author, reviewer, environment, REPEATED, ALTERNATING)
    assert 'class="diff-note muted"' in shown and "GYMWRIGHT_DIFF_MAX_CELLS" in shown
    # The first line is the same in both and stays a line of context; the rest is shown whole.
    assert "599 lines removed and 599 added, shown whole" in shown
    assert shown.count('<tr class="diff-add">') == 599 and shown.count('<tr class="diff-del">') == 599


def test_a_file_diff_past_the_pages_time_is_shown_whole_and_says_so(client, author, reviewer, environment, settings):
    settings.DIFF_BUDGET_S = 0
    shown = _review_page_with_changed_file(client, author, reviewer, environment, REPEATED, ALTERNATING)
    assert "GYMWRIGHT_DIFF_BUDGET_S" in shown and "600 lines removed and 600 added, shown whole" in shown


@pytest.mark.timeout(120)
def test_the_review_page_of_a_cubic_diff_at_the_files_shown_cap_still_answers_in_seconds(
    client, author, reviewer, environment
):
    import time

    from authoring.selectors import FILE_SHOWN_MAX_BYTES

    start = time.monotonic()
    shown = _review_page_with_changed_file(
        client,
        author,
        reviewer,
        environment,
        b"x\n" * (FILE_SHOWN_MAX_BYTES // 2),
        b"x\ny\n" * (FILE_SHOWN_MAX_BYTES // 4),
    )
    assert "shown whole" in shown
    assert time.monotonic() - start < 30  # the default budget is 2 s; unbounded, this diff takes hours


def test_files_past_the_shown_cap_are_still_named_on_the_review_page(client, author, reviewer, environment):
    """The review page shows the text of the first FILES_SHOWN_MAX files; a task with more attached files must
    not hide the rest from the reviewer who approves them (a changed file past the cap included)."""
    from authoring import services as authoring_services
    from authoring.selectors import FILES_SHOWN_MAX
    from tests.review.conftest import task_content

    files = [
        {"path": f"data/{index:03}.txt", "sha256": authoring_services.blob_store(data=f"{index}\n".encode()).sha256}
        for index in range(FILES_SHOWN_MAX + 2)
    ]
    task = authoring_services.task_create(
        slug="many-files", environment=environment, author=author, content=task_content(files=files)
    )
    client.force_login(reviewer)

    page = client.get(f"/review/tasks/{task.slug}/").content.decode()

    assert page.count('class="file-shown"') == FILES_SHOWN_MAX + 2
    last = page.split(f'data-file="data/{FILES_SHOWN_MAX + 1:03}.txt"', 1)[1].split("</details>", 1)[0]
    assert f"the page shows the first {FILES_SHOWN_MAX} files" in last
    assert f'data-file="data/{FILES_SHOWN_MAX - 1:03}.txt"' in page
