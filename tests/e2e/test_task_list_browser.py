"""List headers at the widths a laptop shows: the "New …" button stays inside the page, on one line,
level with the heading (it once overflowed the page at 1280–1400 px)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [1280, 1336, 1400])
@pytest.mark.parametrize("path, name", [("/", "New task"), ("/environments/", "New environment")])
def test_the_new_button_fits_in_the_page_at_laptop_widths(logged_in, live_server, environment, width, path, name):
    page = logged_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}{path}")
    box = page.get_by_role("link", name=name).bounding_box()
    heading = page.locator("main h1").first.bounding_box()
    main = page.locator("main").bounding_box()
    line_height = page.evaluate("parseFloat(getComputedStyle(document.body).lineHeight)")
    assert main["x"] <= box["x"] and box["x"] + box["width"] <= min(main["x"] + main["width"], width)
    assert box["height"] < 2 * line_height  # one line of text plus padding, not wrapped
    assert box["y"] < heading["y"] + heading["height"] and heading["y"] < box["y"] + box["height"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width
