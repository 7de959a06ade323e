"""What the project's management commands share."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection


def database_described() -> str:
    """The database this process uses, as a person would find it: a SQLite file's path (under
    GYMWRIGHT_DATA_DIR by default), or a server's host and database name (DATABASE_URL)."""
    database = settings.DATABASES["default"]
    if connection.vendor == "sqlite":
        return f"the SQLite file {database['NAME']} (GYMWRIGHT_DATA_DIR={settings.DATA_DIR}; or set DATABASE_URL)"
    return f"the database {database.get('NAME')!r} on {database.get('HOST') or 'localhost'} (DATABASE_URL)"


def _missing_table(exc: DatabaseError) -> bool:
    text = str(exc)
    return "no such table" in text or ("relation " in text and "does not exist" in text)


class DatabaseCommand(BaseCommand):
    """A command that reads the project's tables: run on a database that has none (a new data folder, another
    DATABASE_URL than the server's), it says which database it opened and how to make or find the right one,
    instead of a traceback ending in "no such table"."""

    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except DatabaseError as exc:
            if not _missing_table(exc):
                raise
            raise CommandError(
                f"{database_described()} has no Gymwright tables ({str(exc).splitlines()[0]}). "
                "Point this command at the database the server uses, or run `manage.py migrate` "
                "to make a new one.",
                returncode=1,
            ) from exc
