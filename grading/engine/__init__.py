"""Gymwright's grading engine: rubric/task/grade formats, validation, checks, scoring, the LLM judge.

Pure Python (pydantic, openai, httpx, pandas, openpyxl, rapidfuzz, regex); never imports
Django or the Django apps. See docs/internals.md for the contract and
docs/formats.md for the formats.
"""

from .judge import JudgeClient, JudgeConfig, JudgeEndpoint, JudgeRequest, JudgeResult
from .models import (
    CHECK_KINDS,
    GRADE_SCHEMA,
    RUBRIC_SCHEMA,
    TASK_SCHEMA,
    CheckGrade,
    Environment,
    FileRef,
    Grade,
    Rubric,
    Task,
    flat_checks,
)
from .sandbox import CheckSandbox, ExecResult
from .schema import canonical_json, canonical_json_exact, content_sha256, json_schema
from .scoring import grade
from .validation import Issue, SpecError, parse_rubric, parse_task, validate_document, validate_rubric, validate_task

__all__ = [
    "CHECK_KINDS",
    "GRADE_SCHEMA",
    "RUBRIC_SCHEMA",
    "TASK_SCHEMA",
    "CheckGrade",
    "CheckSandbox",
    "Environment",
    "ExecResult",
    "FileRef",
    "Grade",
    "Issue",
    "JudgeClient",
    "JudgeConfig",
    "JudgeEndpoint",
    "JudgeRequest",
    "JudgeResult",
    "Rubric",
    "SpecError",
    "Task",
    "canonical_json",
    "canonical_json_exact",
    "content_sha256",
    "flat_checks",
    "grade",
    "json_schema",
    "parse_rubric",
    "parse_task",
    "validate_document",
    "validate_rubric",
    "validate_task",
]
