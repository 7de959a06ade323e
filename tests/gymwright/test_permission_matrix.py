"""Every route × every method it takes × every role → one expected answer (issue 12).

MATRIX is the decision about who may do what. The tests walk the URL conf: a route without a row, or a method it
answers (not 405) without one, fails (`test_every_route_and_method_has_a_row`), so a new endpoint, or a new method on
an old one, cannot ship without a decision. For each row the matrix test sends the method — reads with GET (and
HEAD), writes with a body valid enough that an allowed caller reaches the view's own logic — as each role: anonymous,
a signed-in member with no role, the task's owner (an author), another author, a reviewer, an admin and a lab member;
on /api/ each signed-in role again with its API token. The world it asks about (permission_matrix_world.py) holds
every object a route names: a task in review whose v1 was approved, a draft that was never approved, previews,
rollouts, grades with judged checks, a comment thread, a dry run, a pack with a ready (downloadable) and a building
version.

Each request runs in a savepoint that is rolled back, so every row meets the same world, and jobs enqueued "on commit"
are never sent (no worker, no sandbox). A cell is one status, with:

    login   302 to a login page (the site's or the admin's); any other 302 must not be one
    w       an allowed write: the database changed
    -       the answer names none of the world's environment and tasks (an empty list)
    +       the answer names the task in review (a list or a queue that holds it)
    =       the database did not change (a refused write that answers a redirect)

A write refused (401, 403, 404, 405, login) or answered 400 or 409 must leave the database as it was; a 5xx is never
expected. Two rules hold for every answer besides: a lab member reads no version a reviewer did not approve (the
UNAPPROVED words, the draft's slug), and a member with no role is shown none of the world's names.

Columns: the route's name; its methods (comma-separated, or * for any: each is sent, and gets the row's answers); the
target, which objects the URL names (`-` the task in review at its v2, which no one approved; `v1` its approved
version; `draft` the task never approved; `building` the pack version still building; `dry-run` the grade of the
owner's dry run on v1); then one cell per role. A
comment says why a row answers as it does where the columns do not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from http.cookies import SimpleCookie

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.signals import request_finished
from django.db import close_old_connections, connection, transaction
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver

from tests.gymwright.permission_matrix_world import (
    ADMIN,
    ANON,
    DRAFT,
    ENV,
    LAB,
    NAMES,
    NOROLE,
    OWNER,
    PACK,
    PLAIN_RUBRIC,
    REVIEW,
    ROLES,
    RUBRIC,
    UNAPPROVED,
    build_world,
    password_of,
)

pytestmark = pytest.mark.django_db

MATRIX = """
# route                                methods       on        anon   norole owner  other  review admin  lab
#   PUT: Django's form view takes it as a POST (an empty form)
login                                  GET,HEAD,PUT  -         200    200    200    200    200    200    200
#   signs in as the owner (its last login)
login                                  POST          -         302w   302w   302w   302w   302w   302w   302w
#   Django's own answer: the methods
login                                  OPTIONS       -         200    200    200    200    200    200    200
#   signed out, back to the login page
logout                                 POST          -         login  login  login  login  login  login  login
logout                                 OPTIONS       -         login  200    200    200    200    200    200
#   "ok"; GET and HEAD only (any other method: 405)
healthz                                GET,HEAD      -         200    200    200    200    200    200    200
#   to the static icon; GET and HEAD only
favicon.ico                            GET,HEAD      -         302    302    302    302    302    302    302
#   GYMWRIGHT_API_DOCS_PUBLIC is off
api-schema                             GET,HEAD      -         401    200    200    200    200    200    200
api-docs                               GET,HEAD      -         401    200    200    200    200    200    200
#   the published formats: public
format-schema                          GET           -         200    200    200    200    200    200    200

# ---------------------------------------------------------- authoring: environments and tasks
#   a lab member: approved tasks only
authoring:task_list                    GET,HEAD      -         login  200-   200+   200+   200+   200+   200+
authoring:task_create                  GET           -         login  403    200    200    403    200    403
authoring:task_create                  POST          -         login  403    302w   302w   403    302w   403
#   a lab member reads it at v1
authoring:task_detail                  GET,HEAD      -         login  404    200    200    200    200    200
#   never approved: unseen by a lab member
authoring:task_detail                  GET,HEAD      draft     login  404    200    200    200    200    404
#   only its owner (or an admin) edits it
authoring:task_edit                    GET           -         login  404    200    403    403    200    403
authoring:task_edit                    GET           draft     login  404    200    403    403    200    404
authoring:task_edit                    POST          draft     login  404    302w   403    403    302w   404
authoring:task_versions                GET,HEAD      -         login  404    200    200    200    200    200
authoring:task_versions                GET,HEAD      draft     login  404    200    200    200    200    404
authoring:task_version_detail          GET,HEAD      -         login  404    200    200    200    200    404
authoring:task_version_detail          GET,HEAD      v1        login  404    200    200    200    200    200
authoring:task_version_file            GET           -         login  404    200    200    200    200    404
authoring:task_version_file            GET           v1        login  404    200    200    200    200    200
#   a lab member: v1 against itself
authoring:task_diff                    GET,HEAD      -         login  404    200    200    200    200    200
authoring:task_diff                    GET,HEAD      draft     login  404    200    200    200    200    404
#   renders what was posted: no data, no write
authoring:markdown_preview             POST          -         login  200    200    200    200    200    200
authoring:environment_list             GET,HEAD      -         login  200-   200    200    200    200    200
authoring:environment_create           GET           -         login  403    200    200    403    200    403
authoring:environment_create           POST          -         login  403    302w   302w   403    302w   403
authoring:environment_detail           GET,HEAD      -         login  404    200    200    200    200    200
authoring:environment_edit             GET           -         login  404    200    403    403    200    403
authoring:environment_edit             POST          -         login  404    302w   403    403    302w   403
authoring:account                      GET           -         login  200    200    200    200    200    200
#   one's own new API token
authoring:account                      POST          -         login  200w   200w   200w   200w   200w   200w
api-environment-list                   GET,HEAD      -         401    200-   200    200    200    200    200
api-environment-list                   POST          -         401    403    201w   201w   403    201w   403
api-environment-detail                 GET,HEAD      -         401    404    200    200    200    200    200
api-environment-detail                 PATCH         -         401    404    200w   403    403    200w   403
api-environment-versions               GET,HEAD      -         401    404    200    200    200    200    200
api-environment-versions               POST          -         401    404    201w   403    403    201w   403
api-task-list                          GET,HEAD      -         401    200-   200+   200+   200+   200+   200+
api-task-list                          POST          -         401    403    201w   201w   403    201w   403
api-task-detail                        GET,HEAD      -         401    404    200    200    200    200    200
api-task-detail                        GET,HEAD      draft     401    404    200    200    200    200    404
api-task-versions                      GET,HEAD      -         401    404    200    200    200    200    200
#   the body edits v1: v2 is the latest (409)
api-task-versions                      POST          -         401    404    409    403    403    409    403
api-task-versions                      POST          draft     401    404    201w   403    403    201w   404
#   only the task's editors may ask; the world's judge endpoint does not answer (a closed port): the model's
#   failure is a gateway's 502, and nothing is saved
api-task-rubric-draft                  POST          -         401    404    502    403    403    502    403
api-task-version                       GET,HEAD      -         401    404    200    200    200    200    404
api-task-version                       GET,HEAD      v1        401    404    200    200    200    200    200
#   ?as=healthbench: the version as a HealthBench row
api-task-version-rubric                GET,HEAD      -         401    404    200    200    200    200    404
api-task-version-rubric                GET,HEAD      v1        401    404    200    200    200    200    200
#   ?a=1&b=2: v2 is no lab member's
api-task-diff                          GET,HEAD      -         401    404    200    200    200    200    404
#   a task's or an environment's file
api-blob-upload                        POST          -         401    403    201w   201w   403    201w   403

# ---------------------------------------------------------- grading
#   a judge check: stored for a worker
grading:dry_run                        POST          -         login  403    200w   200w   200w   200w   403
#   its author's scratch work
grading:dry_run_detail                 GET           -         login  404    200    404    404    200    404
grading:grade_detail                   GET           -         login  404    200    200    200    200    404
grading:grade_detail                   GET           v1        login  404    200    200    200    200    200
#   a dry run's grade is the dry run's: its author's (and an admin's), whatever version it was on
grading:grade_detail                   GET           dry-run   login  404    200    404    404    200    404
#   the check kinds, from the schema
grading:kinds_reference                GET           -         login  200    200    200    200    200    200
grading:example_answers                GET           -         login  404    200    200    200    200    404
grading:example_answers                GET           v1        login  404    200    200    200    200    200
#   its owner and reviewers
grading:example_answers_run            POST          -         login  404    302w   403    302w   302w   404
#   v1 has none: nothing to grade
grading:example_answers_run            POST          v1        login  404    302=   403    302=   302=   403
#   the judge an environment's tasks use: its owner (or an admin) chooses
#   a GET (the refused form's page reloaded) opens the environment's page at the panel
grading:environment_judge              GET           -         login  404    302    302    302    302    302
grading:environment_judge              POST          -         login  404    302w   403    403    302w   403
grading:judge_label                    POST          -         login  404    403    403    200w   200w   404
grading:judge_label                    POST          v1        login  404    403    403    200w   200w   403
#   a validator: no data, no write
rubric-validate                        POST          -         401    200    200    200    200    200    200
grade-detail                           GET           -         401    404    200    200    200    200    404
grade-detail                           GET           v1        401    404    200    200    200    200    200
grade-detail                           GET           dry-run   401    404    200    404    404    200    404
api-task-version-examples              GET           -         401    404    200    200    200    200    404
api-task-version-examples              GET           v1        401    404    200    200    200    200    200
api-task-version-examples-run          POST          -         401    404    202w   403    202w   202w   404
#   v1 has no example answers
api-task-version-examples-run          POST          v1        401    404    400    403    400    400    403
judge-label-create                     POST          -         401    404    403    403    201w   201w   404
judge-label-create                     POST          v1        401    404    403    403    201w   201w   403

# ---------------------------------------------------------- sandbox: previews (authors, reviewers, admins start them)
sandbox:preview_start                  GET           -         login  404    200    200    200    200    404
sandbox:preview_start                  POST          -         login  404    302w   302w   302w   302w   404
#   a lab member reads v1, starts nothing
sandbox:preview_start                  GET           v1        login  404    200    200    200    200    403
sandbox:preview_start                  POST          v1        login  404    302w   302w   302w   302w   403
sandbox:preview_detail                 GET           -         login  404    200    200    200    200    404
sandbox:preview_detail                 GET           v1        login  404    200    200    200    200    200
sandbox:preview_progress               GET           -         login  404    200    200    200    200    404
sandbox:preview_progress               GET           v1        login  404    200    200    200    200    200
sandbox:preview_cancel                 POST          -         login  404    302w   302w   302w   302w   404
sandbox:preview_cancel                 POST          v1        login  404    302w   302w   302w   302w   403
#   a lab member: v1's
sandbox:task_previews                  GET           -         login  404    200    200    200    200    200
sandbox:task_previews                  GET           draft     login  404    200    200    200    200    404
sandbox:rollout_detail                 GET           -         login  404    200    200    200    200    404
sandbox:rollout_detail                 GET           v1        login  404    200    200    200    200    200
api-task-version-previews              GET,HEAD      -         401    404    200    200    200    200    404
api-task-version-previews              GET,HEAD      v1        401    404    200    200    200    200    200
api-task-version-previews              POST          -         401    404    201w   201w   201w   201w   404
api-task-version-previews              POST          v1        401    404    201w   201w   201w   201w   403
api-preview-detail                     GET,HEAD      -         401    404    200    200    200    200    404
api-preview-detail                     GET,HEAD      v1        401    404    200    200    200    200    200
api-preview-cancel                     POST          -         401    404    200w   200w   200w   200w   404
#   whoever reads the preview; the world's rubric has no llm_judge check: nothing to correct (409)
api-preview-calibration                GET,HEAD      -         401    404    409    409    409    409    404
api-preview-calibration                GET,HEAD      v1        401    404    409    409    409    409    409
api-preview-cancel                     POST          v1        401    404    200w   200w   200w   200w   403
api-rollout-detail                     GET,HEAD      -         401    404    200    200    200    200    404
api-rollout-detail                     GET,HEAD      v1        401    404    200    200    200    200    200

# ---------------------------------------------------------- review: the task is in review at v2
review:queue                           GET,HEAD      -         login  403    403    403    200+   200+   403
#   a reviewer's visit is kept (the diff since)
review:review_page                     GET,HEAD      -         login  403    200    200    200w   200w   403
review:label_queue                     GET,HEAD      -         login  403    403    403    200+   200+   403
review:environment_dashboard           GET,HEAD      -         login  403    200    200    200    200    403
review:agreement                       GET,HEAD      -         login  403    200    200    200    200    403
#   opening it marks one's own items read
review:inbox                           GET,HEAD      -         login  200    200w   200    200    200    200
review:task_submit                     POST          draft     login  404    302w   403    403    302w   404
#   in review already: said, nothing written
review:task_submit                     POST          -         login  404    302=   403    403    302=   403
#   not one's own task
review:task_review                     POST          -         login  404    403    403    302w   302w   404
#   starts the previews the gates miss
review:gates_run                       POST          -         login  404    302w   302w   302w   302w   403
review:comment_create                  POST          -         login  403    302w   403    302w   302w   403
review:comment_resolve                 POST          -         login  403    302w   403    302w   302w   403
api-task-version-submit                POST          draft     401    404    200w   403    403    200w   404
#   v1 is not the latest
api-task-version-submit                POST          v1        401    404    409    403    403    409    403
api-task-version-reviews               GET,HEAD      -         401    404    200    200    200    200    404
api-task-version-reviews               GET,HEAD      v1        401    404    200    200    200    200    200
api-task-version-reviews               POST          -         401    404    403    403    201w   201w   404
#   v1 is not in review
api-task-version-reviews               POST          v1        401    404    403    403    409    409    403
api-task-version-gates                 GET,HEAD      -         401    404    200    200    200    200    404
api-task-version-gates                 GET,HEAD      v1        401    404    200    200    200    200    200
api-task-version-gates-run             POST          -         401    404    201w   201w   201w   201w   404
api-task-version-gates-run             POST          v1        401    404    201w   201w   201w   201w   403
api-task-comments                      GET,HEAD      -         401    404    200    200    200    200    403
api-task-comments                      POST          -         401    404    201w   403    201w   201w   403
api-task-comment-resolve               POST          -         401    404    200w   403    200w   200w   403
#   the tasks one may decide: reviewers' and admins', as /review/ is
api-review-queue                       GET,HEAD      -         401    403    403    403    200+   200+   403
#   one's own
api-inbox                              GET,HEAD      -         401    200    200    200    200    200    200
#   the owner has unread items
api-inbox-read                         POST          -         401    200    200w   200    200    200    200
api-agreement                          GET,HEAD      -         401    403    200    200    200    200    403
#   blind human scores (review.blind): figures for the review workspace; scoring for reviewers but the task's
#   author; the world's rollout is an oracle's, not in the blind pool (model previews only): 404 past the refusals
#   an environment's calibration settings: its owner's (and admins')
#   a GET (the refused form's page reloaded) opens the environment's page at the panel
review:environment_calibration         GET           -         login  404    302    302    302    302    302
review:environment_calibration         POST          -         login  404    302w   403    403    302w   403
review:blind_figures                   GET,HEAD      -         login  403    200    200    200    200    403
review:blind_score                     GET,HEAD,POST -         login  403    403    403    404    404    403
#   the world's rollout is no flagged hack: said on the figures page, nothing written
review:blind_hack_example              POST          -         login  404    302=   403    403    302=   403
review:blind_hack_probe                POST          -         login  404    302=   403    403    302=   403
api-task-blind                         GET,HEAD      -         401    403    200    200    200    200    403
api-task-blind-sample                  GET,HEAD      -         401    404    403    403    200    200    403
api-task-blind-score                   POST          -         401    404    403    403    404    404    403
api-task-blind-hack-example            POST          -         401    404    400    403    403    400    403
api-task-blind-hack-probe              POST          -         401    404    400    403    403    400    403
api-environment-blind                  GET,HEAD      -         401    403    200    200    200    200    403

# ---------------------------------------------------------- packs: lab members and admins build, every member reads
packs:pack_list                        GET           -         login  403    200    200    200    200    200
packs:pack_list                        POST          -         login  403    403    403    403    302w   302w
packs:pack_detail                      GET           -         login  403    200    200    200    200    200
packs:pack_detail                      POST          -         login  403    403    403    403    302w   302w
packs:pack_version                     GET           -         login  403    200    200    200    200    200
packs:pack_version_progress            GET           -         login  403    200    200    200    200    200
packs:pack_version_verification        GET           -         login  403    200    200    200    200    200
#   "Verify again"
packs:pack_version_verification        POST          -         login  403    403    403    403    302w   302w
packs:pack_version_cancel              POST          building  login  403    403    403    403    302w   302w
#   each download is audited
packs:pack_version_download            GET           -         login  403    403    403    403    200w   200w
packs:task_import                      GET           -         login  403    200    200    403    200    403
packs:task_import                      POST          -         login  403    200w   200w   403    200w   403
#   a dataset's health report: the importer's and the admins'
packs:dataset_check                    GET           -         login  404    200    404    404    200    404
packs:dataset_check_json               GET           -         login  404    200    404    404    200    404
api-pack-list                          GET,HEAD      -         401    403    200    200    200    200    200
api-pack-list                          POST          -         401    403    403    403    403    201w   201w
api-pack-versions                      GET,HEAD      -         401    403    200    200    200    200    200
api-pack-versions                      POST          -         401    403    403    403    403    202w   202w
api-pack-version                       GET,HEAD      -         401    403    200    200    200    200    200
api-pack-version-download              GET,HEAD      -         401    403    403    403    403    200w   200w
#   nothing to download yet
api-pack-version-download              GET           building  401    403    403    403    403    409    409
api-import-file                        POST          -         401    403    200w   200w   403    200w   403
api-import-bulk                        POST          -         401    403    200w   200w   403    200w   403
"""

# Django's admin site (its own views, wrapped by admin_view): staff only, whatever the method; exercised with GET and
# POST (admin_view refuses before it looks at the method). Anonymous visitors are sent to the site's login page by
# LoginRequiredEverywhereMiddleware, signed-in members who are not staff to the admin's login page.
ADMIN_METHODS = ("GET", "POST")

# Methods a route is probed with (as the admin, who may do most things): one that does not answer 405 needs a row.
# OPTIONS is DRF's description of an API view (no data): checked for every API route at once, not row by row.
PROBED = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
WRITES = ("POST", "PUT", "PATCH", "DELETE")


def _upload(name: str, body: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, body, content_type="application/octet-stream")


def _rows_csv() -> SimpleUploadedFile:
    return _upload("rows.csv", b"id,prompt,answer,criteria\nmatrix-imported-q7,What is six times seven?,42,Says 42\n")


def _task_form(**extra) -> dict:
    return {
        "title": "Six times seven",
        "prompt": "What is six times seven, edited?",
        "rubric": json.dumps(PLAIN_RUBRIC),
        "solution_script": "",
        "solution_answer": "42",
        "tags": "maths",
        "metadata": "{}",
        "examples": "[]",
        "message": "",
        **extra,
    }


def _judge_endpoint_id() -> int:
    from grading.models import ModelEndpoint

    return ModelEndpoint.objects.get(name="matrix-judge").pk


def _environment_form(**extra) -> dict:
    return {
        "name": "Matrix shell",
        "network": "none",
        "cpus": "1",
        "memory_mb": "512",
        "timeout_s": "60",
        "max_steps": "10",
        "tools": ["bash", "submit"],
        "custom_tools": "[]",
        "setup": "echo ready",
        **extra,
    }


# What each write sends (a function: uploads are read once), and the query string of reads that need one. Pages post
# forms; the API takes JSON unless it takes a file.
FORM, JSON, MULTIPART = "form", "json", "multipart"
BODIES = {
    "login": (FORM, lambda: {"username": "alice", "password": password_of(OWNER)}),
    "admin:login": (FORM, lambda: {"username": "adam", "password": password_of(ADMIN)}),
    "authoring:task_create": (FORM, lambda: _task_form(slug="matrix-new-q7", environment=ENV)),
    "authoring:task_edit": (FORM, lambda: _task_form(base_version="1")),
    "authoring:markdown_preview": (FORM, lambda: {"prompt": "What is *six* times seven?"}),
    "authoring:environment_create": (FORM, lambda: _environment_form(slug="matrix-env-new-q7")),
    "authoring:environment_edit": (FORM, lambda: _environment_form(base_version="1")),
    "grading:dry_run": (FORM, lambda: {"rubric": json.dumps(RUBRIC), "answer": "It is 42."}),
    "grading:judge_label": (FORM, lambda: {"verdict": "agree"}),
    "grading:environment_judge": (FORM, lambda: {"judge_endpoint": str(_judge_endpoint_id())}),
    "review:environment_calibration": (
        FORM,
        lambda: {
            "judge_min_labels": "20",
            "judge_min_rate": "0.9",
            "blind_min_correlation": "0.4",
            "blind_min_scored": "5",
        },
    ),
    "sandbox:preview_start": (FORM, lambda: {"policy": "oracle", "n": "1", "backend": "bubblewrap"}),
    "review:task_review": (FORM, lambda: {"decision": "approve", "version": "2"}),
    "review:comment_create": (FORM, lambda: {"body": "A new thought", "check_id": ""}),
    "packs:pack_list": (FORM, lambda: {"slug": "matrix-pack-new-q7", "licence": "proprietary"}),
    "packs:pack_detail": (FORM, lambda: {"version": "3.0.0", "test_ratio": "0.1", "confirm": "1"}),
    "packs:task_import": (FORM, lambda: {"file": _rows_csv(), "environment": ENV}),
    "api-environment-list": (JSON, lambda: {"slug": "matrix-env-api-q7", "name": "API", "spec": {"network": "none"}}),
    "api-environment-detail": (JSON, lambda: {"judge_endpoint": _judge_endpoint_id()}),
    "api-environment-versions": (JSON, lambda: {"spec": {"network": "none", "setup": "echo hi"}, "base_version": 1}),
    "api-task-list": (
        JSON,
        lambda: {"slug": "matrix-api-q7", "environment": ENV, "title": "T", "prompt": "P", "rubric": PLAIN_RUBRIC},
    ),
    "api-task-versions": (
        JSON,
        lambda: {"base_version": 1, "title": "T", "prompt": "P, edited", "rubric": PLAIN_RUBRIC},
    ),
    "api-blob-upload": (MULTIPART, lambda: {"file": _upload("notes.md", b"more notes\n")}),
    "rubric-validate": (JSON, lambda: {"rubric": RUBRIC}),
    "api-task-rubric-draft": (JSON, lambda: {"count": 5}),
    "judge-label-create": (JSON, lambda: {"verdict": "agree"}),
    "api-task-blind-score": (JSON, lambda: {"passed": False, "score": 3}),
    "review:blind_score": (FORM, lambda: {"passed": "no", "score": "3"}),
    "api-task-version-previews": (JSON, lambda: {"policy": "oracle", "n": 1}),
    "api-task-version-reviews": (JSON, lambda: {"decision": "approve"}),
    "api-task-comments": (JSON, lambda: {"body": "A new thought"}),
    "api-pack-list": (JSON, lambda: {"slug": "matrix-pack-api-q7"}),
    "api-pack-versions": (JSON, lambda: {"version": "3.0.0"}),
    "api-import-file": (MULTIPART, lambda: {"file": _rows_csv(), "environment": ENV}),
    "api-import-bulk": (
        JSON,
        lambda: {
            "tasks": [
                {"id": "matrix-bulk-q7", "prompt": "What is six times seven?", "answer": "42", "criteria": "Says 42"}
            ],
            "environment": ENV,
        },
    ),
}
QUERIES = {
    "api-agreement": f"?task={REVIEW}",
    "api-task-diff": "?a=1&b=2",
    "api-task-version-rubric": "?as=healthbench",
}


# --------------------------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Cell:
    status: int
    login: bool = False  # a 302 to a login page
    writes: bool = False  # the database changed
    empty: bool = False  # the answer names none of the world's objects
    named: bool = False  # the answer names the task in review
    unchanged: bool = False  # the database did not change

    @classmethod
    def parse(cls, text: str) -> Cell:
        if text == "login":
            return cls(302, login=True)
        status, flags = re.fullmatch(r"(\d{3})([w+=-]*)", text).groups()
        return cls(int(status), writes="w" in flags, empty="-" in flags, named="+" in flags, unchanged="=" in flags)

    @property
    def refusal(self) -> bool:
        return self.login or self.unchanged or self.status in (400, 401, 403, 404, 405, 409)


@dataclass(frozen=True)
class Row:
    route: str
    method: str
    on: str
    cells: dict  # role -> Cell


def parse_matrix(text: str = MATRIX) -> list[Row]:
    rows = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        route, methods, on, *cells = line.split()
        assert len(cells) == len(ROLES), f"{route}: {len(cells)} cells for {len(ROLES)} roles"
        for method in PROBED if methods == "*" else methods.split(","):
            rows.append(Row(route, method, on, dict(zip(ROLES, map(Cell.parse, cells)))))
    return rows


# --------------------------------------------------------------------------------------------- the URL conf


def routes(patterns=None, prefix="", namespace=None):
    """(name, path template, pattern) of every route in the URL conf; an unnamed one is named by its template."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            yield from routes(pattern.url_patterns, prefix + str(pattern.pattern), pattern.namespace or namespace)
        elif isinstance(pattern, URLPattern):
            name = pattern.name or str(pattern.pattern)
            yield (f"{namespace}:{name}" if namespace else name), prefix + str(pattern.pattern), pattern


def is_admin_route(template: str) -> bool:
    return template.startswith("admin/")


def is_api(path: str) -> bool:
    return path.startswith("/api/")


def _admin_object(template: str) -> str:
    """The pk of an object of the model an admin route names (admin/<app>/<model>/...), as text."""
    app_label, model_name = template.split("/")[1:3]
    if model_name == "tokenproxy":  # DRF's token admin names a token by its user
        app_label, model_name = "auth", "user"
    return str(apps.get_model(app_label, model_name).objects.order_by("pk").values_list("pk", flat=True)[0])


def path_of(name: str, template: str, values: dict) -> str:
    if name == "admin:app_list":
        return "/admin/authoring/"
    if name == "admin:(?P<url>.*)$":
        return "/admin/no-such-page/"
    if name == "admin:view_on_site":
        from django.contrib.contenttypes.models import ContentType

        from authoring.models import Task

        return f"/admin/r/{ContentType.objects.get_for_model(Task).pk}/{Task.objects.get(slug=REVIEW).pk}/"
    slug = ENV if "environments/" in template else PACK if "packs/" in template else values.get("task", REVIEW)

    def fill(match):
        key = match.group(2)
        if key == "slug":
            return slug
        if key == "object_id":
            return _admin_object(template)
        if key == "id":
            return str(apps.get_model("auth", "user").objects.get(username="alice").pk)
        return str(values[key])

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", fill, template)


# --------------------------------------------------------------------------------------------- requests


def _fingerprint_sql() -> str:
    qn = connection.ops.quote_name
    tables = sorted(
        {
            model._meta.db_table
            for model in apps.get_models(include_auto_created=True)
            if model._meta.managed and not model._meta.proxy
        }
        - {"django_session"}
    )
    return " UNION ALL ".join(
        f"SELECT '{table}', md5(coalesce(string_agg(r::text, '|' ORDER BY r::text), '')) FROM {qn(table)} r"
        for table in tables
    )


def fingerprint() -> dict[str, str]:
    """A hash of every table's rows but the sessions' (signing in writes one): what a refused request leaves alone."""
    with connection.cursor() as cursor:
        cursor.execute(_fingerprint_sql())
        return dict(cursor.fetchall())


@dataclass
class Answer:
    method: str
    status: int
    location: str
    body: str
    changed: list[str]  # the tables whose rows changed


def send(
    client: Client, method: str, path: str, route: str, *, token: str | None = None, baseline: dict | None = None
) -> Answer:
    """`method` to `path` as `client`, in a savepoint rolled back afterwards (the client's cookies too)."""
    headers = {"HTTP_AUTHORIZATION": f"Token {token}"} if token else {}
    kind, body = BODIES.get(route, (JSON if is_api(path) else FORM, dict))
    data = body() if method in WRITES else {}
    saved = SimpleCookie({key: morsel.value for key, morsel in client.cookies.items()})
    with transaction.atomic():
        if kind == JSON and method in WRITES:
            response = client.generic(method, path, json.dumps(data), content_type="application/json", **headers)
        elif method == "POST":
            response = client.post(path, data, **headers)  # a form, multipart (files too)
        else:
            response = client.generic(method, path, **headers)
        content = b"".join(response.streaming_content) if response.streaming else response.content
        _close(response)
        after = fingerprint() if baseline is not None and response.status_code < 500 else baseline
        transaction.set_rollback(True)
    client.cookies = saved
    changed = sorted(table for table in (baseline or {}) if after.get(table) != baseline[table])
    text = content.decode(errors="replace") if not response.streaming else ""
    return Answer(method, response.status_code, response.headers.get("Location", ""), text, changed)


def _close(response) -> None:
    """Close a response (a streamed file's handle) as the test client does: without the end-of-request signal
    closing the database connection, and with it the transaction the test runs in."""
    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)


def is_login(answer: Answer) -> bool:
    return answer.status == 302 and ("/accounts/login/" in answer.location or "/admin/login/" in answer.location)


def problems_of(answer: Answer, cell: Cell, role: str) -> list[str]:
    problems = []
    if answer.status != cell.status or (cell.login and not is_login(answer)):
        problems.append(f"answered {answer.status}{' to ' + answer.location if answer.location else ''}")
    elif answer.status == 302 and not cell.login and is_login(answer):
        problems.append(f"sent to the login page ({answer.location})")
    if (cell.refusal or answer.status >= 400 or is_login(answer)) and answer.changed:
        problems.append(f"refused, yet changed {', '.join(answer.changed)}")
    if cell.writes and not answer.changed:
        problems.append("changed nothing")
    if cell.empty and any(name in answer.body for name in NAMES):
        problems.append("named the world's objects")
    if cell.named and answer.method != "HEAD" and REVIEW not in answer.body:
        problems.append(f"did not name {REVIEW}")
    if role == LAB and answer.status < 300 and (UNAPPROVED in answer.body or DRAFT in answer.body):
        problems.append("showed a lab member a version no reviewer approved")
    if role == NOROLE and answer.status < 300 and any(name in answer.body for name in NAMES):
        problems.append("showed a member with no role the world's objects")
    return problems


WORLD_SETTINGS = {
    "ALLOWED_HOSTS": ["*"],
    "PASSWORD_HASHERS": ["django.contrib.auth.hashers.MD5PasswordHasher"],
}  # six users, quickly


@pytest.fixture(scope="module")
def module_world(django_db_setup, django_db_blocker, tmp_path_factory):
    """One world for the module's tests, in a transaction rolled back at the end (each test's own runs inside it,
    as a savepoint), with the files it stores (blobs, the pack's archive) in a folder of its own."""
    media = tmp_path_factory.mktemp("matrix-media")
    with django_db_blocker.unblock(), transaction.atomic():
        with override_settings(MEDIA_ROOT=media, **WORLD_SETTINGS):
            world = build_world(get_user_model())
            world["clients"] = {ANON: Client(raise_request_exception=False)}
            for role, user in world["users"].items():
                client = Client(raise_request_exception=False)
                client.force_login(user)
                world["clients"][role] = client
            world["baseline"] = fingerprint()
        world["media"] = media
        yield world
        transaction.set_rollback(True)


@pytest.fixture
def world(module_world, settings):
    settings.MEDIA_ROOT = module_world["media"]  # not this test's own folder (tests/conftest.py)
    for name, value in WORLD_SETTINGS.items():
        setattr(settings, name, value)
    return module_world


def _callers(world, role: str, path: str):
    """(how, client, token): the role's browser session, and on /api/ its API token."""
    yield "session", world["clients"][role], None
    if is_api(path) and role != ANON:
        yield "token", world["clients"][ANON], world["tokens"][role]


def accepted_methods(world, name: str, template: str, values: dict, methods=PROBED) -> set[str]:
    """Those of `methods` that `name` answers other than 405, asked by the admin (who may do most things)."""
    path = path_of(name, template, values)
    return {
        method
        for method in methods
        if send(world["clients"][ADMIN], method, path + QUERIES.get(name, ""), name).status != 405
    }


def test_every_route_and_method_has_a_row(world):
    """A route of the URL conf without a row, a method it answers (not 405) without one, a row of a route that is
    gone, or two rows for one (route, method, target) fail. (A row for a method the route does not take fails in
    test_each_role_is_answered_as_its_row_says: no row expects the admin to get 405.)"""
    listed: dict[str, set[str]] = {}
    seen_rows = set()
    problems = []
    for row in parse_matrix():
        listed.setdefault(row.route, set()).add(row.method)
        if (row.route, row.method, row.on) in seen_rows:
            problems.append(f"two rows for {row.route} {row.method} on {row.on}")
        seen_rows.add((row.route, row.method, row.on))
        if row.on not in world["targets"]:
            problems.append(f"{row.route}: no target {row.on!r}")
        if row.cells[ADMIN].status == 405:
            problems.append(f"{row.route} {row.method}: a row for a method the route does not take")
    names = set()
    for name, template, _ in routes():
        if is_admin_route(template):
            continue  # test_the_admin_site_is_for_staff_only
        names.add(name)
        unlisted = [
            method
            for method in PROBED
            if method not in listed.get(name, ()) and not (method == "OPTIONS" and is_api("/" + template))
        ]  # OPTIONS: its own test below
        answered = accepted_methods(world, name, template, world["targets"]["-"], unlisted)
        if answered:
            problems.append(f"{name} answers {', '.join(sorted(answered))}, which no row lists")
    problems += [f"{name} has rows but is not a route" for name in sorted(set(listed) - names)]
    assert not problems, "\n".join(problems)


def _baseline(world, method: str, cell: Cell) -> dict | None:
    """The fingerprint to compare with where the database is asserted on: writes, and reads that write."""
    return world["baseline"] if method in WRITES or cell.writes or cell.unchanged else None


def test_each_role_is_answered_as_its_row_says(world):
    templates = {name: template for name, template, _ in routes()}
    problems = []
    for row in parse_matrix():
        path = path_of(row.route, templates[row.route], world["targets"][row.on]) + QUERIES.get(row.route, "")
        for role in ROLES:
            baseline = _baseline(world, row.method, row.cells[role])
            for how, client, token in _callers(world, role, path):
                answer = send(client, row.method, path, row.route, token=token, baseline=baseline)
                problems += [
                    f"{row.method} {path} ({row.route}, {row.on}) as {role} by {how}: {problem}"
                    for problem in problems_of(answer, row.cells[role], role)
                ]
    assert not problems, f"{len(problems)} answers differ from MATRIX:\n" + "\n".join(problems)


# The admin site's answers to the admin (a superuser) where they are not 200, each for Django's own reason.
NOT_CHANGED = ("authoring_environmentversion", "authoring_taskversion", "authoring_blob", "authoring_auditevent")
NOT_ADDED = (*NOT_CHANGED, "grading_checkresult", "sandbox_previewrun", "sandbox_rollout")  # the product writes them
READ_ONLY = ("grading_checkresult", "sandbox_rollout")  # every field read-only: the form saves nothing, to the list
ADMIN_ANSWERS = {
    ("admin:login", "GET"): "302",  # signed in already: to the index
    ("admin:login", "POST"): "302w",  # signs in (its last login)
    ("admin:logout", "GET"): "405",  # Django 5 signs out on POST only
    ("admin:logout", "POST"): "login",  # signed out, to LOGOUT_REDIRECT_URL
    ("admin:password_change_done", "POST"): "405",
    ("admin:autocomplete", "GET"): "403",  # asked without the field to complete
    ("admin:autocomplete", "POST"): "405",
    ("admin:jsi18n", "POST"): "405",
    ("admin:view_on_site", "GET"): "404",  # a task has no get_absolute_url
    ("admin:view_on_site", "POST"): "404",
    ("admin:(?P<url>.*)$", "GET"): "404",  # no such admin page
    ("admin:(?P<url>.*)$", "POST"): "404",
    **{("admin:<path:object_id>/", method): "302" for method in ADMIN_METHODS},  # an object's old URL: its change page
    **{(f"admin:{model}_add", method): "403" for model in NOT_ADDED for method in ADMIN_METHODS},
    **{(f"admin:{model}_change", "POST"): "403" for model in NOT_CHANGED},
    **{(f"admin:{model}_change", "POST"): "302" for model in READ_ONLY},
}


def admin_cell(name: str, method: str, role: str) -> Cell:
    """What Django's admin site answers `role`: the admin as ADMIN_ANSWERS says (else 200: a page, or a form shown
    again with its errors), anyone else the login page (the site's for an anonymous visitor, the admin's for a
    member who is not staff). Its own login page is public; signing out of it, a member who is not staff is sent
    to its index (which sends them to sign in)."""
    if role == ADMIN:
        return Cell.parse(ADMIN_ANSWERS.get((name, method), "200"))
    if name == "admin:login":
        return Cell.parse("200" if method == "GET" else "302w")
    if name == "admin:logout" and role != ANON:
        return Cell.parse("302=")
    return Cell.parse("login")


def test_the_admin_site_is_for_staff_only(world):
    problems = []
    for name, template, _ in routes():
        if not is_admin_route(template):
            continue
        path = path_of(name, template, world["targets"]["-"])
        for method in ADMIN_METHODS:
            for role in ROLES:
                cell = admin_cell(name, method, role)
                answer = send(world["clients"][role], method, path, name, baseline=_baseline(world, method, cell))
                problems += [
                    f"{method} {path} ({name}) as {role}: {problem}" for problem in problems_of(answer, cell, role)
                ]
    assert not problems, "\n".join(problems)


def test_options_describes_an_api_view_to_signed_in_callers_only(world):
    """DRF answers OPTIONS with the view's name, description and formats (no data): 401 anonymous, 200 signed in."""
    problems = []
    for name, template, _ in routes():
        path = "/" + template
        if not is_api(path):
            continue
        path = path_of(name, template, world["targets"]["-"])
        for role in ROLES:
            expected = Cell.parse("200" if name == "format-schema" else "401" if role == ANON else "200")
            for how, client, token in _callers(world, role, path):
                answer = send(client, "OPTIONS", path, name, token=token)
                problems += [
                    f"OPTIONS {path} as {role} by {how}: {problem}" for problem in problems_of(answer, expected, role)
                ]
    assert not problems, "\n".join(problems)


def test_a_browser_write_without_a_csrf_token_is_refused(world):
    """Every write a signed-in browser session may make needs the CSRF token: without it, 403 and nothing changed."""
    templates = {name: template for name, template, _ in routes()}
    client = Client(enforce_csrf_checks=True, raise_request_exception=False)
    client.force_login(world["users"][ADMIN])
    baseline = fingerprint()  # after signing in (the admin's last login)
    problems = []
    for route, method, on in sorted(
        {(row.route, row.method, row.on) for row in parse_matrix() if row.method in WRITES}
    ):
        path = path_of(route, templates[route], world["targets"][on]) + QUERIES.get(route, "")
        answer = send(client, method, path, route, baseline=baseline)
        problems += [
            f"{method} {path} ({route}) without a CSRF token: {problem}"
            for problem in problems_of(answer, Cell.parse("403"), ADMIN)
        ]
    assert not problems, "\n".join(problems)


def test_an_api_token_signs_in_nowhere_but_the_api(world):
    """Outside /api/ a token is no sign-in: the caller is answered as an anonymous visitor (a page that took it
    would take writes without the CSRF token)."""
    templates = {name: template for name, template, _ in routes()}
    problems = []
    for row in parse_matrix():
        path = path_of(row.route, templates[row.route], world["targets"][row.on]) + QUERIES.get(row.route, "")
        if is_api(path):
            continue
        cell = row.cells[ANON]
        answer = send(
            world["clients"][ANON],
            row.method,
            path,
            row.route,
            token=world["tokens"][ADMIN],
            baseline=_baseline(world, row.method, cell),
        )
        problems += [
            f"{row.method} {path} ({row.route}) with the admin's token: {problem}"
            for problem in problems_of(answer, cell, ANON)
        ]
    assert not problems, "\n".join(problems)
