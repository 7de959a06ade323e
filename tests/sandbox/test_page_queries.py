"""The preview page, its live fragment and the rollout page cost the same queries for a run of 2 rollouts as for one
of 64, the most a preview runs (issue 12, "Pages and API under load")."""

from __future__ import annotations

import copy

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sandbox import services, worker


@pytest.fixture
def runs(sandbox_dir, version, author, monkeypatch):
    """{2: a finished run of 2 graded rollouts, 64: one of 64}, each rollout run by the worker. The sandbox's result is
    recorded from one real bubblewrap rollout of the task and replayed for the other 65 (the same task version and
    policy: the same result), so that 66 rollouts cost one sandbox."""
    run_in_sandbox, recorded = worker._run_in_sandbox, []

    def replayed(**kwargs):
        if not recorded:
            recorded.append(run_in_sandbox(**kwargs))
        return copy.deepcopy(recorded[0])

    monkeypatch.setattr(worker, "_run_in_sandbox", replayed)
    made = {}
    for n in (2, 64):
        preview_run = services.preview_run_create(task_version=version, user=author, policy="oracle", n=n)
        for rollout_id in preview_run.rollouts.values_list("pk", flat=True):
            assert worker.rollout_execute(rollout_id=rollout_id) == "done"
        made[n] = preview_run
    return made


def _queries(client, url: str, **extra) -> list[str]:
    client.get(url, **extra)  # warm the session and the role caches
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **extra)
    assert response.status_code == 200, url
    return [q["sql"] for q in queries.captured_queries]


def _urls(preview_run) -> dict[str, tuple[str, dict]]:
    last = preview_run.rollouts.order_by("-index").first()
    return {
        "preview page": (f"/previews/{preview_run.pk}/", {}),
        "preview page, a rollout open": (f"/previews/{preview_run.pk}/?rollout={last.pk}", {}),
        "live fragment": (f"/previews/{preview_run.pk}/progress/", {"HTTP_HX_REQUEST": "true"}),
        "rollout page": (f"/previews/rollouts/{last.pk}/", {}),
        "rollout fragment": (f"/previews/rollouts/{last.pk}/", {"HTTP_HX_REQUEST": "true"}),
        "API run": (f"/api/previews/{preview_run.pk}/", {}),
        "API rollout": (f"/api/rollouts/{last.pk}/", {}),
    }


# Each: the session and the user with its roles (the API: the same, by session), then
# - preview page: the run with its version, task and environment, its rollouts' rows, the nav's counts; the judge
#   calibration panel (review.panels.preview_calibration) reads the version's rubric (its spec, deferred by the run's
#   query) once per process (review.calibration._judged): not on this second view, and for this rubric of no judged
#   check nothing more;
# - a rollout open on it: and that rollout (with its grade), its check results, their judge labels;
# - live fragment (polled every second while the run is live): as the page, nav counts too (the context processor);
# - rollout page and fragment: the rollout with its run, version, task and grade, the nav's counts, its check
#   results, their judge labels;
# - API run: the run, its rollouts; API rollout: the rollout, its check results, their judge labels.
PINNED = {
    "preview page": 5,
    "preview page, a rollout open": 8,
    "live fragment": 4,
    "rollout page": 6,
    "rollout fragment": 5,
    "API run": 4,
    "API rollout": 5,
}


def test_the_preview_and_rollout_pages_cost_the_same_queries_for_64_rollouts_as_for_2(client, author, runs):
    client.force_login(author)
    counts = {}
    for n, preview_run in runs.items():
        for name, (url, extra) in _urls(preview_run).items():
            counts[(name, n)] = _queries(client, url, **extra)
    for name in PINNED:
        assert len(counts[(name, 2)]) == len(counts[(name, 64)]), (name, "\n".join(counts[(name, 64)]))
    assert {name: len(counts[(name, 64)]) for name in PINNED} == PINNED
