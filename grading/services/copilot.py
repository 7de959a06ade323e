"""The rubric copilot: draft checks for a task with the configured model, test each one with the real
grader, and hand the author suggestions. Nothing here saves a version: accepted suggestions go into the
editor's rubric and become a version by the editor's normal save.

The model is the judge endpoint named by GYMWRIGHT_COPILOT_MODEL (the default judge when empty); with no
judge endpoint configured the copilot says so and drafts nothing. The pure part (prompts, reading the
replies, the verdict on each check) is `grading.engine.copilot`.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from django.conf import settings

from grading import engine
from grading.endpoints import EndpointConfig, endpoint_config_for, judge_config_for
from grading.engine import copilot as core
from grading.engine.limits import GradeLimits
from grading.models import ModelEndpoint
from gymwright.errors import DomainError

MAX_FILES = 20
ECHO_NAME = "echo of the prompt"
DEADLINE_SETTING = "GYMWRIGHT_COPILOT_DEADLINE_S"


class _Deadline:
    """The time one draft has left. The draft runs in the web request (a sync gunicorn worker), so every model
    call, the grading child and the judge's calls fit in COPILOT_DEADLINE_S (by default under gunicorn's
    timeout): the worker answers, rather than being killed mid-request with the author left a 502."""

    def __init__(self, seconds: float):
        self.ends = time.monotonic() + seconds

    def left(self) -> float:
        return self.ends - time.monotonic()

    def reason(self) -> str:
        return f"the draft's time ({settings.COPILOT_DEADLINE_S:g} s, {DEADLINE_SETTING}) ran out"

    def error(self, what: str) -> DomainError:
        return DomainError(
            f"The copilot stopped at {what}: {self.reason()}. Draft fewer checks, or shorten the prompt and reference.",
            code="copilot_deadline",
            http_status=504,
        )


def copilot_endpoint() -> EndpointConfig | None:
    """The endpoint the copilot drafts with, or None when no judge endpoint is configured."""
    return endpoint_config_for(ModelEndpoint.Role.JUDGE, name=settings.COPILOT_MODEL or None)


def _bounded(text: str, what: str, pointer: str) -> str:
    limit = settings.COPILOT_INPUT_MAX_CHARS
    if len(text) > limit:
        raise DomainError(
            f"The {what} is {len(text):,} characters, over the copilot's limit of {limit:,} "
            "(GYMWRIGHT_COPILOT_INPUT_MAX_CHARS).",
            code="too_long",
            details=[{"pointer": pointer, "message": f"{len(text):,} characters, at most {limit:,}"}],
        )
    return text


class _Model:
    """One chat call at a time to the copilot's endpoint, its failures turned into DomainErrors."""

    def __init__(self, endpoint: EndpointConfig, deadline: _Deadline):
        import openai

        self.endpoint = endpoint
        self.deadline = deadline
        # No retry by the SDK: a retry after a timeout would run past the draft's deadline.
        self.client = openai.OpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key or "not-needed",
            max_retries=0,
            timeout=settings.COPILOT_TIMEOUT_S,
        )
        self.calls = 0
        self.json_mode = endpoint.response_format != ModelEndpoint.ResponseFormat.NONE

    def chat(self, messages: list[dict], *, what: str) -> dict:
        import openai

        # Always a bound on the reply's length, so a model led on by the author's text cannot write (nor the SDK
        # read) more than the copilot would parse; the endpoint's own max_tokens when it is lower.
        params: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": settings.COPILOT_MAX_TOKENS,
        }
        own = self.endpoint.params.get("max_tokens")
        if isinstance(own, int) and not isinstance(own, bool) and 0 < own < settings.COPILOT_MAX_TOKENS:
            params["max_tokens"] = own
        while True:
            if self.json_mode:
                params["response_format"] = {"type": "json_object"}
            else:
                params.pop("response_format", None)
            left = self.deadline.left()
            if left <= 0:
                raise self.deadline.error(what)
            timeout = min(settings.COPILOT_TIMEOUT_S, left)
            self.calls += 1
            try:
                response = self.client.with_options(timeout=timeout).chat.completions.create(**params)
            except openai.APITimeoutError:
                if timeout < settings.COPILOT_TIMEOUT_S:
                    raise self.deadline.error(what) from None
                raise DomainError(
                    f"The copilot model ({self.endpoint.name}) did not answer for {what} within "
                    f"{settings.COPILOT_TIMEOUT_S:g} s (GYMWRIGHT_COPILOT_TIMEOUT_S).",
                    code="model_unavailable",
                    http_status=502,
                ) from None
            except openai.BadRequestError:
                if self.json_mode:  # an endpoint without JSON mode: the prompt alone asks for JSON
                    self.json_mode = False
                    continue
                raise DomainError(
                    f"The copilot model ({self.endpoint.name}) refused the request for {what}.",
                    code="model_refused",
                    http_status=502,
                ) from None
            except openai.OpenAIError as exc:
                raise DomainError(
                    f"The copilot model ({self.endpoint.name}) did not answer for {what}: {type(exc).__name__}.",
                    code="model_unavailable",
                    http_status=502,
                ) from None
            content = response.choices[0].message.content if response.choices else None
            return core.reply_data(content, what=what)

    def close(self) -> None:
        self.client.close()


def rubric_draft(
    *,
    task,
    user,
    prompt: str | None = None,
    reference: str | None = None,
    files: dict[str, str] | None = None,
    existing_rubric: dict | None = None,
    count: int = 12,
    degraded: int = 3,
) -> dict:
    """Draft checks for `task` and test each; the suggestions (nothing is saved but the audit entry).

    `prompt` and `reference` default to the task's latest version (its prompt and reference answer);
    `files` ({path: text}) are the reference solution's files; `existing_rubric`'s ids are not reused.
    DomainError when no model is configured, the input is over its bounds, or the draft is unusable.
    """
    from authoring.services.audit import audit_record

    started = time.perf_counter()
    deadline = _Deadline(settings.COPILOT_DEADLINE_S)
    endpoint = copilot_endpoint()
    if endpoint is None:
        raise DomainError(
            "No model is configured for the rubric copilot: add a judge endpoint in the admin "
            "(or set OPENAI_BASE_URL and GYMWRIGHT_JUDGE_MODEL). Nothing was drafted.",
            code="model_not_configured",
            http_status=409,
        )
    spec = task.latest_version.spec if task.latest_version_id else {}
    solution = spec.get("solution") or {}
    prompt = _bounded(spec.get("prompt", "") if prompt is None else prompt, "prompt", "/prompt")
    reference = _bounded(
        solution.get("answer") or "" if reference is None else reference, "reference answer", "/reference"
    )
    script = _bounded(solution.get("script") or "", "reference solution script", "/solution/script")
    files = _files_check(files or {})
    if not prompt.strip():
        raise DomainError(
            "The task has no prompt to draft from.",
            code="no_prompt",
            details=[{"pointer": "/prompt", "message": "empty"}],
        )
    if not reference.strip() and not files and not script.strip():
        raise DomainError(
            "The copilot needs a reference answer (or the reference solution's files) to draft from.",
            code="no_reference",
            details=[{"pointer": "/reference", "message": "empty"}],
        )
    taken = set()
    for check, _, _, _ in engine.flat_checks((existing_rubric or {}).get("checks") or []):
        if isinstance(check, dict) and isinstance(check.get("id"), str):
            taken.add(check["id"])

    model = _Model(endpoint, deadline)
    warnings: list[str] = []
    try:
        draft_messages = core.draft_messages(
            prompt=prompt,
            reference=reference,
            solution_script=script,
            files=files,
            count=max(1, min(count, core.MAX_CHECKS)),
        )
        try:
            parsed = core.parse_draft(model.chat(draft_messages, what="the draft"), taken_ids=taken)
        except core.CopilotReplyError as exc:
            raise DomainError(
                f"The copilot model's draft could not be used: {exc}.", code="draft_unusable", http_status=422
            ) from None
        if not parsed.checks:
            raise DomainError(
                f"The copilot model drafted no usable check ({len(parsed.refused)} refused).",
                code="draft_unusable",
                http_status=422,
                details=parsed.refused[:20],
            )
        drafted = _split_compounds(model, parsed.checks, taken, warnings)
        check_ids = {item.check["id"] for item in drafted}
        examples: list[core.Degraded] = []
        try:
            examples = (
                core.parse_degraded(
                    model.chat(
                        core.degrade_messages(
                            prompt=prompt,
                            reference=reference,
                            checks=[item.check for item in drafted],
                            count=max(0, min(degraded, core.MAX_DEGRADED)),
                        ),
                        what="the degraded answers",
                    ),
                    check_ids=check_ids,
                )
                if degraded > 0
                else []
            )
        except (core.CopilotReplyError, DomainError) as exc:
            warnings.append(f"no degraded answers: {getattr(exc, 'message', exc)}")
    finally:
        model.close()

    cases = [
        core.AnswerCase("reference", "reference"),
        core.AnswerCase("empty", "empty"),
        core.AnswerCase(ECHO_NAME, "echo"),
        *(core.AnswerCase(item.name, "degraded", frozenset(item.should_fail)) for item in examples),
    ]
    answers = [reference, "", prompt, *(item.answer for item in examples)]
    verdicts = _test_checks(
        drafted, cases, answers, files, environment=task.environment if task is not None else None, deadline=deadline
    )
    suggestions = []
    for item, verdict in zip(drafted, verdicts):
        suggestions.append(
            {
                "check": item.check,
                "weight": item.weight,
                "rationale": item.rationale,
                "split_from": item.split_from,
                "route": core.grading_route(item.check),
                **verdict.to_dict(),
            }
        )
    result = {
        "model": endpoint.model,
        "endpoint": endpoint.name,
        "suggestions": suggestions,
        "refused": parsed.refused,
        "examples": [
            {
                "name": f"copilot: {item.name}"[:80],
                "answer": item.answer,
                "expect": "fail",
                "flaw": item.flaw,
                "should_fail": item.should_fail,
            }
            for item in examples
        ],
        "warnings": warnings,
        "survived": sum(1 for s in suggestions if s["preselected"]),
        "model_calls": model.calls,
        "duration_ms": int((time.perf_counter() - started) * 1000),
    }
    audit_record(
        actor=user,
        verb="rubric_drafted",
        target=task,
        summary=f"Rubric copilot drafted {len(suggestions)} checks ({result['survived']} passed their tests) with {endpoint.model}",
        data={
            "model": endpoint.model,
            "endpoint": endpoint.name,
            "messages": draft_messages,
            "suggestions": suggestions,
            "refused": parsed.refused,
            "examples": result["examples"],
            "warnings": warnings,
        },
    )
    return result


def _files_check(files: dict) -> dict[str, str]:
    from grading.services.dry_runs import workspace_path_check

    if len(files) > MAX_FILES:
        raise DomainError(f"Too many reference files ({len(files)}); at most {MAX_FILES}.", code="too_many_files")
    out, total = {}, 0
    for path, content in files.items():
        clean = workspace_path_check(str(path))  # the dry run's workspace: the one set of path rules
        if clean in out:  # 'a/./b' and 'a/b': one file, not the last one silently
            raise DomainError(
                f"Two reference files have the path {clean!r}.",
                code="invalid_path",
                details=[{"pointer": "/files", "message": f"{path!r} is {clean!r} again"}],
            )
        if not isinstance(content, str):
            raise DomainError(
                f"Reference file {clean!r} is not text.",
                code="invalid_file",
                details=[{"pointer": "/files", "message": "not text"}],
            )
        total += len(content)
        out[clean] = content
    if total > settings.COPILOT_INPUT_MAX_CHARS:
        _bounded("".join(out.values()), "text of the reference files", "/files")
    return out


def _split_compounds(
    model: _Model, drafted: list[core.Drafted], taken: set[str], warnings: list[str]
) -> list[core.Drafted]:
    """Ask the model to split the llm_judge criteria the rule picks (`core.looks_compound`), concurrently."""
    picked = [
        index
        for index, item in enumerate(drafted)
        if item.check["kind"] == "llm_judge" and core.looks_compound(item.check["criterion"])
    ]
    if not picked:
        return drafted

    def ask(index: int):
        try:
            return core.parse_split(
                model.chat(
                    core.split_messages(drafted[index].check["criterion"]),
                    what=f"splitting {drafted[index].check['id']}",
                )
            )
        except (core.CopilotReplyError, DomainError) as exc:
            warnings.append(f"{drafted[index].check['id']} not split: {getattr(exc, 'message', exc)}")
            return None

    with ThreadPoolExecutor(max_workers=settings.COPILOT_CONCURRENCY) as pool:
        answers = dict(zip(picked, pool.map(ask, picked)))
    out = []
    for index, item in enumerate(drafted):
        parts = answers.get(index)
        out.extend(core.split_drafted(item, parts, taken) if parts else [item])
    return out


def _test_checks(
    drafted: list[core.Drafted],
    cases: list[core.AnswerCase],
    answers: list[str],
    files: dict[str, str],
    *,
    environment,
    deadline: _Deadline,
):
    """Each drafted check's verdict: graded by the engine on every case, concurrently, bounded; judge checks by the
    judge the task's `environment` uses (grading.endpoints.judge_config_for). All of it within `deadline`: what
    it leaves no time for is unscored with the reason (untested, never passed)."""
    routes = [core.grading_route(item.check) for item in drafted]
    limits = dataclasses.replace(GradeLimits.from_env(), check_cpu_s=settings.COPILOT_CHECK_CPU_S)
    grades: list[dict[str, dict]] = [{} for _ in cases]

    deterministic = [item.check for item, route in zip(drafted, routes) if route in ("text", "files")]
    if deterministic:
        _grade_in_child(deterministic, answers, files, limits, grades, deadline)

    # Only the judge checks are graded here (their work is the judge's HTTP calls); every check the engine
    # itself evaluates runs in the dry run's bounded child, as an author's rubric does in a dry run.
    judged = [item.check for item, route in zip(drafted, routes) if route == "judge"]
    if judged:
        rubric = {"schema": "gymwright.rubric/v1", "checks": [dict(core._PLACEHOLDER), *judged]}
        config = judge_config_for(rubric, environment=environment)

        def grade_one(answer: str) -> dict[str, dict]:
            # Each answer's judge calls start within half the time left when its grading starts, and each
            # call (its retries included) takes at most the other half: none runs past the deadline.
            half = deadline.left() / 2
            if half <= 0.05:
                return {check["id"]: _untested(deadline.reason()) for check in judged}
            judge = None
            if config is not None:
                judge = engine.JudgeClient(
                    dataclasses.replace(
                        config,
                        timeout_s=min(config.timeout_s, half),
                        deadline_s=min(config.deadline_s or half, half),
                        grade_deadline_s=min(config.grade_deadline_s or half, half),
                    )
                )
            try:
                document = engine.grade(rubric, answer=answer, judge=judge, limits=limits).model_dump(
                    mode="json", by_alias=True
                )
            finally:
                if judge is not None:
                    judge.close()
            return {check["id"]: check for check in document["checks"]}

        with ThreadPoolExecutor(max_workers=settings.COPILOT_CONCURRENCY) as pool:
            for index, by_id in enumerate(pool.map(grade_one, answers)):
                grades[index].update(by_id)

    return [
        core.check_verdict(
            item.check, cases, [grades[index].get(item.check["id"]) for index in range(len(cases))], route
        )
        for item, route in zip(drafted, routes)
    ]


def _untested(reason: str) -> dict:
    return {"status": "unscored", "explanation": f"not tested: {reason}"}


def _grade_in_child(
    checks: list[dict], answers: list[str], files: dict[str, str], limits, grades, deadline: _Deadline
) -> None:
    """The checks the engine evaluates (text and files), graded in the dry run's bounded child process (its CPU,
    memory and wall-time limits, `_dry_run_process_limits`): the reference answer with the reference files in
    its workspace, every other answer with an empty workspace."""
    from grading.engine.isolated import GradeStopped, grade_many_in_subprocess
    from grading.services.dry_runs import _dry_run_process_limits, _write_workspace

    rubric = {"schema": "gymwright.rubric/v1", "checks": [dict(core._PLACEHOLDER), *checks]}
    process = _dry_run_process_limits()
    left = deadline.left()
    if left <= 0.05:
        for index in range(len(answers)):
            grades[index].update({check["id"]: _untested(deadline.reason()) for check in checks})
        return
    if left < process.timeout_s:
        process = dataclasses.replace(process, timeout_s=left, timeout_setting=DEADLINE_SETTING)
    with tempfile.TemporaryDirectory(prefix="gymwright-copilot-") as tmp:
        reference_dir = Path(tmp) / "reference"
        reference_dir.mkdir()
        _write_workspace(reference_dir, [(path, text.encode()) for path, text in files.items()])
        empty_dir = Path(tmp) / "empty"
        empty_dir.mkdir()
        items = [(answer, reference_dir if index == 0 else empty_dir) for index, answer in enumerate(answers)]
        try:
            documents = grade_many_in_subprocess(rubric, items=items, limits=limits, process=process)
        except GradeStopped as exc:
            for index in range(len(answers)):
                grades[index].update({check["id"]: _untested(str(exc)) for check in checks})
            return
    for index, document in enumerate(documents):
        grades[index].update({check["id"]: check for check in document.get("checks", [])})
