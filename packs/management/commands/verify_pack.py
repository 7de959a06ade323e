"""`manage.py verify_pack FILE.tar.gz`: check the archive and every sha256 in its manifest."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from packs import archive


class Command(BaseCommand):
    help = "Check a task pack archive and every sha256 in its manifest. Exit 0, or 1 listing each mismatch."

    def add_arguments(self, parser):
        parser.add_argument("archive")

    def handle(self, *args, **options):
        if Path(options["archive"]).is_dir():
            raise CommandError(
                f"{options['archive']} is a folder: verify_pack checks the pack's .tar.gz as it was "
                "downloaded (an unpacked pack's files are listed with their sha256 in its "
                "manifest.json: `sha256sum` checks them)",
                returncode=1,
            )
        try:
            result = archive.verify_pack(options["archive"])
        except OSError as exc:
            raise CommandError(f"cannot read {options['archive']}: {exc}", returncode=1)
        if not result.ok:
            for problem in result.problems:
                self.stdout.write(problem)
            raise CommandError(f"{options['archive']}: {len(result.problems)} problem(s)", returncode=1)
        manifest = result.manifest
        self.stdout.write(
            f"ok: {manifest.get('slug')} {manifest.get('version')}, {result.files_checked} files, "
            f"content_sha256 {manifest.get('content_sha256')}"
        )
