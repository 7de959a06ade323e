"""Stored XSS on the server side, for breadth (issue 27): every field added since the first XSS test
(tests/e2e/test_stored_xss_abuse.py, which runs the pages in Chromium with the CSP on and off) holds a payload, and
every page the URL conf answers to a GET is rendered, as an admin (who reads drafts, reviews, builds packs and
imports): example-answer names, answers and files; pack names and descriptions; review comments, per-check review
comments, comment threads and their replies; judge labels' comments; an import's file name and rows; tags.

The pages are walked from the URL conf (django.urls' resolver), so a new page is rendered here without a line
added; the API's answers are read as a browser opens them (the browsable API's HTML). Each answer is parsed: no
element may carry an inline event handler, a `javascript:` link, or a script that holds a payload; no payload's
markup may appear unescaped; and a page named in SHOWN must show its fields' payloads as text (so it really
rendered the field it is checked for), template syntax included, as typed.
"""

from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.gymwright.test_permission_matrix import is_admin_route, routes
from tests.support.users import make_user

pytestmark = pytest.mark.django_db


def payload(label: str) -> str:
    """As tests/e2e/test_stored_xss_abuse.py's: a script tag, an error handler, an attribute break-out, a
    textarea/title break-out, a JS-string break-out, and Django template syntax that must stay text."""
    return (
        f'<script>alert("xss-{label}")</script><img src=x onerror=alert("xss-{label}")>'
        f'"><svg onload=alert("xss-{label}")></textarea></title>\'-alert("xss-{label}")-\''
        "{{ 7|add:7 }}{% now 'Y' %}"
    )


TAG = '<img src=x onerror=alert("xss-tag")>'
EXAMPLE_NAME = '"><svg onload=alert("xss-exname")>'  # a name: at most 80 characters
EXAMPLE_NAME2 = '<img src=x onerror=alert("xss-exname2")>'
EXAMPLE_FILE = '<img src=x onerror=alert("xss-exfile")>.txt'
IMPORT_NAME = "<img src=x onerror=alert('xss-importname')>.csv"
LITERALS = {
    "tag": TAG,
    "exname": EXAMPLE_NAME,
    "exname2": EXAMPLE_NAME2,
    "exfile": EXAMPLE_FILE,
    "importname": IMPORT_NAME,
}
TASK, APPROVED, ENV, PACK = "xss-task", "xss-approved", "xss-env", "xss-pack"

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [
        {"id": "says_it", "kind": "string_match", "points": 2, "mode": "contains", "expected": "42"},
        {"id": "judged", "kind": "llm_judge", "points": 1, "criterion": "Explains how."},
    ],
}
GRADE = {
    "schema": "gymwright.grade/v1",
    "reward": 1.0,
    "earned": 3,
    "max": 3,
    "passed": True,
    "gated": False,
    "complete": True,
    "checks": [
        {
            "id": "says_it",
            "kind": "string_match",
            "status": "scored",
            "score": 1.0,
            "points": 2,
            "awarded": 2,
            "explanation": "answer contains '42'",
            "duration_ms": 0,
        },
        {
            "id": "judged",
            "kind": "llm_judge",
            "status": "scored",
            "score": 1.0,
            "points": 1,
            "awarded": 1,
            "explanation": payload("judge"),
            "votes": [True],
            "duration_ms": 5,
        },
    ],
}
EXAMPLES = [
    {
        "name": EXAMPLE_NAME,
        "answer": payload("exanswer") + " 42",
        "expect": "pass",
        "files": [{"path": EXAMPLE_FILE, "content": payload("excontent")}],
    },
    {"name": EXAMPLE_NAME2, "answer": payload("exanswer2"), "expect": "fail"},
]


def content(title: str) -> dict:
    return {
        "title": title,
        "prompt": "What is six times seven?",
        "rubric": RUBRIC,
        "solution": {"script": None, "answer": "42"},
        "tags": [TAG, "maths"],
        "examples": EXAMPLES,
    }


def build_world(django_user_model) -> dict:
    from authoring import services as authoring_services
    from grading.services import grade_from_document, grade_record, judge_label_record
    from packs import services as pack_services
    from review import services as review_services
    from sandbox.models import PreviewRun, Rollout
    from tests.packs.conftest import build_and_verify

    owner = make_user(django_user_model, "ada", "author")
    reviewer = make_user(django_user_model, "rita", "reviewer")
    admin = make_user(django_user_model, "root", "admin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    environment = authoring_services.environment_create(slug=ENV, name="Shell", author=owner, spec={"network": "none"})
    task = authoring_services.task_create(slug=TASK, environment=environment, author=owner, content=content("Tq"))
    version = task.latest_version
    review_services.task_submit(task=task, user=admin, override_reason=payload("override"))
    question = review_services.comment_create(task=task, user=admin, body=payload("question"), check_id="says_it")
    review_services.comment_create(task=task, user=owner, body=payload("reply"), parent=question)
    review_services.review_create(
        task_version=version,
        reviewer=reviewer,
        decision="comment",
        comment=payload("review"),
        check_comments={"judged": payload("reviewcheck")},
    )

    run = PreviewRun.objects.create(
        task_version=version,
        created_by=owner,
        policy="model",  # a model's rollout: the blind scoring page shows it too
        policy_kind="model",
        n=1,
        backend="bubblewrap",
        status=PreviewRun.Status.DONE,
    )
    rollout = Rollout.objects.create(
        preview_run=run, index=0, status=Rollout.Status.DONE, reward=1.0, passed=True, answer=payload("answer")
    )
    grade = grade_record(
        grade=grade_from_document(GRADE), task_version=version, source="rollout", user=owner, rollout_id=rollout.pk
    )
    Rollout.objects.filter(pk=rollout.pk).update(grade=grade)
    check_result = grade.check_results.get(check_id="judged")
    judge_label_record(check_result=check_result, reviewer=reviewer, verdict="not_met", comment=payload("label"))

    approved = authoring_services.task_create(
        slug=APPROVED, environment=environment, author=owner, content=content("Ta")
    )
    review_services.task_submit(task=approved, user=admin, override_reason="approved without previews")
    review_services.review_create(task_version=approved.latest_version, reviewer=reviewer, decision="approve")
    pack = pack_services.pack_create(
        slug=PACK, user=admin, name=payload("packname")[:200], description=payload("packdesc")
    )
    pack_version = pack_services.pack_version_start(
        pack=pack, user=admin, selection=pack_services.Selection(tasks=(APPROVED,)), enqueue=False
    )
    pack_version = build_and_verify(pack_version.pk)
    assert pack_version.status == "ready", pack_version.failure_reason
    # A dataset's health report: its source, folders, reasons, gate messages and findings come from the imported
    # files (a dataset someone else wrote).
    from packs.models import DatasetCheck

    health = DatasetCheck.objects.create(
        source=payload("dssource")[:300],
        status=DatasetCheck.Status.DONE,
        created_by=admin,
        checked=1,
        document={
            "schema": "gymwright.dataset-health/v1",
            "source": payload("dssource"),
            "counts": {"healthy": 0, "broken": 1, "not_runnable": 0},
            "tasks": [
                {
                    "task": TASK,
                    "where": payload("dswhere"),
                    "verdict": "broken",
                    "reason": payload("dsreason"),
                    "gates": [
                        {"gate": "oracle", "title": "Oracle passes", "status": "fail", "message": payload("dsgate")}
                    ],
                    "findings": [{"check": "clock", "message": payload("dsfinding")}],
                    "rollouts": {},
                    "seconds": 1,
                }
            ],
        },
    )
    return {
        "admin": admin,
        "values": {
            "number": version.number,
            "path": "none.txt",
            "preview_run_id": run.pk,
            "rollout_id": rollout.pk,
            "grade_id": grade.pk,
            "check_result_id": check_result.pk,
            "comment_id": question.pk,
            "version": pack_version.version,
            "name": "rubric",
            "dry_run_id": 0,
            "check_id": health.pk,
        },
    }


# The pages that must show each field's payload as text (more may show it: none may run it).
EXAMPLE_LABELS = ["exname", "exname2", "exanswer"]
SHOWN = {
    "authoring:task_list": ["tag"],
    "authoring:task_detail": ["tag", *EXAMPLE_LABELS],
    "authoring:task_edit": ["tag", "exname", "exanswer", "excontent", "exfile", "reply", "question"],
    "authoring:task_version_detail": ["tag", "exname"],
    "grading:example_answers": EXAMPLE_LABELS,
    "grading:grade_detail": ["judge", "label"],
    "review:queue": ["tag"],
    "review:review_page": ["question", "reply", "review", "reviewcheck", "override", "exname"],
    "review:label_queue": [],
    "review:inbox": ["reply"],
    "sandbox:preview_detail": ["answer", "judge"],
    "sandbox:rollout_detail": ["answer", "judge"],
    "review:blind_score": ["answer"],
    "packs:pack_list": ["packname"],
    "packs:pack_detail": ["packname", "packdesc", "tag"],
    "packs:pack_version": ["packname"],
    "packs:dataset_check": ["dssource", "dswhere", "dsreason", "dsgate", "dsfinding"],
    "api-task-detail": ["tag"],
    "api-task-version": ["tag", "exname", "exfile", "excontent"],
    "api-task-comments": ["question", "reply"],
    "api-task-version-reviews": ["review", "reviewcheck"],
    "api-task-version-examples": ["exname"],
    "grade-detail": ["judge"],
    "api-pack-list": ["packname"],
}


def fill(name: str, template: str, values: dict) -> str:
    slug = ENV if "environments/" in template else PACK if "packs/" in template else TASK

    def one(match):
        return slug if match.group(2) == "slug" else str(values[match.group(2)])

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", one, template) + QUERIES.get(name, "").format(**values)


QUERIES = {
    "api-agreement": f"?task={TASK}",
    "api-task-diff": "?a=1&b=1",
    "api-task-version-rubric": "?as=healthbench",  # the hostile criteria, exported
    "authoring:task_diff": "?a=1&b=1",
    "sandbox:preview_detail": "?rollout={rollout_id}",
}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "data", "srcdoc", "poster", "background"}
RAW_MARKUP = ("<script>alert(", "<img src=x onerror", "<svg onload")  # a payload's markup, not escaped


class Scan(HTMLParser):
    """What a browser would run in a page (its findings), and what it shows as text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.findings: list[str] = []
        self.text: list[str] = []
        self.script: dict | None = None

    def handle_starttag(self, tag, attrs):
        attributes = {name: value or "" for name, value in attrs}
        for name, value in attributes.items():
            if name.startswith("on"):
                self.findings.append(f"<{tag}> has {name}={value[:60]!r}")
            if name in URL_ATTRIBUTES and re.match(r"\s*(javascript|vbscript|data:text/html)", value, re.I):
                self.findings.append(f"<{tag} {name}={value[:60]!r}>")
        if tag == "script":
            self.script = attributes
        if tag == "input" and "value" in attributes:
            self.text.append(attributes["value"])

    def handle_endtag(self, tag):
        if tag == "script":
            self.script = None

    def handle_data(self, data):
        if self.script is not None:
            if "json" not in self.script.get("type", "") and "xss-" in data:
                self.findings.append(f"a script holds a payload: {data[:80]!r}")
            return
        self.text.append(data)


def shown(label: str, text: str) -> bool:
    if label in LITERALS:
        return LITERALS[label] in text or json.dumps(LITERALS[label])[1:-1] in text
    return f'<script>alert("xss-{label}")</script>' in text or f'<script>alert(\\"xss-{label}\\")</script>' in text


def problems_of(path: str, html: str, labels: list[str]) -> list[str]:
    scan = Scan()
    scan.feed(html)
    scan.close()
    problems = [f"{path}: {finding}" for finding in scan.findings]
    problems += [f"{path}: unescaped {raw!r}" for raw in RAW_MARKUP if raw in html]
    text = "\n".join(scan.text)
    problems += [f"{path}: does not show {label!r} as text" for label in labels if not shown(label, text)]
    if any(label not in LITERALS for label in labels) and "{{ 7|add:7 }}" not in text:
        problems.append(f"{path}: template syntax in a field was not shown as typed")
    return problems


# Routes that take a form's POST and answer a GET with a redirect to the page the form is on (a refused form leaves
# the browser at their address).
OPENS_ITS_PANEL = {"grading:environment_judge", "review:environment_calibration"}


@pytest.fixture
def site(db, django_user_model, settings):
    settings.ALLOWED_HOSTS = ["*"]
    world = build_world(django_user_model)
    client = Client(raise_request_exception=False)
    client.force_login(world["admin"])
    world["client"] = client
    return world


def test_no_page_runs_a_stored_payload(site):
    client, problems, seen = site["client"], [], set()
    for name, template, _pattern in routes():
        if is_admin_route(template) or name in ("logout", "favicon.ico", "healthz"):
            continue  # Django's admin site (its own escaping), and the routes that render nothing stored
        path = fill(name, template, site["values"])
        response = client.get(path, HTTP_ACCEPT="text/html,*/*;q=0.8")  # the API as a browser opens it
        if response.status_code == 405:
            continue  # a write only (test_csrf_abuse.py)
        if response.status_code == 302 and name in OPENS_ITS_PANEL:
            continue  # a form's own address: a GET (a reload) opens its panel on the page crawled as that page's
        body = b"".join(response.streaming_content) if response.streaming else response.content
        if response.status_code != 200 and name not in ("authoring:task_version_file", "grading:dry_run_detail"):
            problems.append(f"{path} ({name}): answered {response.status_code}")
            continue
        seen.add(name)
        if "html" in response.get("Content-Type", ""):
            problems += problems_of(f"{path} ({name})", body.decode(errors="replace"), SHOWN.get(name, []))
    problems += [f"{name}: not rendered" for name in sorted(set(SHOWN) - seen)]
    assert not problems, "\n".join(problems)


def test_an_import_report_shows_hostile_rows_and_file_name_as_text(site):
    table = io.StringIO()
    csv.writer(table).writerows(
        [
            ["prompt", "answer", "rubric", "criteria", "title"],
            [payload("importprompt"), payload("importanswer"), '{"checks": "x"}', "", payload("ititle")],
            [payload("importprompt2"), "42", "", payload("importcriterion"), payload("ititle2")],
            ["", "", "", "", payload("importempty")],
        ]
    )
    upload = SimpleUploadedFile(IMPORT_NAME, table.getvalue().encode(), content_type="text/csv")
    client = site["client"]
    dry_run = client.post("/packs/import/", {"file": upload, "environment": ENV, "dry_run": "on"})
    assert dry_run.status_code == 200
    html = dry_run.content.decode()
    assert "Dry run: nothing was written — 1 ok, 2 rejected" in html, html[-3000:]
    problems = problems_of("/packs/import/ (dry run)", html, ["importname"])  # "Import <its name> for real"
    token = re.search(r'name="pending" value="([^"]+)"', html).group(1)
    imported = client.post("/packs/import/", {"pending": token})
    assert imported.status_code == 200
    html = imported.content.decode()
    assert "Imported — 1 ok, 2 rejected" in html, html[-3000:]
    problems += problems_of("/packs/import/", html, [])
    task_page = re.search(r'<a href="(/tasks/[^"]+/)versions/1/">', html).group(1)
    for path, labels in (("/", ["ititle2"]), (task_page, ["ititle2"])):
        problems += problems_of(path, client.get(path).content.decode(), labels)
    assert not problems, "\n".join(problems)
