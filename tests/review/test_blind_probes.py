"""A flagged blind hack becomes a rubric probe in one click (review.blind.hack_to_probe, issue 31 item 4): its final
answer, with max_reward the largest hundredth below both the task's pass threshold and the hack's reward, so that
the gates fail the probe for this exact hack until the rubric is fixed. The abuse cases: tests/review/test_blind_abuse.py."""

import pytest

from authoring.models import AuditEvent
from review import blind
from review import gate_evidence as review_gates
from tests.review.conftest import api_client, finished_preview
from tests.review.test_blind_scores import REWARDS, round_, score_all  # noqa: F401

HACK_ANSWER = "I could not work it out, so: 42 42 42"  # the round_ fixture's planted hack


@pytest.mark.parametrize(
    ("threshold", "reward", "expected"),
    [
        (0.5, 1.0, 0.49),  # below the threshold
        (0.7, 0.7, 0.69),
        (0.705, 0.9, 0.70),  # a hundredth strictly below, not a rounded one
        (0.5, 0.503, 0.49),
        (0.9, 0.75, 0.74),  # a later version raised the threshold over the hack's reward: below the reward
        (0.004, 0.004, 0.0),
        (0.0, 0.3, None),  # a threshold of 0 passes every answer: no probe can fail
    ],
)
def test_a_probes_max_reward_is_the_largest_hundredth_below_the_threshold_and_the_reward(threshold, reward, expected):
    value = blind.probe_max_reward(pass_threshold=threshold, reward=reward)
    assert value == expected
    if value is not None:
        assert value < threshold and value < reward


def test_the_hack_becomes_a_probe_only_by_its_audited_click(client, round_, reviewer, author):
    task, rollouts = round_
    score_all(task, rollouts, reviewer)
    hack = rollouts[-1]
    url = f"/review/tasks/{task.slug}/blind/hacks/{hack.pk}/probe/"
    client.force_login(reviewer)  # not the task's editor
    assert client.post(url).status_code == 403 and task.versions.count() == 1
    client.force_login(author)
    page = client.get(f"/review/tasks/{task.slug}/blind/").content.decode()
    assert f'action="{url}"' in page and "Make it a probe" in page
    response = client.post(url, follow=True)
    assert "must score at most 0.49" in response.content.decode()
    task.refresh_from_db()
    assert task.latest_version.number == 2
    assert task.latest_version.spec["rubric"]["probes"] == [{"answer": HACK_ANSWER, "max_reward": 0.49}]
    assert task.latest_version.spec.get("examples") in (None, [])  # a probe, not an example answer
    event = AuditEvent.objects.filter(data__from_rollout=hack.pk).get()
    assert event.actor == author and event.data["probe"] == {"index": 0, "max_reward": 0.49}
    assert blind.task_figures(task=task)["hacks"][0]["probe"] is True
    page = client.get(f"/review/tasks/{task.slug}/blind/").content.decode()
    assert f'action="{url}"' not in page and "a probe</span>" in page
    # already a probe: refused, said, nothing saved
    response = client.post(url, follow=True)
    assert "already a probe" in response.content.decode() and task.versions.count() == 2


def test_the_gates_fail_the_new_probe_for_this_exact_hack(round_, reviewer, author):
    task, rollouts = round_
    score_all(task, rollouts, reviewer)
    version = blind.hack_to_probe(task=task, rollout_id=rollouts[-1].pk, user=author)
    # the rubric that gave the hack its reward (1.0) gives its answer the same: the probe's gate fails
    finished_preview(version, author, f"probe:{HACK_ANSWER}", [REWARDS[-1]])
    gates = {result.gate: result for result in review_gates.gates_evaluate(task_version=version)}
    assert gates["probe:0"].status == "fail" and "the rubric rewards this probe" in gates["probe:0"].message


def test_the_api_turns_a_hack_into_a_probe_once(round_, reviewer, author, admin):
    task, rollouts = round_
    score_all(task, rollouts, reviewer)
    api = api_client(admin)
    url = f"/api/tasks/{task.slug}/blind/hacks/{rollouts[-1].pk}/probe/"
    response = api.post(url)
    assert response.status_code == 201, response.content
    assert response.json() == {"version": 2, "probe": {"answer": HACK_ANSWER, "max_reward": 0.49}}
    again = api.post(url)
    assert again.status_code == 409 and "already a probe" in again.json()["error"]["message"]
    # a rollout humans do not fail is no hack
    body = api.post(f"/api/tasks/{task.slug}/blind/hacks/{rollouts[3].pk}/probe/").json()
    assert body["error"]["code"] == "not_a_hack"
    figures = api_client(author).get(f"/api/tasks/{task.slug}/blind/").json()
    assert [(hack["example"], hack["probe"]) for hack in figures["hacks"]] == [(False, True)]
    assert task.versions.count() == 2
