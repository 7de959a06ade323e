"""Blind human reward prediction (issue 31, item 4): the stratified sample, the blind page that hides the grade,
a scoring round whose Spearman matches a hand-computed value, a planted hack (reward 1.0, humans fail it) flagged
and turned into an example answer by its one click, the gate's warning, and the API's rules (the pack's: tests/packs/test_blind_figures.py)."""

import json
import math

import pytest

from authoring.models import AuditEvent
from grading.engine import calibration
from grading.services import grade_from_document, grade_record
from review import blind
from review import gate_evidence as review_gates
from review.models import BlindScore
from sandbox.models import Rollout
from tests.review.conftest import api_client, finished_preview

# Ten model rollouts: rewards 0.0 ... 0.8 and a planted hack at 1.0, each scored once, blind, by one reviewer.
REWARDS = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0]
HUMAN = [1, 0, 2, 4, 3, 5, 6, 8, 7, 0]  # the hack (last) scored 0 and failed
# By hand: the reward's ranks are 1..10; the human scores' are 3, 1.5, 4, 6, 5, 7, 8, 10, 9, 1.5 (the two zeros
# share 1.5). Deviations from the mean rank 5.5: Σ dx·dy = 38.5, Σ dx² = 82.5, Σ dy² = 82.
SPEARMAN = 38.5 / math.sqrt(82.5 * 82)  # 0.468: below the default 0.5 over 10 rollouts


def test_the_sample_is_stratified_over_the_reward_range_seeded_and_says_nothing_of_rewards():
    items = [(pk, 0.0) for pk in range(90)] + [(100 + i, r) for i, r in enumerate([0.25, 0.3, 0.45, 0.7, 0.95, 1.0])]
    sample = calibration.stratified_sample(items, bins=5, per_bin=4, seed=7)
    rewards = dict(items)
    assert sum(1 for pk in sample if rewards[pk] == 0.0) == 4  # the crowded bin gives 4 of its 90
    assert {pk for pk in sample if rewards[pk] > 0} == set(range(100, 106))  # every rare reward is in
    assert sample == calibration.stratified_sample(list(reversed(items)), bins=5, per_bin=4, seed=7)
    assert sample != sorted(sample, key=lambda pk: rewards[pk])  # shuffled: the order is no hint
    assert calibration.spearman([(1, 2), (2, 2)]) is None and calibration.spearman([(1, 1)]) is None


@pytest.fixture
def round_(author, reviewer, task):
    """A task's model preview of ten rollouts, the last one a planted hack; the reviewer scores all ten blind."""
    version = task.latest_version
    run = finished_preview(version, author, "model", REWARDS)
    rollouts = list(run.rollouts.order_by("index"))
    Rollout.objects.filter(pk=rollouts[-1].pk).update(
        answer="I could not work it out, so: 42 42 42", workspace_files=[{"path": "notes.txt", "content": "42"}]
    )
    return task, rollouts


def score_all(task, rollouts, reviewer):
    for rollout, human in zip(rollouts, HUMAN, strict=True):
        blind.score_record(task=task, rollout=rollout, reviewer=reviewer, passed=human >= 5, score=human)


def test_with_no_model_rollout_to_score_the_blind_page_says_so_not_that_all_are_scored(client, author, reviewer, task):
    # Only oracle and nop previews: the sample is empty. The page told a reviewer "You have scored every rollout of the
    # sample", as if the work were done, when there was nothing to score until a model preview runs.
    finished_preview(task.latest_version, author, "oracle", [1.0])
    client.force_login(reviewer)
    page = client.get(f"/review/tasks/{task.slug}/blind/").content.decode()
    assert "You have scored every rollout" not in page
    assert "No rollout to score yet" in page and "model" in page


def test_the_blind_page_hides_the_grade_until_the_reviewer_has_scored(client, author, reviewer, task):
    version = task.latest_version
    run = finished_preview(version, author, "model", [0.667])
    rollout = run.rollouts.get()
    document = {
        "schema": "gymwright.grade/v1",
        "reward": 0.667,
        "earned": 2,
        "max": 3,
        "passed": True,
        "gated": False,
        "complete": True,
        "checks": [
            {"id": "says_42", "kind": "string_match", "status": "scored", "score": 1.0, "points": 2, "awarded": 2,
             "explanation": "found 42", "duration_ms": 0},
            {"id": "has_number", "kind": "regex", "status": "scored", "score": 0.0, "points": 1, "awarded": 0,
             "explanation": "no digits", "duration_ms": 0},
        ],
    }  # fmt: skip
    graded = grade_record(grade=grade_from_document(document), task_version=version, source="rollout", user=author)
    Rollout.objects.filter(pk=rollout.pk).update(grade=graded, answer="It is 42.")
    client.force_login(reviewer)
    url = f"/review/tasks/{task.slug}/blind/{rollout.pk}/"
    page = client.get(url).content.decode()
    assert "It is 42." in page and "six</em> times seven" in page  # the answer and the prompt are shown
    for grade_word in ("0.667", "says_42", "has_number", "found 42", "no digits", "data-reward", "rollout-grade"):
        assert grade_word not in page, grade_word
    assert client.post(url, {"passed": "yes", "score": "7"}).status_code == 302
    page = client.get(url).content.decode()
    assert "0.667" in page and "says_42" in page and "passes, 7 / 10" in page
    # scored once: a second score would not be blind
    assert client.post(url, {"passed": "no", "score": "1"}).status_code == 302
    assert list(BlindScore.objects.values_list("passed", "score")) == [(True, 7)]
    client.force_login(author)  # the task's own author never scores it blind
    assert client.get(url).status_code == 403


def test_a_scoring_round_measures_spearman_flags_the_planted_hack_and_warns_in_the_gates(round_, reviewer, author):
    task, rollouts = round_
    before = calibration.human_prediction_verdict(None, 0)
    assert before.ok and "not measured yet" in before.message
    score_all(task, rollouts, reviewer)
    figures = blind.task_figures(task=task)
    assert figures["scored"] == 10 and figures["spearman"] == pytest.approx(SPEARMAN)
    low, high = figures["spearman_ci95"]
    assert -1 <= low < SPEARMAN < high <= 1
    assert figures["flagged"] is True and figures["rule"] == {"min_correlation": 0.5, "min_scored": 10}
    assert [(hack["rollout"], hack["reward"], hack["human_fail"], hack["example"]) for hack in figures["hacks"]] == [
        (rollouts[-1].pk, 1.0, 1, False)
    ]
    gate = {result.gate: result for result in review_gates.gates_evaluate(task_version=task.latest_version)}[
        "human_prediction"
    ]
    assert (gate.status, gate.blocking, gate.ok) == ("fail", False, True)
    assert gate.message == (
        "the reward ranks rollouts unlike blind human scores: Spearman 0.47 over 10 rollouts, below 0.50"
    )
    environment = blind.environment_figures(environment=task.environment)
    assert environment["tasks"][0]["spearman"] == pytest.approx(SPEARMAN) and environment["hacks"] == 1


def test_a_hack_is_hidden_from_a_reviewer_who_may_still_score_it_blind(
    client, round_, reviewer, second_reviewer, author
):
    """A hack row names its rollout and reward: shown to a reviewer who has not scored that rollout yet, it would be
    the grade before the blind score. It is counted, not shown, until they have scored it; its author, who never
    scores blind, and the reviewers who scored it see it."""
    task, rollouts = round_
    score_all(task, rollouts, reviewer)
    hack = rollouts[-1]
    assert [row["rollout"] for row in blind.task_figures(task=task, viewer=reviewer)["hacks"]] == [hack.pk]
    assert [row["rollout"] for row in blind.task_figures(task=task, viewer=author)["hacks"]] == [hack.pk]
    hidden = blind.task_figures(task=task, viewer=second_reviewer)
    assert (hidden["hacks"], hidden["hacks_hidden"]) == ([], 1)
    client.force_login(second_reviewer)
    page = client.get(f"/review/tasks/{task.slug}/blind/").content.decode()
    assert f'data-rollout="{hack.pk}"' not in page and f"/rollouts/{hack.pk}/" not in page
    assert "1 more, among rollouts you may still score blind" in page
    body = api_client(second_reviewer).get(f"/api/tasks/{task.slug}/blind/").json()
    assert (body["hacks"], body["hacks_hidden"]) == ([], 1)


def test_the_hack_becomes_an_example_answer_only_by_its_audited_click(client, round_, reviewer, author, admin):
    task, rollouts = round_
    score_all(task, rollouts, reviewer)
    hack = rollouts[-1]
    assert task.versions.count() == 1  # flagged, nothing saved yet
    url = f"/review/tasks/{task.slug}/blind/hacks/{hack.pk}/example/"
    client.force_login(reviewer)  # not the task's editor
    assert client.post(url).status_code == 403
    client.force_login(author)
    assert 'action="' + url + '"' in client.get(f"/review/tasks/{task.slug}/blind/").content.decode()
    assert client.post(url).status_code == 302
    task.refresh_from_db()
    assert task.latest_version.number == 2
    (example,) = task.latest_version.spec["examples"]
    assert example == {
        "name": f"blind-hack-rollout-{hack.pk}",
        "answer": "I could not work it out, so: 42 42 42",
        "expect": "fail",
        "files": [{"path": "notes.txt", "content": "42"}],
    }
    event = AuditEvent.objects.filter(data__from_rollout=hack.pk).get()
    assert event.actor == author and event.data["blind_hack"] is True and event.data["version"] == 2
    assert blind.task_figures(task=task)["hacks"][0]["example"] is True
    assert client.post(url).status_code == 302 and task.versions.count() == 2  # already one: nothing more
    # a rollout humans do not fail is no hack
    body = api_client(admin).post(f"/api/tasks/{task.slug}/blind/hacks/{rollouts[3].pk}/example/").json()
    assert body["error"]["code"] == "not_a_hack"


def test_the_api_scores_once_reveals_the_reward_after_and_refuses_the_author(round_, reviewer, author, lab):
    task, rollouts = round_
    api = api_client(reviewer)
    sample = api.get(f"/api/tasks/{task.slug}/blind/sample/").json()
    assert sorted(sample["to_score"]) == sorted(r.pk for r in rollouts) and sample["scored"] == []
    assert "reward" not in json.dumps(sample)
    url = f"/api/tasks/{task.slug}/blind/rollouts/{rollouts[0].pk}/score/"
    bad = api.post(url, {"passed": True, "score": 11}, format="json")
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["pointer"] == "/score"
    answer = api.post(url, {"passed": False, "score": 1}, format="json")
    assert answer.status_code == 201 and answer.json()["reward"] == 0.0
    assert api.post(url, {"passed": True, "score": 9}, format="json").status_code == 409
    assert api_client(author).post(url, {"passed": True, "score": 9}, format="json").status_code == 403
    # a lab member reads no draft: the task is not there for them
    assert api_client(lab).post(url, {"passed": True, "score": 9}, format="json").status_code == 404
    figures = api.get(f"/api/tasks/{task.slug}/blind/").json()
    assert figures["scored"] == 1 and figures["spearman"] is None and figures["flagged"] is False


def test_the_figures_count_each_tasks_newest_rollouts_and_the_gate_asks_once(
    author, reviewer, task, environment, monkeypatch, django_assert_num_queries
):
    """The gates ask on every task page: one query when nothing was scored blind. The newest-rollouts bound holds
    per task in a task's figures and over the environment in its figures."""
    from authoring import services as authoring_services
    from tests.authoring.conftest import task_content

    with django_assert_num_queries(1):
        assert blind.gate_verdict(task_version=task.latest_version).message.startswith("not measured yet")
    monkeypatch.setattr(blind, "MAX_ROLLOUTS", 3)
    other = authoring_services.task_create(
        slug="six-times-eight", environment=environment, author=author, content=task_content()
    )
    oldest, *_, newest = finished_preview(
        task.latest_version, author, "model", [0.1, 0.2, 0.3, 0.4, 0.5]
    ).rollouts.all()
    *_, other_newest = finished_preview(other.latest_version, author, "model", [0.1, 0.2, 0.3, 0.4]).rollouts.all()
    for scored in (oldest, newest, other_newest):
        blind.score_record(task=task, rollout=scored, reviewer=reviewer, passed=True, score=5)
    assert blind.task_figures(task=task)["scored"] == 1  # the oldest is not among the task's newest 3
    assert blind.gate_verdict(task_version=task.latest_version).message == (
        "not measured yet: 1 of 10 rollouts scored blind"
    )
    assert blind.environment_figures(environment=environment)["scored"] == 1  # the environment's newest 3


def test_a_packs_figures_count_each_tasks_own_newest_rollouts(author, reviewer, task, environment, monkeypatch):
    """A pack reads the blind figures of a chunk of tasks at once (review.blind.pack_entries): each task keeps
    its own newest rollouts, another task's newer ones push none of its out."""
    from authoring import services as authoring_services
    from tests.authoring.conftest import task_content

    monkeypatch.setattr(blind, "MAX_ROLLOUTS", 3)
    other = authoring_services.task_create(
        slug="six-times-eight", environment=environment, author=author, content=task_content()
    )
    oldest, *_, newest = finished_preview(
        task.latest_version, author, "model", [0.1, 0.2, 0.3, 0.4, 0.5]
    ).rollouts.all()
    *_, other_newest = finished_preview(other.latest_version, author, "model", [0.1, 0.2, 0.3, 0.4]).rollouts.all()
    for scored in (oldest, newest, other_newest):
        blind.score_record(task=task, rollout=scored, reviewer=reviewer, passed=True, score=5)
    entries = blind.pack_entries(task_ids=[task.pk, other.pk])
    assert (entries[task.pk]["scored"], entries[other.pk]["scored"]) == (1, 1)
    assert entries[task.pk]["rule"] == {"min_correlation": 0.5, "min_scored": 10} and entries[task.pk]["hacks"] == 0
    assert blind.pack_entries(task_ids=[]) == {}
