"""What a build would make, before anything is written: the approved task versions a selection picks, the next
version number (semver from the changes against the last ready version) and the build plan."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from accounts import permissions
from authoring.models import Task, TaskVersion
from gymwright.errors import DomainError, NotAllowed
from packs import archive
from packs.models import PackVersion, TaskPack


def selected_versions(
    *, environment: str | None = None, tags: list[str] | tuple = (), tasks: list[str] | tuple = ()
) -> list[tuple[int, str, int]]:
    """(pk, task slug, number) of the approved TaskVersion of every selected task (all approved tasks without
    a selector), by slug. The environment and tags are the approved version's own: a later draft that
    retags a task or moves it to another environment does not change what a pack selects."""
    heads = Task.objects.filter(approved_version__isnull=False).exclude(status=Task.Status.ARCHIVED)
    if tasks:
        heads = heads.filter(slug__in=list(tasks))
    versions = TaskVersion.objects.filter(pk__in=heads.values("approved_version_id"))
    if environment:
        versions = versions.filter(environment_version__environment__slug=environment)
    if not tags:
        return list(versions.order_by("task__slug").values_list("pk", "task__slug", "number"))
    # Tags live in the version's document; containment on a JSON array is PostgreSQL's alone, and a
    # pack's candidates are read once, so the document's tag list is compared here.
    wanted = set(tags)
    return [
        (pk, slug, number)
        for pk, slug, number, have in versions.order_by("task__slug").values_list(
            "pk", "task__slug", "number", "spec__tags"
        )
        if isinstance(have, list) and wanted <= set(have)
    ]


SELECTION_PROBLEMS_SHOWN = 50  # a list of thousands of unknown names is answered with the first ones


def _selection_check(*, environment, tags, tasks, reads_drafts: bool = True) -> None:
    """Every task named in an explicit list is packable: it exists, a reviewer approved a version of it and it is
    not archived. Each one that is not is refused at its pointer (/tasks/N), all of them at once: a named task
    is never left out without a word (an archived one was). A member who reads approved work only (lab) is told
    "no approved task" alike for a task that does not exist and one that was never approved, as its page answers
    them both 404: the answer must not tell which drafts exist."""
    if not tasks:
        return
    known = {
        slug: (approved, status)
        for slug, approved, status in Task.objects.filter(slug__in=list(tasks)).values_list(
            "slug", "approved_version_id", "status"
        )
    }
    problems = []  # (pointer, message at the pointer, the sentence)
    for index, slug in enumerate(tasks):
        approved, status = known.get(slug, (None, None))
        if not reads_drafts and approved is None:
            problems.append((f"/tasks/{index}", "no approved task", f"There is no approved task {slug!r}"))
        elif slug not in known:
            problems.append((f"/tasks/{index}", "no such task", f"There is no task {slug!r}"))
        elif status == Task.Status.ARCHIVED:
            problems.append((f"/tasks/{index}", "archived", f"Task {slug!r} is archived"))
        elif approved is None:
            problems.append((f"/tasks/{index}", "not approved", f"Task {slug!r} has no approved version"))
    if problems:
        shown = problems[:SELECTION_PROBLEMS_SHOWN]
        more = f"; and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        message = (
            f"{problems[0][2]}."
            if len(problems) == 1
            else f"{len(problems)} of the tasks named cannot be packed: "
            + "; ".join(f"{pointer}: {sentence}" for pointer, _, sentence in shown)
            + more
            + "."
        )
        raise DomainError(message, details=[{"pointer": pointer, "message": text} for pointer, text, _ in shown])


def parse_semver(text: str, *, pointer: str = "/version") -> tuple[int, int, int]:

    match = re.match(r"^(0|[1-9]\d{0,5})\.(0|[1-9]\d{0,5})\.(0|[1-9]\d{0,5})$", str(text or ""))
    if not match:
        raise DomainError(
            f"{text!r} is not a version like 1.2.3.", details=[{"pointer": pointer, "message": "expected X.Y.Z"}]
        )
    return tuple(int(part) for part in match.groups())  # type: ignore[return-value]


def _bump(version: tuple[int, int, int], kind: str) -> tuple[int, int, int]:
    major, minor, patch = version
    if kind == "major":
        return (major + 1, 0, 0)
    if kind == "minor":
        return (major, minor + 1, 0)
    return (major, minor, patch + 1)


def pack_changes(*, previous: dict[str, int], current: dict[str, int]) -> dict:
    """{added, removed, changed} between two {task slug: task version number} maps."""
    return {
        "added": sorted(set(current) - set(previous)),
        "removed": sorted(set(previous) - set(current)),
        "changed": [
            {"id": slug, "from": previous[slug], "to": current[slug]}
            for slug in sorted(set(previous) & set(current))
            if previous[slug] != current[slug]
        ],
    }


def _previous_ready(pack: TaskPack) -> PackVersion | None:
    return pack.versions.filter(status=PackVersion.Status.READY).first()


def _entry_map(pack_version: PackVersion | None) -> dict[str, int]:
    if pack_version is None:
        return {}
    return dict(pack_version.entries.values_list("task_slug", "task_version__number"))


def _holding_their_number(pack: TaskPack):
    """The versions whose number is taken: ready ones and builds under way (a failed one published nothing)."""
    return pack.versions.exclude(status=PackVersion.Status.FAILED)


def pack_version_propose(
    *, pack: TaskPack, selected: dict[str, int], previous: PackVersion | None
) -> tuple[tuple[int, int, int], dict]:
    """The next version for `selected` ({slug: version number}) and the changes it carries against
    `previous`, the pack's last ready version (`_previous_ready`).

    Removed tasks → major, added → minor, changed (or nothing) → patch, counted from the last
    ready version; never a number a ready or building version already has. A failed version never produced
    an archive, so its number is free again: after a failed 1.0.0 the proposal is 1.0.0.
    """
    changes = pack_changes(previous=_entry_map(previous), current=selected)
    kind = "major" if changes["removed"] else "minor" if changes["added"] else "patch"
    if previous is None:
        proposal = (1, 0, 0)
    else:
        proposal = _bump(previous.semver, kind)
    highest = _holding_their_number(pack).order_by("-major", "-minor", "-patch").first()
    if highest is not None and proposal <= highest.semver:
        proposal = _bump(highest.semver, kind)
    return proposal, changes


@dataclass
class Selection:
    environment: str | None = None
    tags: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    test_ratio: float = 0.1

    def as_dict(self) -> dict:
        return {
            "environment": self.environment,
            "tags": list(self.tags),
            "tasks": list(self.tasks),
            "test_ratio": self.test_ratio,
        }


@dataclass
class BuildPlan:
    """What a build of `selection` would make, before anything is written: its version, task count and the
    changes against the previous ready version (`previous`). `unchanged`: the same task versions split by the
    same ratio as `previous`, so the build would publish the same tasks under a new patch number."""

    version: str
    semver: tuple[int, int, int]
    tasks: int
    changes: dict
    previous: PackVersion | None
    unchanged: bool
    rows: list[tuple[int, str, int]] = field(repr=False, default_factory=list)
    split_by_slug: dict[str, str] = field(repr=False, default_factory=dict)  # by the hash the build uses
    test_ratio_filling_both: float | None = None  # where a split would be empty: a ratio that fills both, if any

    @property
    def splits(self) -> dict:
        """{"train": n, "test": n}"""
        test = sum(1 for split in self.split_by_slug.values() if split == "test")
        return {"train": len(self.split_by_slug) - test, "test": test}

    @property
    def empty_split(self) -> str | None:
        """The split that would hold no task ("test" for a small pack at a small ratio), or None."""
        return archive.empty_split(self.splits)

    def as_dict(self) -> dict:
        return {
            "version": self.version,
            "tasks": self.tasks,
            "splits": self.splits,
            "test_ratio_filling_both": self.test_ratio_filling_both,
            "changes": self.changes,
            "previous": self.previous.version if self.previous else None,
            "unchanged": self.unchanged,
        }


def pack_version_plan(*, pack: TaskPack, user, selection: Selection, version: str | None = None) -> BuildPlan:
    """The build `pack_version_start` would start for `selection` (a dry run: nothing is written), or the
    DomainError it would raise."""
    if user is not None and not permissions.can_build_packs(user):  # None: the command line (manage.py)
        raise NotAllowed("Only lab members and admins can build packs.")
    if not (0 <= selection.test_ratio <= 1):
        raise DomainError(
            "The test ratio must be between 0 and 1.",
            details=[{"pointer": "/test_ratio", "message": "between 0 and 1"}],
        )
    _selection_check(
        environment=selection.environment,
        tags=selection.tags,
        tasks=selection.tasks,
        reads_drafts=user is None or permissions.reads_drafts(user),
    )
    rows = selected_versions(environment=selection.environment, tags=selection.tags, tasks=selection.tasks)
    if not rows:
        raise DomainError(
            "No approved task matches this selection.",
            details=[{"pointer": "/selection", "message": "nothing approved matches"}],
        )
    previous = _previous_ready(pack)
    proposal, changes = pack_version_propose(
        pack=pack, selected={slug: number for _, slug, number in rows}, previous=previous
    )
    if version:
        wanted = parse_semver(version)
        if wanted < proposal:
            raise DomainError(
                f"Version {version} is lower than the proposed {'.'.join(map(str, proposal))}; "
                "a version may be raised, never lowered or reused (a failed one's number is free).",
                details=[{"pointer": "/version", "message": "lower than the proposal"}],
            )
        proposal = wanted
    text = ".".join(str(part) for part in proposal)
    if _holding_their_number(pack).filter(version=text).exists():
        raise DomainError(
            f"{pack.slug} {text} already exists.", details=[{"pointer": "/version", "message": "already used"}]
        )
    unchanged = (
        previous is not None
        and not any(changes.values())
        and (previous.selection or {}).get("test_ratio", 0.1) == selection.test_ratio
    )
    split_by_slug = {slug: archive.split_of(slug, selection.test_ratio) for _, slug, _ in rows}
    plan = BuildPlan(
        version=text,
        semver=proposal,
        tasks=len(rows),
        changes=changes,
        previous=previous,
        unchanged=unchanged,
        rows=rows,
        split_by_slug=split_by_slug,
    )
    if plan.empty_split:
        plan.test_ratio_filling_both = archive.test_ratio_filling_both(split_by_slug)
    return plan


class UnchangedBuild(DomainError):
    """The build would publish the previous version's task versions again, split the same way (`plan`)."""

    def __init__(self, plan: BuildPlan):
        super().__init__(
            f"Nothing changed since {plan.previous.version}: a build would publish the same task "
            f"versions again as {plan.version}.",
            code="unchanged",
            details=[{"pointer": "/selection", "message": "the previous version's tasks"}],
        )
        self.plan = plan
