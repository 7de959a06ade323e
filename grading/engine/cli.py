"""`python -m grading.engine`: schema, validate, grade, examples (the command-line contract of docs/formats.md).

`examples TASK.json` grades the task's example answers and prints each verdict (JSON on stdout,
one line per example on stderr); exit 1 when any is not as expected (incomplete included).

Exit codes: 0 ok; 1 the document is invalid (each problem printed as
`pointer: message`); 2 usage errors, unreadable files, invalid JSON (with line:col).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .judge import JudgeClient, JudgeConfig, max_text_chars_from_env
from .models import TASK_SCHEMA
from .schema import SCHEMA_NAMES, json_schema
from .scoring import grade
from .validation import Issue, SpecError, parse_rubric, parse_task, validate_document


class UsageError(Exception):
    """Bad arguments or an unreadable input: exit 2."""


def _read_text(path: str, what: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {what} {path}: {exc}") from None


def _read_json(path: str, what: str) -> Any:
    text = _read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None


def _print_issues(issues: list[Issue]) -> None:
    for issue in issues:
        pointer = issue.pointer or '""'  # the whole document
        print(f"{pointer}: {issue.message}")


def _schema(args) -> int:
    print(json.dumps(json_schema(args.name), indent=2, ensure_ascii=False))
    return 0


def _validate(args) -> int:
    from .lint import lint_rubric, lint_task

    document = _read_json(args.file, "document")
    issues = validate_document(document)
    if issues:
        _print_issues(issues)
        return 1
    # Warnings do not fail validation: they go to stderr, the verdict stays "ok".
    is_task = isinstance(document, dict) and "rubric" in document
    for warning in lint_task(document) if is_task else lint_rubric(document):
        print(f"warning: {warning.pointer or '/'}: {warning.message}", file=sys.stderr)
    print("ok")
    return 0


def _judge_from_args(args) -> JudgeClient | None:
    if bool(args.judge_base_url) != bool(args.judge_model):
        raise UsageError("--judge-base-url and --judge-model go together")
    extra = {}
    if args.judge_concurrency is not None:
        extra["concurrency"] = args.judge_concurrency
    if args.judge_cache_dir:
        extra["cache_dir"] = args.judge_cache_dir
    try:
        extra["max_text_chars"] = max_text_chars_from_env()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.judge_base_url:
        key = os.environ.get(args.judge_api_key_env or "OPENAI_API_KEY", "")
        config = JudgeConfig(base_url=args.judge_base_url, model=args.judge_model, api_key=key, **extra)
    else:
        config = JudgeConfig.from_env(**extra)
        if config is not None and args.judge_api_key_env:
            config.api_key = os.environ.get(args.judge_api_key_env, "")
    return JudgeClient(config) if config is not None else None


def _grade(args) -> int:
    if bool(args.task) == bool(args.rubric):
        raise UsageError("give exactly one of --task or --rubric")
    if args.workspace and not Path(args.workspace).is_dir():
        raise UsageError(f"--workspace {args.workspace} is not a folder")
    checks_module = None
    try:
        if args.task:
            task = parse_task(_read_json(args.task, "task"))
            rubric, checks_module = task.rubric, task.environment.checks_module
        else:
            document = _read_json(args.rubric, "rubric")
            if isinstance(document, dict) and document.get("schema") == TASK_SCHEMA:
                raise UsageError(f"{args.rubric} is a task; use --task")
            rubric = parse_rubric(document)
    except SpecError as exc:
        _print_issues(exc.issues)
        return 1
    answer = _read_text(args.answer_file, "answer") if args.answer_file else ""
    trajectory = _read_text(args.trajectory_file, "trajectory") if args.trajectory_file else None
    judge = _judge_from_args(args)
    try:
        result = grade(
            rubric,
            answer=answer,
            workspace=args.workspace,
            trajectory=trajectory,
            judge=judge,
            checks_module=checks_module,
        )
    finally:
        if judge is not None:
            judge.close()
    print(json.dumps(result.to_document(), indent=2, ensure_ascii=False))
    return 0


def _examples(args) -> int:
    from .example_answers import grade_examples

    try:
        task = parse_task(_read_json(args.task, "task"))
    except SpecError as exc:
        _print_issues(exc.issues)
        return 1
    judge = _judge_from_args(args)
    try:
        results = grade_examples(task, judge=judge, checks_module=task.environment.checks_module)
    finally:
        if judge is not None:
            judge.close()
    print(
        json.dumps(
            [{**verdict.to_dict(), "grade": document} for verdict, document in results], indent=2, ensure_ascii=False
        )
    )
    for verdict, _ in results:
        print(f"{verdict.name}: {verdict.status.replace('_', ' ')} — {verdict.message}", file=sys.stderr)
    return 0 if all(verdict.ok for verdict, _ in results) else 1


def _judge_arguments(command) -> None:
    command.add_argument("--judge-base-url", help="OpenAI-compatible base URL of the judge")
    command.add_argument("--judge-model", help="the judge model")
    command.add_argument("--judge-api-key-env", help="environment variable holding the judge API key (OPENAI_API_KEY)")
    command.add_argument("--judge-concurrency", type=int, help="judge calls in flight (16)")
    command.add_argument("--judge-cache-dir", help="folder for the judge's verdict cache")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grading.engine", description="Gymwright's grading engine.")
    commands = parser.add_subparsers(dest="command", required=True)

    schema = commands.add_parser("schema", help="print the JSON Schema of a format")
    schema.add_argument("name", choices=SCHEMA_NAMES)
    schema.set_defaults(run=_schema)

    validate = commands.add_parser("validate", help="validate a rubric or task JSON file")
    validate.add_argument("file", help="the JSON file (- for stdin)")
    validate.set_defaults(run=_validate)

    grade_ = commands.add_parser("grade", help="grade an answer against a task's rubric")
    grade_.add_argument("--task", help="a gymwright.task/v1 JSON file")
    grade_.add_argument("--rubric", help="a gymwright.rubric/v1 JSON file (instead of --task)")
    grade_.add_argument("--answer-file", help="the final answer (a text file, - for stdin)")
    grade_.add_argument("--trajectory-file", help="the transcript as text, for trajectory targets")
    grade_.add_argument("--workspace", help="the workspace folder after the rollout")
    _judge_arguments(grade_)
    grade_.set_defaults(run=_grade)

    examples = commands.add_parser("examples", help="grade a task's example answers; exit 1 unless all as expected")
    examples.add_argument("task", help="a gymwright.task/v1 JSON file with `examples`")
    _judge_arguments(examples)
    examples.set_defaults(run=_examples)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
