"""Issue 31's calibration pages in a real browser: the environment dashboard's judge calibration (TPR / TNR with
their Wilson intervals, validated or not, the corrected pass rate beside the raw one) from labels whose figures are
computed by hand; a planted hack flagged on the blind figures page and turned, one click each, into an example answer
and a probe; the environment's owner changing its calibration settings and the judge gate's message following."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from authoring import services
from authoring.models import Task
from review import blind
from sandbox.models import Rollout
from tests.e2e.conftest import PASSWORD, TIMEOUT_MS, sign_in
from tests.review.conftest import finished_preview
from tests.review.test_agreement_and_evidence import JUDGED_RUBRIC
from tests.review.test_judge_calibration import grade, label

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=TIMEOUT_MS)

RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "pass_threshold": 0.5,
    "checks": [{"id": "says_42", "kind": "string_match", "points": 1, "mode": "contains", "expected": "42"}],
}


@pytest.fixture
def reviewer(transactional_db, django_user_model):
    user = django_user_model.objects.create_user(username="rhea", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="reviewer")[0])
    return user


@pytest.fixture
def measured(author, reviewer, environment):
    """A judged task whose judge reviewers labelled on 20 answers: 9 of the 10 humans call met it judged met
    (TPR 0.9), 8 of the 10 they call not met it judged not met (TNR 0.8); the environment asks for 10 labels."""
    environment.judge_min_labels = 10
    environment.save()
    task = services.task_create(
        slug="judged",
        environment=environment,
        author=author,
        content={"title": "Judged", "prompt": "Explain 42.", "rubric": JUDGED_RUBRIC, "solution": {"answer": "42"}},
    )
    version = task.latest_version
    for i in range(10):
        label(grade(version, author, met=i < 9), reviewer, True)
    for i in range(10):
        label(grade(version, author, met=i >= 8), reviewer, False)
    return task


def test_the_dashboard_shows_the_judges_rates_intervals_validation_and_corrected_pass_rate(
    page, live_server, author, measured
):
    # by hand: TPR 9/10 = 90 %, Wilson 95 % (0.5958, 0.9821); TNR 8/10 = 80 %, Wilson (0.4902, 0.9433): below the
    # environment's 0.85, so not validated. A preview whose judge passes 5 of 10: raw 50 %, corrected by
    # Rogan-Gladen (p + TNR - 1) / (TPR + TNR - 1) = (0.5 + 0.8 - 1) / (0.9 + 0.8 - 1) = 3/7 = 42.9 %.
    version = measured.latest_version
    run = finished_preview(version, author, "model", [1.0] * 5 + [0.5] * 5)
    for rollout, met in zip(run.rollouts.order_by("index"), [True] * 5 + [False] * 5, strict=True):
        Rollout.objects.filter(pk=rollout.pk).update(grade=grade(version, author, met))
    sign_in(page, live_server.url, author.username)
    page.goto(f"{live_server.url}/review/environments/shell/")
    row = page.locator('#calibration-table tr[data-check="judged/clear"]')
    expect(row.locator('[data-figure="tpr"]')).to_have_text("90.0 % (60 %–98 %)")
    expect(row.locator('[data-figure="tnr"]')).to_have_text("80.0 % (49 %–94 %)")
    expect(row.locator('[data-figure="classes"]')).to_have_text("10 / 10")
    expect(row.locator('[data-figure="validated"]')).to_have_text("not validated")
    expect(row.locator('[data-figure="raw"]')).to_have_text("50.0 % of 10")
    expect(row.locator('[data-figure="corrected"] strong')).to_have_text("42.9 %")
    expect(page.locator("#calibration-overall")).to_contain_text("0 of 1 labelled check validated")
    # the raw figure leads to its preview, where the same correction is shown
    row.locator('[data-figure="raw"] a').click()
    expect(page.locator('#judge-calibration-table [data-check="clear"] [data-figure="corrected"] strong')).to_have_text(
        "42.9 %"
    )


def test_a_planted_hack_is_flagged_and_becomes_an_example_answer_and_a_probe_in_one_click_each(
    page, live_server, author, reviewer, environment
):
    task = services.task_create(
        slug="blind-hack",
        environment=environment,
        author=author,
        content={"title": "Six sevens", "prompt": "What is six times seven?", "rubric": RUBRIC,
                 "solution": {"answer": "42"}},
    )  # fmt: skip
    rewards = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0]
    human = [1, 0, 2, 4, 3, 5, 6, 8, 7, 0]  # the last, rewarded 1.0, is the planted hack: humans fail it
    rollouts = list(finished_preview(task.latest_version, author, "model", rewards).rollouts.order_by("index"))
    hack = rollouts[-1]
    Rollout.objects.filter(pk=hack.pk).update(answer="42 42 42 <b>trust me</b>")
    for rollout, score in zip(rollouts, human, strict=True):
        blind.score_record(task=task, rollout=rollout, reviewer=reviewer, passed=score >= 5, score=score)

    sign_in(page, live_server.url, author.username)
    page.goto(f"{live_server.url}/review/tasks/blind-hack/blind/")
    expect(page.locator('[data-figure="verdict"]')).to_contain_text("flagged")
    row = page.locator(f'#blind-hacks tr[data-rollout="{hack.pk}"]')
    expect(row).to_contain_text("1.00")
    row.locator('button[data-action="example"]').click()
    expect(page.locator("body")).to_contain_text(f"Saved v2: rollout {hack.pk}'s answer is the example answer")
    row = page.locator(f'#blind-hacks tr[data-rollout="{hack.pk}"]')
    expect(row).to_contain_text("an example answer")
    expect(row.locator('button[data-action="example"]')).to_have_count(0)
    row.locator('button[data-action="probe"]').click()
    expect(page.locator("body")).to_contain_text("Saved v3")
    expect(page.locator("body")).to_contain_text("must score at most 0.49")
    row = page.locator(f'#blind-hacks tr[data-rollout="{hack.pk}"]')
    expect(row).to_contain_text("a probe")
    expect(row.locator("button")).to_have_count(0)
    task = Task.objects.get(pk=task.pk)
    spec = task.latest_version.spec
    assert task.latest_version.number == 3
    assert [(e["name"], e["answer"], e["expect"]) for e in spec["examples"]] == [
        (f"blind-hack-rollout-{hack.pk}", "42 42 42 <b>trust me</b>", "fail")
    ]
    assert spec["rubric"]["probes"] == [{"answer": "42 42 42 <b>trust me</b>", "max_reward": 0.49}]


def test_the_owner_changes_the_calibration_settings_and_the_judge_gate_follows(page, live_server, author, measured):
    gate = page.locator('#gates tr[data-gate="judge_validated"]')
    sign_in(page, live_server.url, author.username)
    page.goto(f"{live_server.url}/tasks/judged/")
    expect(gate).to_contain_text("clear: judge not validated: TNR 0.80 below 0.85")
    expect(gate).to_contain_text("(not blocking)")

    page.goto(f"{live_server.url}/environments/shell/")
    form = page.locator("#calibration-form")
    form.locator("input[name=judge_min_rate]").fill("0.3")  # out of range: refused under its field
    form.locator("button[type=submit]").click()
    expect(page.locator('.field-error[data-field="judge_min_rate"]')).to_contain_text("greater than or equal to 0.5")
    expect(page.locator('[data-setting="judge_min_rate"]')).to_have_text("0.85")

    form.locator("input[name=judge_min_rate]").fill("0.8")
    form.locator("button[type=submit]").click()
    expect(page.locator('[data-setting="judge_min_rate"]')).to_have_text("0.8")
    page.goto(f"{live_server.url}/tasks/judged/")
    expect(gate).to_have_attribute("data-status", "pass")
    expect(gate).to_contain_text("validated by reviewers' labels")

    page.goto(f"{live_server.url}/environments/shell/")
    form.locator("input[name=judge_min_rate]").fill("0.95")
    form.locator("input[name=judge_unvalidated_blocks]").check()
    form.locator("button[type=submit]").click()
    expect(page.locator('[data-setting="judge_unvalidated_blocks"]')).to_have_text("blocks submission")
    expect(page.locator("body")).to_contain_text("judge_min_rate 0.8 → 0.95")
    page.goto(f"{live_server.url}/tasks/judged/")
    expect(gate).to_contain_text("clear: judge not validated: TPR 0.90, TNR 0.80 below 0.95")
    expect(gate).not_to_contain_text("(not blocking)")


def test_the_dashboard_shows_each_tasks_blind_spearman_flag_and_hacks(page, live_server, author, reviewer, environment):
    def scored(slug, rewards, human):
        task = services.task_create(
            slug=slug,
            environment=environment,
            author=author,
            content={"title": slug, "prompt": "What is six times seven?", "rubric": RUBRIC,
                     "solution": {"answer": "42"}},
        )  # fmt: skip
        rollouts = list(finished_preview(task.latest_version, author, "model", rewards).rollouts.order_by("index"))
        for rollout, score in zip(rollouts, human, strict=True):
            blind.score_record(task=task, rollout=rollout, reviewer=reviewer, passed=score >= 5, score=score)
        return task, rollouts

    # by hand: rewards 0.0 ... 0.9 rank 1..10; humans swap each pair (ranks 2, 1, 4, 3, ...): every d = ±1,
    # Σd² = 10, Spearman = 1 - 6·10 / (10·(100 - 1)) = 0.9394, above the default 0.5: not flagged; humans pass every
    # rollout the rubric passes (reward 0.5 up, human 5 up): no hack.
    agrees, _ = scored("agrees", [i / 10 for i in range(10)], [1, 0, 3, 2, 6, 5, 8, 7, 10, 9])
    # tests/review/test_blind_scores.py's round: Spearman 38.5 / √(82.5·82) = 0.468, and a planted hack (reward 1.0)
    _, rollouts = scored("hacked", [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0], [1, 0, 2, 4, 3, 5, 6, 8, 7, 0])
    low, high = blind.task_figures(task=agrees)["spearman_ci95"]

    sign_in(page, live_server.url, reviewer.username)
    page.goto(f"{live_server.url}/review/environments/shell/")
    row = page.locator('#blind-table tr[data-task="agrees"]')
    expect(row.locator('[data-figure="scored"]')).to_have_text("10 (10 scores)")
    expect(row.locator('[data-figure="spearman"]')).to_have_text(f"0.94 ({low:.2f} to {high:.2f})")
    expect(row.locator('[data-figure="flagged"] .badge')).to_have_count(0)
    expect(row.locator('[data-figure="hacks"]')).to_have_text("0")
    row = page.locator('#blind-table tr[data-task="hacked"]')
    expect(row.locator('[data-figure="spearman"]')).to_contain_text("0.47")
    expect(row.locator('[data-figure="flagged"] .badge')).to_have_text("flagged")
    expect(page.locator("#blind-rule")).to_contain_text("Spearman below 0.50 over at least 10 rollouts scored blind")
    row.locator('[data-figure="hacks"] a').click()
    expect(page.locator(f'#blind-hacks tr[data-rollout="{rollouts[-1].pk}"]')).to_contain_text("1.00")
