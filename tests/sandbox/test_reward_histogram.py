"""Every preview shows a reward histogram, drawn on the server as SVG."""

from django.utils import timezone

from sandbox.models import PreviewRun, Rollout


def test_a_finished_preview_shows_its_reward_histogram(client, version, author):
    run = PreviewRun.objects.create(
        task_version=version,
        created_by=author,
        policy="nop",
        policy_kind="nop",
        n=3,
        backend="bubblewrap",
        status=PreviewRun.Status.DONE,
        finished_at=timezone.now(),
    )
    Rollout.objects.bulk_create(
        [
            Rollout(preview_run=run, index=i, status=Rollout.Status.DONE, reward=reward, passed=reward >= 0.5)
            for i, reward in enumerate([0.0, 0.0, 1.0])
        ]
    )
    client.force_login(author)
    page = client.get(f"/previews/{run.pk}/").content.decode()
    assert 'aria-label="Reward histogram of 3 rollouts"' in page and 'data-counts="2,0,0,0,0,0,0,0,0,1"' in page
