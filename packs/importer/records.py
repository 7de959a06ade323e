"""What an import reads into and reports: candidates, rejections, the report, and the errors that fail a whole source."""

from __future__ import annotations

import dataclasses

from gymwright.errors import DomainError

TASK_KEYS = ("title", "prompt", "rubric", "solution", "files", "tags", "metadata", "examples")


DEFAULT_ENVIRONMENT = "imported"


class ImportFailed(DomainError):
    """The source as a whole cannot be imported (nothing was)."""

    code = "import_failed"


class ImportTooLarge(ImportFailed):
    """The import reads more than IMPORT_MAX_BYTES: the whole source is refused, never one task of it."""


@dataclasses.dataclass
class Candidate:
    where: str
    slug: str
    content: dict
    environment: tuple[str, int, dict] | None  # (slug, number, spec); None: the import's environment
    number: int = 1
    environment_slug: str | None = None  # a simple row's existing environment (its latest version)
    files: dict[str, bytes] = dataclasses.field(default_factory=dict)  # sha256 → bytes found in the source
    note: str = ""  # said on the task's report line (a setting this server runs otherwise than the source asks)


@dataclasses.dataclass
class Rejection:
    where: str
    message: str
    pointer: str | None = None
    slug: str | None = None


@dataclasses.dataclass
class ReportLine:
    where: str
    status: str  # created, new_version, unchanged, rejected (dry run: would_create, would_add_version)
    task: str | None = None
    version: int | None = None
    message: str = ""
    pointer: str | None = None

    def as_dict(self) -> dict:
        # not dataclasses.asdict, which deep-copies every value (a bulk request reports 1,000 lines)
        return {name: value for name in _REPORT_FIELDS if (value := getattr(self, name)) not in (None, "")}

    @property
    def status_label(self) -> str:
        """The status in words ("would create")."""
        return self.status.replace("_", " ")

    def text(self) -> str:
        if self.status == "rejected":
            where = f"{self.pointer}: " if self.pointer else ""
            return f"{self.where}: rejected{' ' + self.task if self.task else ''}: {where}{self.message}"
        return f"{self.where}: {self.status_label} {self.task} v{self.version}" + (
            f" ({self.message})" if self.message else ""
        )


_REPORT_FIELDS = tuple(field.name for field in dataclasses.fields(ReportLine))


@dataclasses.dataclass
class ImportReport:
    lines: list[ReportLine]
    dry_run: bool
    # Where the created and changed tasks went: [{"environment", "tasks", "new"}], "new" for one this import makes
    # (a row without an environment, and no environment given, goes to DEFAULT_ENVIRONMENT).
    environments: list[dict] = dataclasses.field(default_factory=list)

    @property
    def rejected(self) -> int:
        return sum(1 for line in self.lines if line.status == "rejected")

    @property
    def imported(self) -> int:
        return len(self.lines) - self.rejected

    def as_dict(self) -> dict:
        return {
            "dry_run": self.dry_run,
            "imported": self.imported,
            "rejected": self.rejected,
            "environments": self.environments,
            "rows": [line.as_dict() for line in self.lines],
        }

    def environments_text(self) -> str:
        """e.g. "environment imported (new): 3 tasks"; "" when no task was created or changed."""
        return "; ".join(
            f"environment {item['environment']}{' (new)' if item['new'] else ''}: {item['tasks']} "
            f"task{'s' if item['tasks'] != 1 else ''}"
            for item in self.environments
        )
