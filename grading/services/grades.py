"""Storing grades: the engine's Grade as a Grade row with one CheckResult per check."""

from __future__ import annotations

import math
from typing import Any

from django.db import transaction
from pydantic import ValidationError

from grading import engine
from grading.engine import scoring
from grading.engine.text import storable, storable_text
from grading.models import CheckResult, Grade
from gymwright.errors import DomainError


def _engine_document(grade: engine.Grade) -> dict:
    return grade.to_document()


def _invalid_grade(pointer: str, message: str) -> DomainError:
    return DomainError(
        f"Not a valid {engine.GRADE_SCHEMA} document: {pointer}: {message}",
        code="invalid_grade",
        details=[{"pointer": pointer, "message": message}],
    )


def grade_from_document(document: Any) -> engine.Grade:
    """The engine's typed Grade for a gymwright.grade/v1 dict (an import, a test), or DomainError
    with the JSON pointer of each problem. Grades the engine made need no such check."""
    if not isinstance(document, dict):
        raise DomainError(f"Expected a grade, got {type(document).__name__}", code="invalid_grade")
    try:
        grade = engine.Grade.model_validate(document)
    except ValidationError as exc:
        details = [
            {"pointer": "".join(f"/{part}" for part in error["loc"]), "message": error["msg"]} for error in exc.errors()
        ]
        summary = "; ".join(f"{d['pointer']}: {d['message']}" for d in details[:5])
        raise DomainError(
            f"Not a valid {engine.GRADE_SCHEMA} document: {summary}", code="invalid_grade", details=details
        ) from None
    for name in ("earned", "max"):
        if not math.isfinite(getattr(grade, name)):
            raise _invalid_grade(f"/{name}", "expected a finite number")
    seen: set[str] = set()
    for check, _, _, pointer in engine.flat_checks(grade.checks):
        if check.id in seen:
            raise _invalid_grade(f"{pointer}/id", f"duplicate check id {check.id!r}")
        seen.add(check.id)
    return grade


def _current_rule(grade: engine.Grade, task_version) -> tuple[engine.Grade, int]:
    """The grade, stored as given, and the scoring rule its totals follow. A document from before
    `reward_upper` (an import of an old grade): complete, both rules agree (its upper bound is its reward);
    incomplete, it is rule 1 (the migration's `scoring.retotal` is what totals such grades again)."""
    if grade.reward_upper is not None:
        return grade, scoring.SCORING_RULE
    if grade.complete:
        return grade.model_copy(update={"reward_upper": grade.reward}), scoring.SCORING_RULE
    return grade, 1


@transaction.atomic
def grade_record(
    *, grade: engine.Grade, task_version=None, source: str, user=None, rollout_id: int | None = None
) -> Grade:
    """Store the engine's Grade with one row per check, exactly as the engine computed it (its text made storable:
    an explanation may quote what the agent wrote, a NUL or a lone surrogate included)."""
    if source not in Grade.Source.values:
        raise DomainError(f"Unknown grade source {source!r}", code="invalid_grade")
    if not isinstance(grade, engine.Grade):
        raise DomainError(
            f"Expected the engine's Grade, got {type(grade).__name__}; use grade_from_document for a dict",
            code="invalid_grade",
        )
    grade, rule = _current_rule(grade, task_version)
    stored = Grade(
        task_version=task_version,
        rollout_id=rollout_id,
        source=source,
        reward=grade.reward,
        reward_upper=grade.reward_upper,
        earned=grade.earned,
        max=grade.max,
        passed=grade.passed,
        gated=grade.gated,
        complete=grade.complete,
        scoring_rule=rule,
        document=storable(grade.to_document()),
        created_by=user if user is not None and getattr(user, "is_authenticated", False) else None,
    )
    # The related rows are objects the caller holds; checking that they exist costs a query each.
    # The table's constraints are the database's to enforce; here only the fields' own rules.
    stored.full_clean(exclude=["task_version", "created_by"], validate_unique=False, validate_constraints=False)
    stored.save()
    CheckResult.objects.bulk_create(
        [
            CheckResult(
                grade=stored,
                position=position,
                depth=depth,
                parent_check_id=parent,
                check_id=check.id,
                kind=check.kind,
                title="",
                status=check.status,
                score=check.score,
                points=check.points,
                awarded=check.awarded,
                required=check.required,
                explanation=storable_text(check.explanation),
                votes=storable(list(check.votes or [])),
                duration_ms=check.duration_ms,
            )
            for position, (check, parent, depth, _) in enumerate(engine.flat_checks(grade.checks))
        ]
    )
    return stored
