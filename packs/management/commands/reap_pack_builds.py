"""`manage.py reap_pack_builds`: fail pack builds whose worker died or whose job was lost.

Safe to run from cron on any host, any number of times: every change is a conditional UPDATE.
"""

from django.core.management.base import BaseCommand

from packs.services import pack_scratch_reap, pack_versions_reap_stale


class Command(BaseCommand):
    help = "Mark building pack versions that stopped reporting progress as failed, with the reason."

    def add_arguments(self, parser):
        parser.add_argument(
            "--stale-after",
            type=float,
            default=None,
            help="Seconds without progress after which a build is stale (default: GYMWRIGHT_PACK_BUILD_STALE_AFTER_S).",
        )

    def handle(self, *args, stale_after=None, **options):
        reaped = pack_versions_reap_stale(stale_after_s=stale_after)
        removed = pack_scratch_reap()
        self.stdout.write(
            f"failed {len(reaped)} stale pack build(s) {reaped}, "
            f"removed {len(removed)} orphaned scratch folder(s) on this host"
        )
