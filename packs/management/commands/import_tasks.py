"""`manage.py import_tasks PATH [--dry-run] [--environment SLUG] [--approve-as USERNAME] [--no-health-check]`
(docs/formats.md, "Command-line contract"). Exit 0 when everything was imported, 1 when anything was
rejected (or the file failed as a whole), 2 for usage errors."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.urls import reverse

from gymwright.commands import DatabaseCommand
from gymwright.errors import DomainError, NotAllowed
from packs import importer


class Command(DatabaseCommand):
    help = (
        "Import a tasks.jsonl, a CSV/JSONL/Parquet table, or a folder / .tar.gz of Harbor or Terminal-Bench "
        "tasks; print one line per task or rejected row."
    )
    # A batch job that touches no URL or template, as export_pack: the system checks would import
    # every URL module (the API schema views among them), ~0.45 s of a 10,000-task import's 6 s;
    # `manage.py check` and the web process still run them.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--dry-run", action="store_true", help="show what would be created; write nothing")
        parser.add_argument("--environment", help="environment (slug) for table rows (default: 'imported')")
        parser.add_argument(
            "--approve-as", help="an admin's username: record each imported version as approved by them"
        )
        parser.add_argument(
            "--as-user", help="the author of the imported tasks (default: the --approve-as admin, else the first admin)"
        )
        parser.add_argument(
            "--no-health-check",
            action="store_true",
            help="queue no health report for imported Harbor / Terminal-Bench tasks",
        )

    def handle(self, *args, **options):
        # Django and the apps are loaded: the garbage collector need not walk them again while the
        # import makes (and drops) tens of thousands of documents (~10 % of the import's CPU).
        gc.freeze()
        users = get_user_model().objects
        approve_as = None
        if options["approve_as"]:
            approve_as = users.filter(username=options["approve_as"]).first()
            if approve_as is None:
                raise CommandError(f"--approve-as: there is no user {options['approve_as']!r}", returncode=2)
        if options["as_user"]:
            author = users.filter(username=options["as_user"]).first()
            if author is None:
                raise CommandError(f"--as-user: there is no user {options['as_user']!r}", returncode=2)
        else:
            author = (
                approve_as
                or users.filter(is_superuser=True).order_by("pk").first()
                or users.filter(groups__name="admin").order_by("pk").first()
            )
            if author is None:
                raise CommandError("no admin user to import as; create one or pass --as-user", returncode=2)
        try:
            report = importer.tasks_import(
                path=options["path"],
                user=author,
                environment=options["environment"],
                dry_run=options["dry_run"],
                approve_as=approve_as,
            )
        except importer.ImportFailed as exc:
            raise CommandError(exc.message, returncode=1)
        except NotAllowed as exc:
            raise CommandError(exc.message, returncode=2)
        except DomainError as exc:
            raise CommandError(exc.message, returncode=2 if exc.code in ("usage", "invalid") else 1)
        for line in report.lines:
            self.stdout.write(line.text())
        unchanged = sum(1 for line in report.lines if line.status == "unchanged")
        summary = (
            f"{'dry run: ' if report.dry_run else ''}{report.imported} "
            f"{'to import' if report.dry_run else 'imported'}"
            + (f" ({unchanged} unchanged)" if unchanged else "")
            + f", {report.rejected} rejected"
            + (f", approved as {approve_as.get_username()}" if approve_as and not report.dry_run else "")
        )
        self.stdout.write(summary)
        if report.environments:
            self.stdout.write(report.environments_text())
        if not options["no_health_check"]:
            from packs.services import dataset_check_start

            check = dataset_check_start(report=report, user=author, source=Path(options["path"]).name)
            if check is not None:
                self.stdout.write(
                    f"health report: {reverse('packs:dataset_check', args=[check.pk])} ({check.total} tasks, "
                    "queued: a worker runs their gates on the docker backend; `manage.py check_dataset PATH` runs "
                    "them here)"
                )
        if report.rejected:
            sys.stdout.flush()
            raise CommandError(f"{report.rejected} rejected", returncode=1)
