"""`manage.py export_rubrics --format healthbench|rar [--task SLUG]... [--tag T]... [--environment E]
[--approved] [--out FILE]` (docs/formats.md, "HealthBench and RaR rubrics"): one JSONL row per task, its
latest version (or, with --approved, the version a reviewer approved, and --tag its tags), in task-id order.
Exit 0, or 1 when no task matches; a check the format has no place for (any kind but llm_judge) is left out
and named on stderr."""

from __future__ import annotations

import json

from django.core.management.base import CommandError

from authoring.models import Task
from authoring.selectors import task_filter
from gymwright.commands import DatabaseCommand
from packs.importer.rubric_formats import EXPORTERS, FORMATS


class Command(DatabaseCommand):
    help = "Write the selected tasks' rubrics as HealthBench or RaR JSONL rows."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--format", required=True, choices=FORMATS)
        parser.add_argument("--task", action="append", default=[], help="this task (slug; repeatable)")
        parser.add_argument("--tag", action="append", default=[], help="only tasks with this tag (repeatable)")
        parser.add_argument("--environment", help="only tasks of this environment (slug)")
        parser.add_argument("--approved", action="store_true", help="the approved version of approved tasks")
        parser.add_argument("--out", default="-", help="where to write the .jsonl (default: standard output)")

    def handle(self, *args, **options):
        tasks = Task.objects.exclude(status=Task.Status.ARCHIVED).order_by("slug")
        if options["task"]:
            tasks = tasks.filter(slug__in=options["task"])
        # The task list's filters: with --approved a tag is one of the approved version's, as a lab member sees it.
        tasks = task_filter(tasks, environment=options["environment"] or "")
        for tag in options["tag"]:
            tasks = task_filter(tasks, tag=tag, approved=options["approved"])
        field = "approved_version" if options["approved"] else "latest_version"
        # A tag name is unique: each tag's join matches a task at most once, so no DISTINCT over the versions' specs.
        tasks = tasks.filter(**{f"{field}__isnull": False}).select_related(field)
        if options["task"]:
            missing = sorted(set(options["task"]) - set(tasks.values_list("slug", flat=True)))
            if missing:
                raise CommandError(f"no such task{'s' if len(missing) > 1 else ''}: {', '.join(missing)}", returncode=1)
        exporter = EXPORTERS[options["format"]]
        out = None if options["out"] == "-" else open(options["out"], "w", encoding="utf-8")
        written = 0
        try:
            for task in tasks.iterator(chunk_size=500):
                row, skipped = exporter(getattr(task, field).spec, task.slug)
                if not row.get("rubrics" if options["format"] == "healthbench" else "rubric"):
                    self.stderr.write(f"{task.slug}: skipped, no llm_judge check")
                    continue
                if skipped:
                    self.stderr.write(f"{task.slug}: left out (not llm_judge): {', '.join(map(str, skipped))}")
                line = json.dumps(row, ensure_ascii=False)
                if out is None:
                    self.stdout.write(line)
                else:
                    out.write(line + "\n")
                written += 1
        finally:
            if out is not None:
                out.close()
        if not written:
            raise CommandError("no task to export (none matched, or none has an llm_judge check)", returncode=1)
        self.stderr.write(f"{written} task{'s' if written != 1 else ''} written as {options['format']} rows")
