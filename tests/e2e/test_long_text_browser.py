"""Long unbroken text never widens a page. A 500-character title without a space made `/` 2603 px wide
with the task table off screen, and ran over the task page's Edit / History / Download buttons; slugs,
check ids and file names of their longest allowed length widened tables the same way. Every page that
shows them is opened in Chromium and measured: nothing reaches past the window's width, and the title
stays clear of the buttons beside it."""

from __future__ import annotations

import pytest

from authoring import services as authoring_services
from packs import services as pack_services
from review import services as review_services
from sandbox import services as sandbox_services
from tests.e2e.conftest import CSP_LISTENER, PASSWORD, TIMEOUT_MS, sign_in
from tests.support.users import make_user

pytestmark = [pytest.mark.browser, pytest.mark.bubblewrap, pytest.mark.django_db(transaction=True)]

TITLE = ("Supercalifragilisticexpialidocious" * 6)[:195]  # 195 characters, no space (the format takes 200)
SLUG = "unbrokenslug" * 5 + "abcd"  # 64: the longest slug
ENVIRONMENT = "unbrokenenvironment" * 3 + "abcdefg"  # 64
CHECK = "says_the_product_of_six_and_seven_in_one_unbroken_identifier_ok1"  # 64: the longest check id
FILE = "an_attached_file_whose_name_runs_on_without_a_space_or_a_slash_" * 3 + ".txt"
EXAMPLE = "an_example_answer_whose_name_is_eighty_characters_long_without_any_space_at_all_"[:80]
TAG = "an_unbroken_tag_" * 4
WIDTHS = (1280, 1920)


@pytest.fixture
def long_site(transactional_db, django_user_model, eager_celery, sandbox_dir):
    """A task with every author-controlled name at its longest and unbroken: submitted, commented on at a
    check, previewed with the oracle (a real rollout in bubblewrap), approved in a copy that is in a pack."""
    owner = make_user(django_user_model, "ada", "author")
    reviewer = make_user(django_user_model, "rita", "reviewer")
    admin = make_user(django_user_model, "root", "admin", password=PASSWORD)
    environment = authoring_services.environment_create(
        slug=ENVIRONMENT, name=TITLE[:200], author=owner, spec={"network": "none"}
    )
    attached = authoring_services.blob_store(data=b"42\n")
    rubric = {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 0.5,
        "checks": [
            {"id": CHECK, "kind": "string_match", "points": 1, "mode": "contains", "expected": "42"},
            {"id": CHECK[:-1] + "2", "kind": "file_exists", "points": 1, "path": FILE[:-4] + ".out"},
        ],
    }
    content = {
        "title": TITLE,
        "prompt": "What is six times seven?",
        "rubric": rubric,
        "tags": [TAG],
        "solution": {"script": f"echo 42 > {FILE[:-4]}.out", "answer": "42"},
        "files": [{"path": FILE, "sha256": attached.sha256, "role": "protected"}],
        "examples": [{"name": EXAMPLE, "answer": "42", "expect": "pass"}],
    }
    task = authoring_services.task_create(
        slug=SLUG, environment=environment, author=owner, content=content, message=TITLE[:500]
    )
    authoring_services.task_version_create(
        task=task, author=owner, base_version=1, message=TITLE[:500], content={**content, "title": TITLE + "Again"}
    )
    task.refresh_from_db()
    run = sandbox_services.preview_run_create(task_version=task.latest_version, user=owner, policy="oracle", n=2)
    rollout = run.rollouts.first()
    rollout.refresh_from_db()
    assert rollout.status == "done", rollout.error
    review_services.task_submit(task=task, user=admin, override_reason=TITLE[:300])
    review_services.comment_create(task=task, user=reviewer, body=TITLE, check_id=CHECK)

    approved = authoring_services.task_create(
        slug=SLUG[:-1] + "z", environment=environment, author=owner, content=content
    )
    review_services.task_submit(task=approved, user=admin, override_reason="in a pack")
    review_services.review_create(task_version=approved.latest_version, reviewer=reviewer, decision="approve")
    pack = pack_services.pack_create(slug=SLUG, user=admin, name=TITLE[:200])
    pack_services.pack_version_start(pack=pack, user=admin, selection=pack_services.Selection(tasks=(approved.slug,)))
    return {"run": run, "rollout": rollout, "grade": rollout.grade}


def pages(site) -> list[str]:
    run, rollout = site["run"], site["rollout"]
    return [
        "/",
        f"/?q={SLUG[:20]}",
        f"/tasks/{SLUG}/",
        f"/tasks/{SLUG}/edit/",
        f"/tasks/{SLUG}/versions/",
        f"/tasks/{SLUG}/versions/1/",
        f"/tasks/{SLUG}/versions/1/files/{FILE}",
        f"/tasks/{SLUG}/diff/?a=1&b=2",
        "/environments/",
        f"/environments/{ENVIRONMENT}/",
        f"/environments/{ENVIRONMENT}/edit/",
        f"/previews/start/{SLUG}/v2/",
        f"/previews/tasks/{SLUG}/",
        f"/previews/{run.pk}/?rollout={rollout.pk}",
        f"/previews/rollouts/{rollout.pk}/",
        f"/grading/grades/{site['grade'].pk}/",
        "/review/",
        f"/review/tasks/{SLUG}/",
        "/inbox/",
        f"/review/environments/{ENVIRONMENT}/",
        f"/review/environments/{ENVIRONMENT}/agreement/",
        "/packs/",
        f"/packs/{SLUG}/",
        f"/packs/{SLUG}/1.0.0/",
    ]


# With every <details> open, the elements, innermost first, whose right edge is past the window: what
# widens the page.
OVERFLOWING = """(width) => {
  for (const details of document.querySelectorAll("details")) details.open = true;
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (box.width > 0 && box.right > width + 1
        && !Array.from(el.children).some((child) => child.getBoundingClientRect().right > width + 1)) {
      out.push(`${el.tagName.toLowerCase()}.${el.getAttribute("class") || ""} ends at ${Math.round(box.right)}`);
    }
  }
  return {scrollWidth: document.documentElement.scrollWidth, elements: out.slice(0, 5)};
}"""


@pytest.fixture
def admin_page(browser, live_server, long_site):
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    context.add_init_script(CSP_LISTENER)
    page = context.new_page()
    page.problems = []
    page.on("pageerror", lambda exc: page.problems.append(f"page error: {exc}"))
    page.on(
        "console", lambda msg: page.problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None
    )
    sign_in(page, live_server.url, "root")
    yield page
    context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_is_wider_than_the_window_with_long_unbroken_names(admin_page, live_server, long_site, width):
    page = admin_page
    page.set_viewport_size({"width": width, "height": 900})
    wide = []
    for path in pages(long_site):
        response = page.goto(live_server.url + path)
        assert response.status == 200, f"{path} answered {response.status}"
        page.wait_for_load_state("networkidle")
        measured = page.evaluate(OVERFLOWING, width)
        if measured["scrollWidth"] > width or measured["elements"]:
            wide.append(f"{path}: {measured['scrollWidth']} px wide; {measured['elements']}")
        page.problems += [f"{path}: CSP {violation}" for violation in page.evaluate("window.__cspViolations")]
    assert not wide, "\n".join(wide)
    assert not page.problems, "\n".join(page.problems)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_title_wraps_clear_of_the_task_pages_buttons(admin_page, live_server, long_site, width):
    page = admin_page
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/tasks/{SLUG}/")
    title = page.locator("main h1").first
    assert TITLE + "Again" in title.inner_text()
    heading = title.bounding_box()
    assert page.evaluate("(el) => el.scrollWidth <= el.clientWidth", title.element_handle())  # nothing spills out
    for name in ("Edit", "History (2)", "Download JSON"):
        button = page.get_by_role("link", name=name).bounding_box()
        assert heading["x"] + heading["width"] <= button["x"], f"the title runs into {name}: {heading} {button}"
        assert button["x"] + button["width"] <= width
