"""`manage.py check_dataset PATH [--json FILE] [--task-timeout S] [--time-limit S] [--probes NAME,...]`
(docs/formats.md, "Command-line contract"): the health report of a dataset (a folder or .tar.gz of Harbor or
Terminal-Bench tasks, or anything `import_tasks` reads), its gates run on the docker backend, nothing stored.
One line per task: healthy, broken or not runnable here, with the reason. Exit 0 when every task is healthy,
1 when any is broken or could not be checked here, 2 for usage errors (and no docker engine)."""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from gymwright.errors import DomainError
from packs import importer
from packs.health import runner


class Command(BaseCommand):
    help = (
        "Check a dataset's health: run every task's gates (oracle, nop, hack and verifier probes) on the docker "
        "backend and print one line per task: healthy, broken or not runnable here, with the reason."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--json", dest="json_path", help="write the whole report as JSON to this file")
        parser.add_argument(
            "--task-timeout",
            type=float,
            default=float(settings.DATASET_CHECK_TASK_S),
            help="seconds all the rollouts of one task may take together (GYMWRIGHT_DATASET_CHECK_TASK_S)",
        )
        parser.add_argument(
            "--time-limit",
            type=float,
            default=float(settings.DATASET_CHECK_TOTAL_S),
            help="seconds for the whole dataset; the tasks past it are reported as not checked",
        )
        parser.add_argument(
            "--probes",
            help="only these hack and verifier probes (names without `hack:`, comma-separated); default: every "
            "probe that applies",
        )

    def handle(self, *args, **options):
        path = Path(options["path"])
        if not path.exists():
            raise CommandError(f"{path}: no such file or folder", returncode=2)
        if not all(math.isfinite(value) and value > 0 for value in (options["task_timeout"], options["time_limit"])):
            raise CommandError("--task-timeout and --time-limit must be positive numbers of seconds", returncode=2)
        hacks = None
        if options["probes"] is not None:
            hacks = frozenset(
                name.strip().removeprefix("hack:") for name in options["probes"].split(",") if name.strip()
            )
            if problem := runner.probe_names_problem(hacks):
                raise CommandError(f"--probes {problem}", returncode=2)
        limits = runner.HealthLimits(task_s=options["task_timeout"], total_s=options["time_limit"], hacks=hacks)
        backend = _docker_backend()
        with tempfile.TemporaryDirectory(prefix="gymwright-check-") as scratch:
            try:
                subjects = [
                    runner.rejected_entry(item)
                    if isinstance(item, importer.Rejection)
                    else runner.subject_from_candidate(item)
                    for item in importer.source_candidates(path, Path(scratch))
                ]
            except importer.ImportFailed as exc:
                raise CommandError(exc.message, returncode=2 if not isinstance(exc, importer.ImportTooLarge) else 1)
            except DomainError as exc:
                raise CommandError(exc.message, returncode=2)

            def show(entry: dict) -> None:
                self.stdout.write(runner.summary_line(entry))
                sys.stdout.flush()

            entries = runner.check_subjects(subjects, backend=backend, limits=limits, on_entry=show)
        document = runner.report_document(entries, source=path.name, limits=limits)
        counts = document["counts"]
        self.stdout.write(
            f"{counts['healthy']} healthy, {counts['broken']} broken, {counts['not_runnable']} not runnable here"
        )
        if options["json_path"]:
            Path(options["json_path"]).write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
        if counts["broken"] or counts["not_runnable"]:
            sys.stdout.flush()
            raise CommandError(f"{counts['broken']} broken, {counts['not_runnable']} not runnable here", returncode=1)


def _docker_backend():
    from sandbox.runtime import SandboxError
    from sandbox.runtime.backends import get_backend
    from sandbox.worker import _backend_options

    try:
        backend = get_backend("docker", **_backend_options("docker"))
        backend.client.ping()
    except (SandboxError, Exception) as exc:  # noqa: BLE001 - any failure here means no engine to run on
        raise CommandError(
            f"the dataset check runs on the docker backend, and there is none here: {exc} (set DOCKER_HOST, or "
            "start dockerd)",
            returncode=2,
        ) from None
    return backend
