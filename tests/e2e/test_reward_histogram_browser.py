"""The reward histogram fits its box: on the preview page its summary cell was ~150 px wide and the
240 px SVG ran out of it, so an oracle preview (every reward 1.0, one bar at the right end) showed an
empty box with a "0" label at 1280, 1400 and 1920 px. Measured in Chromium, not eyeballed."""

from __future__ import annotations

import pytest

from tests.review.conftest import finished_preview
from tests.sandbox.factories import make_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Where each drawn bar (a rect of non-zero height) and the SVG itself are, beside the box that holds them.
MEASURE = """(box) => {
  const svg = box.querySelector("svg.histogram");
  const outer = box.getBoundingClientRect(), drawn = svg.getBoundingClientRect();
  const bars = Array.from(svg.querySelectorAll("rect"))
    .filter((rect) => rect.getBoundingClientRect().height > 0)
    .map((rect) => { const b = rect.getBoundingClientRect(); return {left: b.left, right: b.right, width: b.width}; });
  return {box: {left: outer.left, right: outer.right}, svg: {left: drawn.left, right: drawn.right, width: drawn.width},
          bars, scrollWidth: document.documentElement.scrollWidth};
}"""


@pytest.fixture
def oracle_preview(author):
    task = make_task(author=author)
    return finished_preview(task.latest_version, author, "oracle", [1.0, 1.0, 1.0, 1.0])


def assert_inside(measured: dict) -> None:
    box, svg, bars = measured["box"], measured["svg"], measured["bars"]
    assert box["left"] <= svg["left"] and svg["right"] <= box["right"] + 0.5, measured
    assert len(bars) == 1, measured  # every reward is 1.0: one bar, the last bin's
    bar = bars[0]
    assert box["left"] <= bar["left"] and bar["right"] <= box["right"] + 0.5 and bar["width"] >= 10, measured


@pytest.mark.parametrize("width", [1280, 1400, 1920])
def test_the_preview_page_histogram_fits_its_cell(watched, live_server, oracle_preview, width):
    page = watched
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/previews/{oracle_preview.pk}/")
    box = page.locator("#reward-histogram").locator("xpath=..")  # the summary cell: "Rewards" and the chart
    assert page.get_attribute("#reward-histogram svg", "data-counts") == "0,0,0,0,0,0,0,0,0,4"
    measured = box.evaluate(MEASURE)
    assert_inside(measured)
    assert round(measured["svg"]["width"]) == 240, measured  # its cell has room for it at full size
    assert measured["scrollWidth"] <= width, measured


def test_a_histogram_in_a_narrower_box_scales_down_whole(watched, live_server, oracle_preview):
    page = watched
    page.set_viewport_size({"width": 240, "height": 800})
    page.goto(f"{live_server.url}/previews/{oracle_preview.pk}/")
    measured = page.locator("#reward-histogram").evaluate(MEASURE)
    assert_inside(measured)
    assert measured["svg"]["width"] < 240, measured


def test_the_review_page_histogram_still_shows_at_full_size(watched, live_server, oracle_preview):
    page = watched
    page.goto(f"{live_server.url}/review/tasks/{oracle_preview.task_version.task.slug}/")
    run = page.locator(f'.evidence-run[data-preview="{oracle_preview.pk}"]')
    measured = run.evaluate(MEASURE)
    assert_inside(measured)
    assert round(measured["svg"]["width"]) == 240, measured
