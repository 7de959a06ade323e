"""A bulk import frees what it made by reference counting (no reference cycles per task left for the cyclic
garbage collector), and stores the same bytes and hashes as it always has."""

from __future__ import annotations

import gc

import pytest

from authoring.models import Task, TaskVersion
from authoring.services.documents import _rubric_unix_newlines
from packs import importer


def _documents(prefix: str, count: int) -> list[dict]:
    """bench/bench_packs.py's rows (what bench_vs_labelstudio.py sends), with a nested group, Windows
    newlines in a criterion and unsorted tags, so that the import's normalisation has work to do."""
    return [
        {
            "schema": "gymwright.task/v1",
            "id": f"{prefix}-{i:05d}",
            "version": 1,
            "title": f"Bench task {i}",
            "prompt": f"What is {i} + {i}? Show your working.",
            "environment": {"id": "bench", "version": 1},
            "rubric": {
                "schema": "gymwright.rubric/v1",
                "pass_threshold": 0.5,
                "checks": [
                    {"id": "right", "kind": "string_match", "points": 2, "mode": "contains", "expected": str(2 * i)},
                    {
                        "id": "style",
                        "kind": "group",
                        "points": 1,
                        "aggregate": "all",
                        "checks": [
                            {"id": "shows_working", "kind": "llm_judge", "points": 1, "criterion": "Shows\r\nworking."}
                        ],
                    },
                ],
            },
            "solution": {"script": None, "answer": str(2 * i)},
            "tags": ["Bench", "arith"],
            "metadata": {"n": i, "ratio": 1.5},
        }
        for i in range(count)
    ]


# sha256 and content_sha256 of "same-00000" and "same-00002" as main stored them before the import's reference
# cycles were removed (commit 7e8d228): the stored document must not change by a byte.
EXPECTED = {
    "same-00000": (
        "d432a28cd3509b33bbd9ca0ad42e44d5d55a0b8a0c7e87b5c0b4261bb16a6f3d",
        "462d17b576d262785cf3b3ebe7ad05687f6562e315fed752738a3e1779b43d71",
    ),
    "same-00002": (
        "1d6123d0b3a7bb09d67162c88bcfdb3c87bda3c69cab111bc5ca90716bcf6360",
        "5a347180c19ef57263df61fe60ca3ee6da4e79a523bb2f427851f0bc15343dc3",
    ),
}


def test_a_bulk_import_stores_the_same_documents_and_hashes_as_before(author, admin):
    report = importer.tasks_import(documents=_documents("same", 3), user=author, approve_as=admin)
    assert report.imported == 3, report.as_dict()
    stored = {
        slug: (sha256, content_sha256)
        for slug, sha256, content_sha256 in TaskVersion.objects.filter(task__slug__in=EXPECTED).values_list(
            "task__slug", "sha256", "content_sha256"
        )
    }
    assert stored == EXPECTED
    spec = TaskVersion.objects.get(task__slug="same-00000").spec
    assert spec["tags"] == ["arith", "bench"]
    assert spec["rubric"]["checks"][1]["checks"][0]["criterion"] == "Shows\nworking."


@pytest.fixture
def cycles_kept():
    """The garbage collector off, then a collection that keeps what it finds unreachable in gc.garbage."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def _unreachable() -> list:
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    return list(gc.garbage)


def test_a_bulk_imports_tasks_and_versions_are_freed_without_the_cycle_collector(author, admin, cycles_kept):
    report = importer.tasks_import(documents=_documents("freed", 20), user=author, approve_as=admin)
    assert report.imported == 20, report.as_dict()
    del report
    left = [obj for obj in _unreachable() if isinstance(obj, (Task, TaskVersion))]
    assert left == []


def test_a_rubrics_newlines_are_normalised_without_a_reference_cycle(cycles_kept):
    rubric = _documents("nl", 1)[0]["rubric"]
    made = _rubric_unix_newlines(rubric)
    assert made["checks"][1]["checks"][0]["criterion"] == "Shows\nworking."
    assert _unreachable() == []


def test_the_bulk_api_imports_with_the_collector_paused_and_turns_it_back_on(author, monkeypatch):
    from rest_framework.test import APIClient

    from packs import apis

    seen = []
    real = importer.tasks_import

    def tasks_import(**kwargs):
        seen.append(gc.isenabled())
        return real(**kwargs)

    monkeypatch.setattr(apis.importer, "tasks_import", tasks_import)
    api = APIClient()
    api.force_authenticate(author)
    assert gc.isenabled()
    response = api.post("/api/imports/bulk/", {"tasks": _documents("paused", 2)}, format="json")
    assert response.status_code == 200 and response.json()["imported"] == 2, response.content[:500]
    assert seen == [False] and gc.isenabled()
    # an error inside (a refused environment name) turns it back on too
    response = api.post("/api/imports/bulk/", {"tasks": _documents("x", 1), "environment": "No Such"}, format="json")
    assert response.status_code == 400 and gc.isenabled()
    # a request that found it off leaves it off
    gc.disable()
    try:
        api.post("/api/imports/bulk/", {"tasks": _documents("off", 1)}, format="json")
        assert not gc.isenabled()
    finally:
        gc.enable()
