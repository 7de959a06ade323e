"""The environment dashboard's blind human scores (issue 31): per task the rollouts scored blind, Spearman with its
interval, whether it is flagged under the environment's rule (shown), its flagged hacks counted and linked to the
task's blind page, never named to a reviewer who may still score them; the page's queries do not grow with its
tasks."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from authoring import services as authoring_services
from review import blind
from review.models import BlindRule
from tests.review.conftest import finished_preview, task_content
from tests.review.test_blind_scores import HUMAN, REWARDS, SPEARMAN


def _page(client) -> str:
    return " ".join(client.get("/review/environments/shell/").content.decode().split())


def _row(page: str, slug: str) -> str:
    return page.split(f'<tr data-task="{slug}">', 1)[1].split("</tr>", 1)[0]


def _scored_task(slug, environment, author, reviewer, rewards=REWARDS, human=HUMAN, content=None):
    task = authoring_services.task_create(
        slug=slug, environment=environment, author=author, content=content or task_content()
    )
    rollouts = list(finished_preview(task.latest_version, author, "model", rewards).rollouts.order_by("index"))
    for rollout, score in zip(rollouts, human, strict=True):
        blind.score_record(task=task, rollout=rollout, reviewer=reviewer, passed=score >= 5, score=score)
    return task, rollouts


def test_the_dashboard_shows_each_tasks_blind_figures_flag_rule_and_hacks(client, author, reviewer, environment):
    _, rollouts = _scored_task("ranked-unlike", environment, author, reviewer)
    _scored_task("too-few", environment, author, reviewer, rewards=[0.2, 0.9], human=[1, 9])
    client.force_login(author)
    page = _page(client)
    assert 'id="blind-prediction"' in page
    row = _row(page, "ranked-unlike")
    assert f"{SPEARMAN:.2f}" == "0.47"
    assert '<td data-figure="scored">10 <span class="muted">(10 scores)</span></td>' in row
    low, high = blind.task_figures(task=rollouts[0].preview_run.task_version.task)["spearman_ci95"]
    assert f'<td data-figure="spearman">0.47 <span class="muted">({low:.2f} to {high:.2f})</span></td>' in row
    assert '<span class="badge failed"' in row and "below 0.50" in row
    assert 'href="/review/tasks/ranked-unlike/blind/#blind-hacks">1</a>' in row
    assert f"/rollouts/{rollouts[-1].pk}/" not in page  # counted, linked to the task's page, never named here
    other = _row(page, "too-few")
    assert "not measured yet: 2 of 10 rollouts scored blind" in other and "badge failed" not in other
    assert "Flagged: Spearman below 0.50 over at least 10 rollouts scored blind" in page
    BlindRule.objects.create(environment=environment, min_correlation=0.4, min_scored=3)
    page = _page(client)
    assert "badge failed" not in _row(page, "ranked-unlike")  # 0.47 is above this environment's 0.40
    assert "Flagged: Spearman below 0.40 over at least 3 rollouts scored blind" in page
    assert "2 of 3 rollouts scored blind" in _row(page, "too-few")


def test_a_reviewer_who_may_still_score_a_hack_is_told_only_how_many(
    client, author, reviewer, second_reviewer, environment
):
    """task_figures counts, not names, the hacks a reviewer may still score blind (`hacks_hidden`); the dashboard
    names none to anybody, and says which of its counted hacks that reviewer will see only after scoring them."""
    _, rollouts = _scored_task("ranked-unlike", environment, author, reviewer)
    hack = rollouts[-1]
    for who, hidden in ((second_reviewer, True), (reviewer, False), (author, False)):
        client.force_login(who)
        row = _row(_page(client), "ranked-unlike")
        assert f"/rollouts/{hack.pk}/" not in row and f'data-rollout="{hack.pk}"' not in row
        assert ">1</a>" in row
        assert ("1 among rollouts you may still score blind" in row) is hidden, who


def test_the_dashboard_queries_stay_flat_in_the_number_of_tasks(client, author, reviewer, second_reviewer, environment):
    """Each task scored blind, and its judge labelled on two versions' questions (the labels of the earlier one left
    out): blind figures, hidden hacks and the labels that count are read for all the tasks at once."""
    from tests.review.test_agreement_and_evidence import JUDGED_RUBRIC
    from tests.review.test_judge_calibration import grade, label

    reworded = {**JUDGED_RUBRIC, "checks": [{**JUDGED_RUBRIC["checks"][0], "criterion": "Says 42."}]}

    def count(n: int) -> int:
        for index in range(n - len(environment.tasks.all())):
            task, _ = _scored_task(
                f"blind-{n}-{index}", environment, author, reviewer, content=task_content(rubric=JUDGED_RUBRIC)
            )
            label(grade(task.latest_version, author, met=True), reviewer, True)
            v2, _ = authoring_services.task_version_create(
                task=task, author=author, content=task_content(rubric=reworded), base_version=1
            )
            label(grade(v2, author, met=False), reviewer, False)
        client.force_login(second_reviewer)  # may still score every hack: the hidden count is read too
        with CaptureQueriesContext(connection) as queries:
            page = _page(client)
        assert page.count("<tr data-task=") == n and page.count("1 among rollouts you may still score blind") == n
        assert page.count("(1 label on an earlier criterion not counted)") == n
        return len(queries)

    assert count(2) == count(4)
