"""Stored XSS, in a real Chromium: payloads seeded into every text field an author, a reviewer, a lab
member or an agent controls, then every page that renders them opened — with the Content-Security-
Policy on and with it off (so escaping alone must hold). No dialog, no inline handler or injected
script in the DOM, no `javascript:` link, no CSP violation, no console error; and each page shows
its payloads as literal text (so the page really rendered the field it is checked for).

The rollout is real: a model policy (the local OpenAI-protocol test server) runs a bash tool in a
bubblewrap sandbox (Celery eager), writes files with hostile names and contents, and submits a
hostile answer; the judge answers with a hostile explanation.
"""

from __future__ import annotations

import json
import re
import shlex

import pytest
from playwright.sync_api import expect

from authoring import services as authoring_services
from grading.models import ModelEndpoint
from grading.services import judge_label_record
from packs import services as pack_services
from review import services as review_services
from sandbox import services as sandbox_services
from tests.e2e.conftest import PASSWORD, TIMEOUT_MS, sign_in, wait_for_editor
from tests.e2e.test_pages_browser import CSP_LISTENER, artifacts_dir
from tests.support.openai_server import OpenAIServer, tool_call
from tests.support.users import make_user

pytestmark = [pytest.mark.browser, pytest.mark.bubblewrap, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def payload(label: str) -> str:
    """Markup that runs `alert` through a script tag, an error handler, an attribute break-out, a
    textarea/title break-out and a JS-string break-out; plus Django template syntax that must stay text."""
    return (
        f'<script>alert("xss-{label}")</script><img src=x onerror=alert("xss-{label}")>'
        f'"><svg onload=alert("xss-{label}")></textarea></title>\'-alert("xss-{label}")-\''
        "{{ 7|add:7 }}{% now 'Y' %}"
    )


FILE_NAME = '<img src=x onerror=alert("xss-fname")>.txt'
WORKSPACE_NAME = '"><svg onload=alert("xss-wsname")>.md'
TAG = '<img src=x onerror=alert("xss-tag")>'
CHECK_TAG = '<img src=x onerror=alert("xss-ctag")>'
# Example answers' names are at most 80 characters: each holds one payload.
EXAMPLE_NAME = '"><svg onload=alert("xss-exname")>'
EXAMPLE_NAME2 = '<img src=x onerror=alert("xss-exname2")>'
EXAMPLE_FILE = '<img src=x onerror=alert("xss-exfile")>.txt'
# (Chromium sends a double quote in an upload's name as %22: this one has none, so the page shows it as typed.)
IMPORT_NAME = "<img src=x onerror=alert('xss-importname')>.csv"
# Labels of the values that are not payload(label) (names and tags: no slashes, short), as typed.
LITERALS = {
    "fname": FILE_NAME,
    "wsname": WORKSPACE_NAME,
    "tag": TAG,
    "ctag": CHECK_TAG,
    "importname": IMPORT_NAME,
    "exname": EXAMPLE_NAME,
    "exname2": EXAMPLE_NAME2,
    "exfile": EXAMPLE_FILE,
}


def shown(label: str, text: str) -> bool:
    """Whether a page's text shows the value of `label` literally (as typed, or inside JSON): text, so escaped."""
    if label in LITERALS:
        return LITERALS[label] in text or json.dumps(LITERALS[label])[1:-1] in text
    return f'<script>alert("xss-{label}")</script>' in text or f'<script>alert(\\"xss-{label}\\")</script>' in text


PROMPT = "\n\n".join(
    [
        "Answer the question. " + payload("prompt"),
        "`" + payload("code") + "`",
        "[a link](javascript:alert('xss-mdlink'))",
        "<a href=\"javascript:alert('xss-alink')\">raw link</a> <iframe src=\"javascript:alert('xss-frame')\"></iframe>",
        "![img](javascript:alert('xss-mdimg'))",
    ]
)
RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {
            "id": "says_it",
            "kind": "string_match",
            "points": 2,
            "mode": "contains",
            "expected": payload("expected"),
            "title": payload("ctitle"),
            "tags": [CHECK_TAG],
        },
        {
            "id": "judged",
            "kind": "llm_judge",
            "points": 1,
            "criterion": payload("criterion"),
            "reference": payload("reference"),
        },
        {
            "id": "file_there",
            "kind": "file_content",
            "points": 1,
            "path": WORKSPACE_NAME,
            "contains": payload("fcontains"),
        },
        {"id": "has_tag", "kind": "regex", "points": 1, "pattern": "<script>", "title": payload("rtitle")},
    ],
    "probes": [{"answer": payload("probe"), "max_reward": 1.0}],
}
EXAMPLES = [
    {
        "name": EXAMPLE_NAME,
        "answer": payload("exanswer"),
        "expect": "pass",
        "files": [{"path": EXAMPLE_FILE, "content": payload("excontent")}],
    },
    {"name": EXAMPLE_NAME2, "answer": payload("exanswer2"), "expect": "fail"},
]
AGENT_COMMAND = (
    f"printf '%s\\n' {shlex.quote(payload('tooloutput'))}; "
    f"printf '%s' {shlex.quote(payload('wscontent'))} > {shlex.quote(WORKSPACE_NAME)}"
)
EDITOR = "editor"  # a page label: the editor's fields hold the payloads as values


def agent_and_judge(body):
    if body["model"] == "judge-model":
        return '{"met": true, "explanation": %s}' % json.dumps(payload("judge"))
    tool_turns = sum(1 for m in body["messages"] if m["role"] == "tool")
    if tool_turns == 0:
        return {"content": payload("agenttext"), "tool_calls": [tool_call("bash", {"command": AGENT_COMMAND})]}
    return {"content": None, "tool_calls": [tool_call("submit", {"answer": payload("answer")})]}


@pytest.fixture
def hostile_task(transactional_db, django_user_model):
    """The hostile environment and an author's task of two versions, every text field a payload, and the admin
    who reads the pages: what the editor, dry-run and import tests need (the whole site is built only for the
    page walk, hostile_site)."""
    owner = make_user(django_user_model, "ada", "author")
    admin = make_user(django_user_model, "root", "admin", password=PASSWORD)
    environment = authoring_services.environment_create(
        slug="hostile-env",
        name=payload("envname")[:200],
        description=payload("envdesc"),
        author=owner,
        spec={
            "network": "none",
            "custom_tools": [
                {
                    "name": "lookup",
                    "description": payload("tooldesc"),
                    "command": "cat",
                    "parameters": {
                        "type": "object",
                        "properties": {"q": {"type": "string", "description": payload("tooldesc2")}},
                    },
                }
            ],
        },
    )
    attached = authoring_services.blob_store(data=payload("filecontent").encode())
    content = {
        "title": payload("title"),
        "prompt": PROMPT,
        "rubric": RUBRIC,
        "tags": [TAG],
        "solution": {"script": AGENT_COMMAND, "answer": payload("solution")},
        "files": [{"path": FILE_NAME, "sha256": attached.sha256}],
        "metadata": {"note": payload("metadata")},
        "examples": EXAMPLES,
    }
    task = authoring_services.task_create(
        slug="hostile", environment=environment, author=owner, content=content, message=payload("message")[:500]
    )
    second = {
        **content,
        "title": payload("title2"),
        "rubric": {
            **RUBRIC,
            "checks": [{**RUBRIC["checks"][0], "expected": payload("expected2")}, *RUBRIC["checks"][1:]],
        },
    }
    authoring_services.task_version_create(
        task=task, author=owner, content=second, base_version=1, message=payload("message2")[:500]
    )
    return {"task": task, "environment": environment, "content": content, "owner": owner, "admin": admin}


@pytest.fixture
def hostile_site(hostile_task, django_user_model, settings, eager_celery, sandbox_dir):
    """`hostile_task` in review, a reviewer's comments, a judged model rollout, an approved task in a built pack:
    every text field carries a payload. The pages are read by an admin (who reviews, and has an author's reply in
    the inbox)."""
    task, environment, content = hostile_task["task"], hostile_task["environment"], hostile_task["content"]
    owner, admin = hostile_task["owner"], hostile_task["admin"]
    reviewer = make_user(django_user_model, "rita", "reviewer")
    with OpenAIServer() as server:
        server.handler = agent_and_judge
        ModelEndpoint.objects.create(
            name="agent",
            role="policy",
            base_url=server.base_url,
            model="policy-model",
            api_key_env="",
            default_params={"temperature": 0},
        )
        ModelEndpoint.objects.create(
            name="judge", role="judge", base_url=server.base_url, model="judge-model", api_key_env=""
        )
        task.refresh_from_db()
        preview_run = sandbox_services.preview_run_create(
            task_version=task.latest_version, user=owner, policy="model", n=2
        )
    # two: the reviewer labels the first's judged check, the second's waits in the labelling queue
    rollout, unlabelled = preview_run.rollouts.order_by("index")
    assert unlabelled.status == "done", unlabelled.error
    assert rollout.status == "done", rollout.error
    assert rollout.answer == payload("answer")
    assert any(f["path"] == WORKSPACE_NAME for f in rollout.workspace_files), rollout.workspace_files

    judge_label_record(
        check_result=rollout.grade.check_results.get(check_id="judged"),
        reviewer=reviewer,
        verdict="not_met",
        comment=payload("label"),
    )
    review_services.task_submit(task=task, user=admin, override_reason=payload("override"))
    review_services.comment_create(task=task, user=reviewer, body=payload("checkcomment"), check_id="says_it")
    review_services.comment_create(task=task, user=reviewer, body=payload("taskcomment"))
    review_services.review_create(
        task_version=task.latest_version,
        reviewer=reviewer,
        decision="comment",
        comment=payload("review"),
        check_comments={"judged": payload("reviewcheck")},
    )
    question = review_services.comment_create(task=task, user=admin, body=payload("question"))
    review_services.comment_create(task=task, user=owner, body=payload("reply"), parent=question)

    approved = authoring_services.task_create(
        slug="hostile-approved", environment=environment, author=owner, content={**content, "title": payload("aptitle")}
    )
    review_services.task_submit(task=approved, user=admin, override_reason=payload("override2"))
    review_services.review_create(
        task_version=approved.latest_version, reviewer=reviewer, decision="approve", comment=payload("approve")
    )
    pack = pack_services.pack_create(
        slug="hostile-pack", user=admin, name=payload("packname")[:200], description=payload("packdesc")
    )
    pack_version = pack_services.pack_version_start(
        pack=pack, user=admin, selection=pack_services.Selection(tasks=("hostile-approved",))
    )
    pack_version.refresh_from_db()
    assert pack_version.status == "ready", pack_version.error
    grade_id = rollout.grade.pk
    return {"task": task, "preview_run": preview_run, "rollout": rollout, "grade_id": grade_id, "owner": owner}


def hostile_pages(site) -> list[tuple[str, list[str]]]:
    """(path, labels it must show as text). Every page that renders a field an author, reviewer,
    lab member or agent controls."""
    preview_run, rollout = site["preview_run"], site["rollout"]
    rollout_labels = ["agenttext", "tooloutput", "answer", "wscontent", "wsname", "judge", "label"]
    example_labels = ["exname", "exname2", "exanswer"]
    return [
        ("/", ["title2"]),
        ("/?q=xss", []),
        (
            "/tasks/hostile/",
            ["title2", "code", "ctitle", "rtitle", "ctag", "tag", "fname", *example_labels],
        ),  # the rubric table, in Python
        ("/tasks/hostile/edit/", [EDITOR]),
        ("/tasks/hostile/versions/", ["message", "message2"]),
        ("/tasks/hostile/versions/1/", ["title", "code", "fname"]),
        (f"/tasks/hostile/versions/1/files/{FILE_NAME}", ["filecontent"]),
        ("/tasks/hostile/diff/?a=1&b=2", ["title", "title2", "expected", "expected2"]),
        ("/environments/", ["envname"]),
        ("/environments/hostile-env/", ["envname", "envdesc", "tooldesc", "tooldesc2"]),
        ("/environments/hostile-env/edit/", ["envname", "envdesc", "tooldesc", "tooldesc2"]),
        ("/previews/start/hostile/v2/", []),
        ("/previews/tasks/hostile/", []),
        (f"/previews/{preview_run.pk}/?rollout={rollout.pk}", rollout_labels),
        (f"/previews/rollouts/{rollout.pk}/", rollout_labels),
        (f"/grading/grades/{site['grade_id']}/", ["judge", "label"]),
        ("/grading/tasks/hostile/versions/2/examples/", example_labels),
        ("/grading/kinds/", []),
        ("/review/", ["title2"]),
        (
            "/review/tasks/hostile/",
            ["title2", "code", "checkcomment", "taskcomment", "review", "reviewcheck", "criterion", "override"],
        ),
        ("/review/tasks/hostile-approved/", ["aptitle", "override2", "approve"]),
        ("/review/labels/", ["judge"]),
        ("/review/environments/hostile-env/", []),
        ("/review/environments/hostile-env/agreement/", []),
        ("/inbox/", ["reply"]),
        ("/packs/", ["packname"]),
        ("/packs/hostile-pack/", ["packname", "packdesc"]),
        ("/packs/hostile-pack/1.0.0/", ["packname"]),
        ("/packs/hostile-pack/1.0.0/verification/", []),
        ("/packs/import/", []),
        ("/account/", []),
        ("/api/tasks/", ["title2"]),
        ("/api/tasks/hostile/", ["title2"]),
        ("/api/tasks/hostile/versions/2/", ["title2", "exname", "exfile", "excontent"]),
        ("/api/tasks/hostile/versions/2/examples/", ["exname", "exname2"]),
        ("/api/tasks/hostile/comments/", ["question", "reply", "checkcomment"]),
        (f"/api/grades/{site['grade_id']}/", ["judge"]),
        ("/api/environments/", ["envname"]),
        ("/api/packs/", ["packname"]),
    ]


# Run after load, outside the page's CSP: markup that would run script if it were not text.
DOM_FINDINGS = r"""() => {
  const found = [];
  for (const el of document.querySelectorAll("*")) {
    for (const attr of el.attributes) {
      const name = attr.name.toLowerCase();
      if (name.startsWith("on")) found.push(`${el.tagName} has ${name}=${attr.value.slice(0, 60)}`);
      if (["href", "src", "action", "formaction", "xlink:href", "data", "srcdoc"].includes(name)
          && /^\s*(javascript|vbscript|data:text\/html)/i.test(attr.value)) {
        found.push(`${el.tagName} ${name}=${attr.value.slice(0, 60)}`);
      }
    }
    if (el.tagName === "SCRIPT" && !el.src && !/json/.test(el.type || "") && /xss-/.test(el.textContent)) {
      found.push("inline script " + el.textContent.slice(0, 60));
    }
  }
  return found;
}"""
VISIBLE_TEXT = """() => [document.body.textContent,
  ...Array.from(document.querySelectorAll("input, textarea"), (field) => field.value)].join("\\n")"""


@pytest.fixture(params=["csp-on", "csp-off"])
def hostile_page(request, browser, live_server, hostile_task, settings):
    if request.param == "csp-off":
        settings.CONTENT_SECURITY_POLICY = ""  # escaping alone must hold
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    context.add_init_script(CSP_LISTENER)
    page = context.new_page()
    page.findings = []
    page.on("dialog", lambda dialog: (page.findings.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    page.on("pageerror", lambda exc: page.findings.append(f"page error: {exc}"))
    page.on(
        "console", lambda msg: page.findings.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None
    )
    sign_in(page, live_server.url, "root")
    page.csp = request.param
    yield page
    context.close()


def test_no_stored_payload_runs_on_any_page(hostile_page, live_server, hostile_site):
    page = hostile_page
    folder = artifacts_dir()
    problems: list[str] = []
    for index, (path, labels) in enumerate(hostile_pages(hostile_site)):
        page.findings.clear()
        response = page.goto(live_server.url + path)
        assert response.status == 200, f"{path} answered {response.status}"
        page.wait_for_load_state("networkidle")
        if path.endswith("/edit/") and "tasks" in path:
            wait_for_editor(page)
        problems += [f"{path}: {finding}" for finding in page.evaluate(DOM_FINDINGS)]
        problems += [f"{path}: CSP {violation}" for violation in page.evaluate("window.__cspViolations")]
        text = page.evaluate(VISIBLE_TEXT)
        for label in labels:
            if label == EDITOR:
                for field in (
                    "title2",
                    "expected2",
                    "ctitle",
                    "criterion",
                    "solution",
                    "metadata",
                    "tag",
                    "ctag",
                    "fname",
                ):
                    if not shown(field, text):
                        problems.append(f"{path}: the editor does not show {field!r} as text")
            elif not shown(label, text):
                problems.append(f"{path}: {label!r} is not shown as text")
        if any(label not in LITERALS and label != EDITOR for label in labels) and "{{ 7|add:7 }}{% now" not in text:
            problems.append(f"{path}: template syntax in a field was not shown as typed")
        problems += [f"{path}: {finding}" for finding in page.findings]
        name = re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")[:60] or "home"
        page.screenshot(path=str(folder / f"xss-{page.csp}-{index:02d}-{name}.png"), full_page=True)
    assert not problems, "\n".join(problems)


def test_a_hostile_dry_run_answer_is_shown_as_text(hostile_page, live_server):
    """The dry-run panel swaps a server fragment in with innerHTML: the answer and the check
    explanations it echoes must arrive escaped."""
    page = hostile_page
    page.goto(f"{live_server.url}/tasks/hostile/edit/")
    wait_for_editor(page)
    page.fill("[data-dry-run-form] textarea[name=answer]", payload("dryrun"))
    page.click("[data-dry-run-submit]")
    result = page.locator("[data-dry-run-result] .dry-run-output")
    result.wait_for()
    page.wait_for_load_state("networkidle")
    problems = [*page.evaluate(DOM_FINDINGS), *page.evaluate("window.__cspViolations"), *page.findings]
    assert not problems, problems
    assert "says_it" in result.inner_text()
    page.screenshot(path=str(artifacts_dir() / f"xss-{page.csp}-dry-run.png"), full_page=True)


def test_hostile_values_typed_in_the_editor_come_back_as_text(hostile_page, live_server):
    """What the editor echoes as the author types: the live Markdown preview, the schema
    validator's errors (Ajv, in the browser) and the engine's (a server round trip)."""
    page = hostile_page
    page.goto(f"{live_server.url}/tasks/hostile/edit/")
    wait_for_editor(page)
    page.fill("#id_prompt", PROMPT.replace("prompt", "typedprompt"))
    expect(page.locator("#prompt-preview")).to_contain_text("Answer the question.")
    first = page.locator('#rubric-structured .re-card[data-pointer="/checks/0"]')
    first.locator("[data-key=id] input").fill(payload("typedid")[:60])
    pattern = page.locator('#rubric-structured .re-card[data-pointer="/checks/3"] [data-key=pattern] input')
    pattern.fill("(" + payload("typedpattern"))
    errors = page.locator("#rubric-errors")
    expect(errors).to_contain_text("/checks/0/id")
    expect(errors).to_contain_text("/checks/3/pattern")
    page.wait_for_load_state("networkidle")
    problems = [*page.evaluate(DOM_FINDINGS), *page.evaluate("window.__cspViolations"), *page.findings]
    assert not problems, problems
    assert shown("typedprompt", page.locator("#prompt-preview").text_content()) is False  # raw HTML is dropped
    assert shown("code", page.locator("#prompt-preview").text_content())  # code spans keep it as text
    page.screenshot(path=str(artifacts_dir() / f"xss-{page.csp}-editor-typed.png"), full_page=True)


def test_a_hostile_import_report_is_shown_as_text(hostile_page, live_server):
    """The import page echoes rejected rows (their values in the messages) and imported titles."""
    page = hostile_page
    rows = [
        "prompt,answer,rubric,criteria,title",
        ",".join(
            json.dumps(value)
            for value in (
                payload("importprompt"),
                payload("importanswer"),
                '{"checks": "' + payload("importrubric").replace('"', "'") + '"}',
                "",
                payload("ititle"),
            )
        ),
        ",".join(
            json.dumps(value)
            for value in (payload("importprompt2"), "42", "", payload("importcriterion"), payload("ititle2"))
        ),
    ]
    page.goto(f"{live_server.url}/packs/import/")
    page.set_input_files(
        "#import-form input[name=file]",
        files=[{"name": IMPORT_NAME, "mimeType": "text/csv", "buffer": "\n".join(rows).encode()}],
    )
    page.select_option("#import-form select[name=environment]", "hostile-env")  # the environments that exist
    with page.expect_navigation():
        page.click("#import-form button[type=submit]")
    expect(page.locator("main h2")).to_contain_text("1 ok, 1 rejected")
    page.wait_for_load_state("networkidle")
    problems = [*page.evaluate(DOM_FINDINGS), *page.evaluate("window.__cspViolations"), *page.findings]
    assert not problems, problems
    assert shown("importname", page.evaluate(VISIBLE_TEXT))  # the file's name, as the user named it
    page.screenshot(path=str(artifacts_dir() / f"xss-{page.csp}-import.png"), full_page=True)
