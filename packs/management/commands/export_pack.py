"""`manage.py export_pack PACK_SLUG [--environment E] [--tag T]... [--task SLUG]... [--version X.Y.Z]
[--test-ratio 0.1] --out FILE.tar.gz` (docs/formats.md, "Command-line contract")."""

from __future__ import annotations

import shutil

from django.core.files.storage import default_storage
from django.core.management.base import CommandError
from django.db import transaction

from gymwright.commands import DatabaseCommand
from gymwright.errors import DomainError
from packs import archive, services
from packs.models import PackVersion, TaskPack


class Command(DatabaseCommand):
    help = (
        "Build the next version of a task pack from the selected approved task versions (all approved "
        "tasks when no selector is given), synchronously, and write the archive."
    )
    # A batch job that touches no URL or template: the system checks would import every URL
    # module (the API schema views among them) for ~0.7 s per build; `manage.py check` and the
    # web process still run them.
    requires_system_checks = []

    def add_base_argument(self, parser, *args, **kwargs):
        if "--version" not in args:  # --version is the pack's version here, not Django's
            super().add_base_argument(parser, *args, **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("pack_slug")
        parser.add_argument("--environment", help="only tasks of this environment (slug)")
        parser.add_argument("--tag", action="append", default=[], help="only tasks with this tag (repeatable)")
        parser.add_argument("--task", action="append", default=[], help="this task (slug; repeatable)")
        parser.add_argument("--version", help="the version X.Y.Z (default: proposed from the changes)")
        parser.add_argument("--test-ratio", type=float, default=0.1, help="share of tasks held out as test (0.1)")
        parser.add_argument("--out", required=True, help="where to write the .tar.gz")

    def handle(self, *args, **options):
        slug = options["pack_slug"]
        selection = services.Selection(
            environment=options["environment"],
            tags=tuple(options["tag"]),
            tasks=tuple(options["task"]),
            test_ratio=options["test_ratio"],
        )
        try:
            # One transaction: a pack this command creates is not left behind, empty, by a selection it refuses.
            with transaction.atomic():
                pack = TaskPack.objects.filter(slug=slug).first() or services.pack_create(slug=slug, user=None)
                # The contract builds the next version all the same; the page asks first, this says so.
                pack_version = services.pack_version_start(
                    pack=pack,
                    user=None,
                    selection=selection,
                    version=options["version"],
                    enqueue=False,
                    on_unchanged=lambda unchanged: self.stderr.write(f"note: {unchanged.message}"),
                )
        except DomainError as exc:
            raise CommandError(exc.message, returncode=1)
        pack_version = services.pack_version_build(pack_version_id=pack_version.pk)
        if pack_version.status != PackVersion.Status.READY:
            raise CommandError(
                f"{pack.slug} {pack_version.version} failed: {pack_version.failure_reason}", returncode=1
            )
        with default_storage.open(pack_version.archive.name, "rb") as source, open(options["out"], "wb") as target:
            shutil.copyfileobj(source, target, 1 << 20)
        counts = pack_version.manifest["counts"]
        empty = archive.empty_split(counts)
        if empty:  # as the page's Check says before a build
            both = archive.test_ratio_filling_both(pack_version.entries.values_list("task_slug", flat=True))
            self.stderr.write(
                f"note: the {empty} split is empty (a trainer's validation set cannot be)"
                + (f": --test-ratio {both} puts tasks in both" if both else "")
            )
        self.stdout.write(
            f"{pack.slug} {pack_version.version}: {counts['tasks']} tasks ({counts['train']} train, "
            f"{counts['test']} test), sha256 {pack_version.sha256}, content_sha256 "
            f"{pack_version.content_sha256} -> {options['out']}"
        )
