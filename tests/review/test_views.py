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
