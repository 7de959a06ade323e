"""Review pages and forms."""

import pytest


@pytest.mark.parametrize("data, expected", [
    ({"decision": "comment", "version": "abc"}, "version: Enter a whole number."),
    ({"decision": "maybe", "version": "1"}, "decision: Select a valid choice."),
])
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


def test_the_list_and_the_task_page_show_the_approved_version_beside_the_new_draft(client, submitted, author,
                                                                                   reviewer):
    from authoring import services as authoring_services
    from review import services
    from tests.review.conftest import task_content

    services.review_create(task_version=submitted.latest_version, reviewer=reviewer, decision="approve")
    authoring_services.task_version_create(task=submitted, author=author, base_version=1,
                                           content=task_content(title="v2"))
    client.force_login(author)
    for url in ("/", f"/tasks/{submitted.slug}/"):
        page = client.get(url).content.decode()
        assert "approved · v2 draft" in " ".join(page.split()), url
