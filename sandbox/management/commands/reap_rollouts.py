"""`manage.py reap_rollouts`: re-queue or fail rollouts whose worker died; remove orphaned containers; check the
broker (send the jobs waiting for it, and every queued job again if it lost its messages: gymwright.jobs).

Safe to run from cron on any host, any number of times: every change is a conditional UPDATE.
"""

from django.core.management.base import BaseCommand

from gymwright import jobs
from sandbox.services import rollouts_reap_stale


class Command(BaseCommand):
    help = "Re-queue (once) or fail rollouts whose worker stopped beating; remove orphaned sandbox containers."

    def add_arguments(self, parser):
        parser.add_argument(
            "--stale-after",
            type=float,
            default=None,
            help="Seconds without a heartbeat after which a rollout is stale "
            "(default: GYMWRIGHT_ROLLOUT_STALE_AFTER_S).",
        )

    def handle(self, *args, stale_after=None, **options):
        result = rollouts_reap_stale(stale_after_s=stale_after)
        self.stdout.write(
            f"re-queued {len(result['requeued'])} {result['requeued']}, "
            f"failed {len(result['failed'])} {result['failed']}, "
            f"re-sent {len(result['resent'])} lost message(s) {result['resent']}, "
            f"removed {result['containers_removed']} container(s)"
        )
        try:
            check = jobs.broker_check()
        except jobs.broker_errors() as exc:
            self.stdout.write(f"broker check: the broker does not answer ({exc}); queued jobs wait for it")
            return
        lost = "the broker lost its messages (no canary)" if check.lost else "the broker kept its messages"
        self.stdout.write(f"broker check: {lost}; re-sent {check.resent}")
