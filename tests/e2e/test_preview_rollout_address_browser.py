"""The preview page's address names the rollout it shows: a click on a rollout row loads its panel in place (htmx),
and the address stayed the preview's own, so a reload, or the address sent to a reviewer, showed another rollout."""

from __future__ import annotations

import pytest

from tests.review.conftest import finished_preview
from tests.sandbox.factories import make_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def preview(author):
    task = make_task(author=author)
    return finished_preview(task.latest_version, author, "oracle", [1.0, 1.0, 1.0])


def test_a_clicked_rollout_is_in_the_address_and_a_reload_shows_it_again(watched, live_server, preview):
    page = watched
    page.goto(f"{live_server.url}/previews/{preview.pk}/")
    third = preview.rollouts.get(index=2)
    page.click(f'tr.rollout-row[data-rollout-id="{third.pk}"] a')
    page.wait_for_selector(f'#rollout-detail[data-rollout-id="{third.pk}"]')
    assert page.url == f"{live_server.url}/previews/{preview.pk}/?rollout={third.pk}"
    page.reload()
    page.wait_for_selector(f'#rollout-detail[data-rollout-id="{third.pk}"]')
    # a click anywhere on a row loads it too, and names it
    second = preview.rollouts.get(index=1)
    page.click(f'tr.rollout-row[data-rollout-id="{second.pk}"] td >> nth=2')
    page.wait_for_selector(f'#rollout-detail[data-rollout-id="{second.pk}"]')
    assert page.url == f"{live_server.url}/previews/{preview.pk}/?rollout={second.pk}"
