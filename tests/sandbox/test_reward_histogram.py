"""Every preview shows a reward histogram, drawn on the server as SVG."""

from tests.review.conftest import finished_preview


def test_a_finished_preview_shows_its_reward_histogram(client, version, author):
    run = finished_preview(version, author, "nop", [0.0, 0.0, 1.0])
    client.force_login(author)
    page = client.get(f"/previews/{run.pk}/").content.decode()
    assert 'aria-label="Reward histogram of 3 rollouts"' in page and 'data-counts="2,0,0,0,0,0,0,0,0,1"' in page
