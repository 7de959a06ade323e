"""Writes for grading: storing grades, dry runs, reviewers' judge labels.

Every function here is keyword-only, validates its input and raises DomainError
(never a bare exception) for anything a user can get wrong.
"""

from __future__ import annotations

import math
from typing import Any

from django.db import transaction

from gymwright.errors import DomainError
from grading.models import CheckResult, Grade

GRADE_SCHEMA = "gymwright.grade/v1"
# Keys that may hold a group's child check grades in a grade document.
_CHILD_KEYS = ("checks", "children")


def _engine_document(grade: Any) -> dict:
    if hasattr(grade, "to_document"):
        return grade.to_document()
    return grade.model_dump(mode="json", by_alias=True)


def _grade_document(grade: Any) -> dict:
    """The gymwright.grade/v1 dict of an engine Grade (pydantic) or of an already-plain dict."""
    if isinstance(grade, dict):
        document = grade
        try:
            from grading.engine import Grade as EngineGrade
        except ImportError:  # the engine not there yet: the shape checks below still hold
            EngineGrade = None
        if EngineGrade is not None:
            from pydantic import ValidationError

            try:
                document = _engine_document(EngineGrade.model_validate(grade))
            except ValidationError as exc:
                details = [{"pointer": "".join(f"/{part}" for part in error["loc"]), "message": error["msg"]}
                           for error in exc.errors()]
                summary = "; ".join(f"{d['pointer']}: {d['message']}" for d in details[:5])
                raise DomainError(f"Not a valid {GRADE_SCHEMA} document: {summary}", code="invalid_grade",
                                  details=details) from exc
    elif hasattr(grade, "model_dump"):
        document = _engine_document(grade)
    else:
        raise DomainError(f"Expected a grade, got {type(grade).__name__}", code="invalid_grade")
    if document.get("schema", GRADE_SCHEMA) != GRADE_SCHEMA:
        raise DomainError(f"Expected a {GRADE_SCHEMA} document, got {document.get('schema')!r}",
                          code="invalid_grade")
    document.setdefault("schema", GRADE_SCHEMA)
    return document


def _number(document: dict, key: str, pointer: str) -> float:
    value = document.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DomainError(f"{pointer}: expected a finite number, got {value!r}", code="invalid_grade",
                          details=[{"pointer": pointer, "message": "expected a finite number"}])
    return float(value)


def _optional_number(document: dict, key: str, pointer: str) -> float | None:
    return None if document.get(key) is None else _number(document, key, pointer)


def _flatten_checks(checks: list, *, pointer: str, parent: str = "", depth: int = 0) -> list[tuple[dict, str, int, str]]:
    """Depth-first (check dict, parent id, depth, pointer) for every check and group child."""
    rows = []
    for index, check in enumerate(checks or []):
        check_pointer = f"{pointer}/{index}"
        if not isinstance(check, dict):
            raise DomainError(f"{check_pointer}: expected an object", code="invalid_grade",
                              details=[{"pointer": check_pointer, "message": "expected an object"}])
        rows.append((check, check.get("parent") or parent, depth, check_pointer))
        for key in _CHILD_KEYS:
            if isinstance(check.get(key), list):
                rows += _flatten_checks(check[key], pointer=f"{check_pointer}/{key}", parent=str(check.get("id", "")),
                                        depth=depth + 1)
    # A flat list with "parent" keys: depth follows the parent chain.
    depths = {check.get("id"): d for check, _, d, _ in rows}
    result = []
    for check, parent_id, d, check_pointer in rows:
        if parent_id and d == 0:
            d = depths.get(parent_id, 0) + 1
            depths[check.get("id")] = d
        result.append((check, parent_id, d, check_pointer))
    return result


def _check_result(grade: Grade, position: int, check: dict, parent_id: str, depth: int, pointer: str) -> CheckResult:
    check_id = check.get("id")
    if not isinstance(check_id, str) or not check_id:
        raise DomainError(f"{pointer}/id: every check needs an id", code="invalid_grade",
                          details=[{"pointer": f"{pointer}/id", "message": "missing"}])
    status = check.get("status")
    if status not in CheckResult.Status.values:
        raise DomainError(f"{pointer}/status: expected scored or unscored, got {status!r}", code="invalid_grade",
                          details=[{"pointer": f"{pointer}/status", "message": "expected scored or unscored"}])
    score = _optional_number(check, "score", f"{pointer}/score")
    if status == CheckResult.Status.SCORED and score is None:
        raise DomainError(f"{pointer}/score: a scored check needs a score", code="invalid_grade",
                          details=[{"pointer": f"{pointer}/score", "message": "missing"}])
    duration = check.get("duration_ms")
    return CheckResult(
        grade=grade,
        position=position,
        depth=depth,
        parent_check_id=parent_id or "",
        check_id=check_id,
        kind=str(check.get("kind") or ""),
        title=str(check.get("title") or "")[:300],
        status=status,
        score=score,
        points=_number(check, "points", f"{pointer}/points"),
        awarded=_optional_number(check, "awarded", f"{pointer}/awarded"),
        required=bool(check.get("required", False)),
        explanation=str(check.get("explanation") or check.get("reason") or ""),
        votes=list(check.get("votes") or []),
        duration_ms=int(duration) if isinstance(duration, (int, float)) and duration >= 0 else None,
    )


@transaction.atomic
def grade_record(*, grade: Any, task_version=None, source: str, user=None, rollout_id: int | None = None) -> Grade:
    """Store a grade (an engine `Grade` or its gymwright.grade/v1 dict) with one row per check.

    The numbers are stored exactly as the engine computed them; nothing is re-scored here.
    """
    if source not in Grade.Source.values:
        raise DomainError(f"Unknown grade source {source!r}", code="invalid_grade")
    document = _grade_document(grade)
    reward = _number(document, "reward", "/reward")
    if not 0 <= reward <= 1:
        raise DomainError("/reward: must be within [0, 1]", code="invalid_grade",
                          details=[{"pointer": "/reward", "message": "must be within [0, 1]"}])
    checks = document.get("checks")
    if not isinstance(checks, list):
        raise DomainError("/checks: expected a list", code="invalid_grade",
                          details=[{"pointer": "/checks", "message": "expected a list"}])
    flat = _flatten_checks(checks, pointer="/checks")
    seen: set[str] = set()
    for check, _, _, pointer in flat:
        if check.get("id") in seen:
            raise DomainError(f"{pointer}/id: duplicate check id {check.get('id')!r}", code="invalid_grade",
                              details=[{"pointer": f"{pointer}/id", "message": "duplicate id"}])
        seen.add(check.get("id"))

    stored = Grade(
        task_version=task_version,
        rollout_id=rollout_id,
        source=source,
        reward=reward,
        earned=_number(document, "earned", "/earned"),
        max=_number(document, "max", "/max"),
        passed=bool(document.get("passed")),
        gated=bool(document.get("gated", False)),
        complete=bool(document.get("complete", True)),
        document=document,
        created_by=user if user is not None and getattr(user, "is_authenticated", False) else None,
    )
    stored.full_clean()
    stored.save()
    rows = [_check_result(stored, position, check, parent, depth, pointer)
            for position, (check, parent, depth, pointer) in enumerate(flat)]
    CheckResult.objects.bulk_create(rows)
    return stored
