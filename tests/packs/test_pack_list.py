"""The pack list (/packs/ and /api/packs/): a page at a time, each pack's latest version read with the page's packs,
and never a version's manifest, which names every task of the pack (issue 12)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from packs.models import PackVersion, TaskPack

MANIFEST = {
    "counts": {"tasks": 200, "train": 180, "test": 20},
    "tasks": [{"id": f"task-{i:05d}", "version": 1, "sha256": "0" * 64, "split": "train"} for i in range(200)],
}


def make_packs(count: int, *, first: int = 0, versions: int = 3) -> list[TaskPack]:
    """`count` packs with `versions` ready versions each (1.0.0 … 1.<versions-1>.0), each with a manifest."""
    packs = TaskPack.objects.bulk_create(
        [TaskPack(slug=f"pack-{i:03d}", name=f"Pack {i}") for i in range(first, first + count)]
    )
    PackVersion.objects.bulk_create(
        [
            PackVersion(
                pack=pack,
                version=f"1.{minor}.0",
                major=1,
                minor=minor,
                patch=0,
                status=PackVersion.Status.READY,
                manifest=MANIFEST,
            )
            for pack in packs
            for minor in range(versions)
        ]
    )
    return packs


def _listed(response) -> list[tuple[str, str]]:
    """(slug, the latest version cell's text) of each row of the pack list."""
    rows = re.findall(
        r'<a href="/packs/([^/]+)/">[^<]*</a></td><td class="long-text">[^<]*</td>\s*<td>(.*?)</td>',
        response.content.decode(),
    )
    return [(slug, re.sub(r"<[^>]+>", "", cell)) for slug, cell in rows]


def test_each_pack_shows_its_highest_version_by_semver_and_its_status(client, lab):
    make_packs(1)
    nine, ten, none = TaskPack.objects.bulk_create(
        [
            TaskPack(slug="semver", name="Semver"),
            TaskPack(slug="failed-last", name="Failed last"),
            TaskPack(slug="empty", name="Empty"),
        ]
    )
    PackVersion.objects.bulk_create(
        [
            PackVersion(pack=nine, version="1.10.0", major=1, minor=10, patch=0, status=PackVersion.Status.READY),
            PackVersion(pack=nine, version="1.9.0", major=1, minor=9, patch=0, status=PackVersion.Status.READY),
            PackVersion(pack=ten, version="2.0.0", major=2, minor=0, patch=0, status=PackVersion.Status.FAILED),
            PackVersion(pack=ten, version="1.0.0", major=1, minor=0, patch=0, status=PackVersion.Status.READY),
        ]
    )
    client.force_login(lab)
    assert _listed(client.get("/packs/")) == [
        ("empty", "–"),
        ("failed-last", "2.0.0 Failed"),
        ("pack-000", "1.2.0 Ready"),
        ("semver", "1.10.0 Ready"),
    ]


def test_the_pack_list_is_paginated(client, lab):
    make_packs(60, versions=1)
    client.force_login(lab)
    first, second = client.get("/packs/"), client.get("/packs/?page=2")
    assert [slug for slug, _ in _listed(first)] == [f"pack-{i:03d}" for i in range(50)]
    assert [slug for slug, _ in _listed(second)] == [f"pack-{i:03d}" for i in range(50, 60)]
    assert "Page 2 of 2" in second.content.decode() and 'href="?page=1"' in second.content.decode()


def _queries(client, url: str, **extra) -> list[str]:
    client.get(url, **extra)  # warm the session and the role caches
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **extra)
    assert response.status_code == 200
    return [q["sql"] for q in queries.captured_queries]


@pytest.mark.parametrize("url", ["/packs/", "/api/packs/"])
def test_the_pack_list_costs_the_same_queries_for_one_pack_as_for_thirty_and_reads_no_manifest(
    client, lab, url, django_assert_num_queries
):
    extra = {}
    if url.startswith("/api/"):
        extra["HTTP_AUTHORIZATION"] = f"Token {Token.objects.create(user=lab).key}"
    else:
        client.force_login(lab)
    make_packs(1)
    one = _queries(client, url, **extra)
    make_packs(29, first=1)
    thirty = _queries(client, url, **extra)
    assert len(one) == len(thirty), "\n".join(thirty)
    assert not [sql for sql in thirty if "manifest" in sql], "a list read the versions' manifests"
    # page: session, the user with its roles, count, the page's packs with their latest versions, the nav's unread
    # inbox count. API: the token with its user and roles, count, the page's keys, those packs.
    with django_assert_num_queries(5 if url == "/packs/" else 4):
        client.get(url, **extra)


def test_a_page_of_packs_is_rendered_once_per_content(client, lab, monkeypatch):
    """The list's rows are kept per content (packs/_pack_rows.html through kept_fragment): the same page is read back,
    a pack whose latest version changed is shown anew, and the rows are escaped as the template escapes them."""
    from gymwright.process_cache import Kept
    from gymwright.templatetags import pages as page_tags

    monkeypatch.setattr(page_tags, "_FRAGMENTS", Kept(entries=8))
    make_packs(2)
    TaskPack.objects.create(slug="odd", name="<b>odd</b>")
    client.force_login(lab)
    first = client.get("/packs/")
    assert _listed(client.get("/packs/")) == _listed(first) and len(page_tags._FRAGMENTS) == 1
    assert "&lt;b&gt;odd&lt;/b&gt;" in first.content.decode()
    PackVersion.objects.create(
        pack=TaskPack.objects.get(slug="pack-001"), version="1.3.0", major=1, minor=3, patch=0, manifest={}
    )
    assert ("pack-001", "1.3.0 Building") in _listed(client.get("/packs/")) and len(page_tags._FRAGMENTS) == 2


def test_a_second_view_of_the_pack_list_compiles_no_query(client, lab, monkeypatch):
    """Every query of the page (its count and page of packs, the session, the user, the navigation's counts) is
    compiled once per process (gymwright.sql): compiling them through the ORM on every view cost more CPU than
    running them. The page shows the same packs."""
    from django.db.models.sql.compiler import SQLCompiler

    make_packs(3)
    client.force_login(lab)
    first = _listed(client.get("/packs/?page=1"))
    compiled = []
    as_sql = SQLCompiler.as_sql
    monkeypatch.setattr(
        SQLCompiler, "as_sql", lambda self, *a, **k: compiled.append(self.query) or as_sql(self, *a, **k)
    )
    assert _listed(client.get("/packs/?page=1")) == first == [(f"pack-00{i}", "1.2.0 Ready") for i in range(3)]
    assert compiled == []
