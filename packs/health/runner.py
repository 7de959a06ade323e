"""Run the gates of a dataset's tasks in batch on the docker backend, each task in its own sandboxes.

For each task: the oracle, the nop (which also lists what the agent's image holds), every hack probe the gates
apply to it (`grading.engine.gate_rules.hack_policies`) and the verifier probes (`packs.health.verifier`), one
rollout each, through `sandbox.runtime.run_rollout` as a preview's worker runs them; then the gates decide on
that evidence (`evaluate_gates`, `hack_gate`): the same verdicts a task's page shows, without storing a preview.

Bounded on the host: each task has a time budget (its rollouts' agent and verifier time are cut to what is
left of it), the whole run one more, and each message a length; nothing of the task runs outside a sandbox.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from grading.engine import TASK_SCHEMA, parse_task, validate_task
from grading.engine import gate_rules as gates
from grading.engine.calibration import check_scores, rewarded_checks
from grading.engine.hack_targets import HACKS
from packs.health import verifier
from sandbox.runtime import SandboxError, SandboxSpec, make_policy, run_rollout
from sandbox.runtime.policies import Turn, _assistant, _call

log = logging.getLogger(__name__)

HEALTHY, BROKEN, NOT_RUNNABLE = "healthy", "broken", "not_runnable"
VERDICT_WORDS = {HEALTHY: "healthy", BROKEN: "broken", NOT_RUNNABLE: "not runnable here"}

MESSAGE_CHARS = 300
REASON_CHARS = 600
MIN_ROLLOUT_S = 5  # a rollout is not started with less than this left of its task's budget

BASE_IMAGE_HINT = (
    "a dataset's base images must be on this docker engine: point it at a registry mirror, or `docker load` them"
)


@dataclass
class Subject:
    """One task to check: where it was read, its gymwright.task/v1 document and its files' bytes."""

    where: str
    slug: str
    task: dict
    files: dict[str, bytes] = field(default_factory=dict)
    env_files: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class HealthLimits:
    task_s: float = 900.0  # every rollout of one task together
    total_s: float = 4 * 3600.0  # the whole dataset
    hacks: frozenset[str] | None = None  # the probes to run (names without `hack:`); None: every applicable one


def probe_names_problem(names: Iterable[str]) -> str | None:
    """Why a choice of probes (names without `hack:`) cannot be run as asked: none named, or a name that is no
    probe (a misspelt name would run nothing, and a task any probe would fool would come out healthy)."""
    names = list(names)
    known = sorted({*HACKS, *verifier.PROBES})
    unknown = [name for name in names if name not in known]
    if not names:
        return f"names no probe; the probes are {', '.join(known)}"
    if unknown:
        return f"{', '.join(repr(name) for name in unknown)} is no probe; the probes are {', '.join(known)}"
    return None


class _Scripted:
    """A policy that types the given bash commands, then submits `answer`."""

    def __init__(self, name: str, commands: list[str], answer: str = ""):
        self.name, self.commands, self.answer = name, commands, answer

    def next_turn(self, messages, tools, *, timeout_s=None) -> Turn:
        taken = sum(1 for message in messages if message.get("role") == "assistant")
        if taken < len(self.commands):
            return Turn(_assistant(_call("bash", {"command": self.commands[taken]})))
        return Turn(_assistant(_call("submit", {"answer": self.answer})))


def _short(text, chars: int = MESSAGE_CHARS) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= chars else line[: chars - 1] + "…"


def subject_from_candidate(candidate) -> Subject:
    """A task an import read (packs.importer.Candidate) as a Subject, without storing anything."""
    content = dict(candidate.content)
    slug, number, spec = candidate.environment or ("imported", 1, {})
    environment = {"id": slug, "version": number, **spec}
    document = {"schema": TASK_SCHEMA, "id": candidate.slug, "version": candidate.number, **content}
    document["environment"] = environment
    files = {
        entry["path"]: candidate.files[entry["sha256"]]
        for entry in content.get("files") or []
        if entry.get("sha256") in candidate.files
    }
    env_files = {
        entry["path"]: candidate.files[entry["sha256"]]
        for entry in environment.get("files") or []
        if isinstance(entry, Mapping) and entry.get("sha256") in candidate.files
    }
    return Subject(candidate.where, candidate.slug, document, files, env_files)


def rejected_entry(rejection) -> dict:
    """The entry of a task the import refuses (packs.importer.Rejection): it cannot run here."""
    pointer = f"{rejection.pointer}: " if rejection.pointer else ""
    return {
        "task": rejection.slug or "",
        "where": rejection.where,
        "verdict": NOT_RUNNABLE,
        "reason": _short(f"the import refuses it: {pointer}{rejection.message}", REASON_CHARS),
        "gates": [],
        "findings": [],
        "rollouts": {},
        "seconds": 0,
    }


def _survey_command(sizes: Iterable[int]) -> str:
    """Lists what the agent's image holds: the sha256 of each file as large as a test or solution file, and the
    names in the workspace (read-only: the nop run that carries it still does nothing)."""
    wanted = " -o ".join(f"-size {size}c" for size in sorted(set(sizes))[:50])
    hashes = (
        "find / -xdev \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f "
        f'\\( {wanted} \\) -print 2>/dev/null | head -n 200 | while IFS= read -r f; do sha256sum "$f" 2>/dev/null; done; '
        if wanted
        else ""
    )
    return hashes + "echo '--- names ---'; find /workspace -maxdepth 4 2>/dev/null | head -n 500; true"


def _survey_output(trajectory: list[dict]) -> str:
    for message in trajectory:
        if message.get("role") == "tool":
            text = message.get("content") or ""
            _, found, rest = text.partition("[stdout]\n")
            return rest.split("\n[stderr]\n")[0] if found else ""
    return ""


def _evidence(policy: str, results: list) -> gates.PreviewEvidence:
    graded = [result for result in results if result.error is None and result.grade is not None]
    documents = [result.grade.model_dump(mode="json", by_alias=True) for result in graded]
    return gates.PreviewEvidence(
        policy=policy,
        run_id=None,
        n=len(results),
        rewards=[result.grade.reward for result in graded],
        passed=[bool(result.grade.passed) for result in graded],
        errors=len(results) - len(graded),
        rewarded=[rewarded_checks(document) for document in documents],
        scores=[check_scores(document) for document in documents],
        gaps=[gates.grade_gap(document) for document in documents],
    )


def _capped(document: dict, seconds: float) -> dict:
    """The task with every check's own time limit cut to `seconds` (what is left of the task's budget)."""
    rubric = dict(document.get("rubric") or {})
    rubric["checks"] = [
        {**check, "timeout_s": max(1, min(int(check["timeout_s"]), int(seconds)))}
        if isinstance(check, dict) and isinstance(check.get("timeout_s"), (int, float))
        else check
        for check in rubric.get("checks") or []
    ]
    return {**document, "rubric": rubric}


def check_subject(
    subject: Subject,
    *,
    backend,
    limits: HealthLimits,
    on_rollout: Callable[[str], None] | None = None,
) -> dict:
    """One task's health entry: {task, where, verdict, reason, gates, findings, rollouts, seconds}."""
    started = time.monotonic()
    deadline = started + limits.task_s
    entry = {"task": subject.slug, "where": subject.where, "gates": [], "findings": [], "rollouts": {}}
    issues = validate_task(subject.task)
    if issues:
        return _done(
            entry,
            BROKEN,
            "the task does not validate: " + "; ".join(f"{i.pointer or '/'}: {i.message}" for i in issues[:3]),
            started,
        )
    document = subject.task
    base_spec = SandboxSpec.from_environment(document.get("environment") or {})
    facts = verifier.facts_of(subject.files)
    instruction = str(document.get("prompt") or "")
    plans = verifier.probe_plans(facts, instruction=instruction, workdir=base_spec.workdir)
    if limits.hacks is not None:
        plans = [plan for plan in plans if plan.name in limits.hacks]
    solution = (document.get("solution") or {}).get("script") or ""
    truth = {f"tests/{path}": data for path, data in verifier.verifier_files(subject.files).items()}
    if solution:
        truth["solution/solve.sh"] = solution.encode()
    truth = {path: data for path, data in truth.items() if len(data.strip()) >= 16}

    # every preview the gates need (one rollout each), the nop also listing what the agent's image holds
    policies: list[tuple[str, object]] = []
    for policy_name, _ in gates.required_previews(document):
        if policy_name == "nop":
            policies.append(("nop", _Scripted("nop", [_survey_command(len(data) for data in truth.values())])))
        elif not policy_name.startswith("hack:") or limits.hacks is None or policy_name[5:] in limits.hacks:
            policies.append((policy_name, None))
    for plan in plans:
        policies.append((f"hack:{plan.name}", _Scripted(f"hack:{plan.name}", plan.commands, plan.answer)))

    evidence: dict[str, gates.PreviewEvidence] = {}
    over_budget = False
    survey = ""
    nop_explanations: list[str] = []
    for policy_name, scripted in policies:
        left = deadline - time.monotonic()
        if left < MIN_ROLLOUT_S:
            break
        if on_rollout is not None:
            on_rollout(f"{subject.slug}: {policy_name}")
        task_document = _capped(document, left)
        if scripted is not None and policy_name.startswith("hack:verifier-"):
            task_document = _as_harbor_runs_it(task_document)
        task = parse_task(task_document)
        policy = scripted or make_policy(policy_name, task=task)
        spec = base_spec.with_overrides(timeout_s=min(base_spec.timeout_s, left))
        rollout_started = time.monotonic()
        try:
            result = run_rollout(
                task, policy=policy, backend=backend, files=subject.files, env_files=subject.env_files, spec=spec
            )
        except SandboxError as exc:  # the backend itself failed (engine down)
            return _done(entry, NOT_RUNNABLE, f"the docker backend failed: {_short(exc.message)}", started)
        if result.stop_reason == "timeout" and spec.timeout_s < base_spec.timeout_s:
            over_budget = True  # its own time limit was cut to the task's budget, and it ran into it
        entry["rollouts"][policy_name] = {
            "reward": result.grade.reward if result.grade is not None else None,
            "error": _short(result.error) if result.error else None,
            "seconds": round(time.monotonic() - rollout_started, 1),
        }
        if result.error_kind == "sandbox":
            why = str(result.error)
            if re.search(r"registry|pull access|not found|manifest unknown|no such image", why, re.IGNORECASE):
                why = f"its base image cannot be had here ({BASE_IMAGE_HINT}): {why}"
            else:
                why = f"its sandbox cannot start here: {why}"
            return _done(entry, NOT_RUNNABLE, why, started)
        evidence[policy_name] = _evidence(policy_name, [result])
        if policy_name == "nop":
            survey = _survey_output(result.trajectory)
            if result.grade is not None:
                nop_explanations = [str(check.explanation or "") for check in result.grade.checks]

    inputs = gates.GateInputs(
        task=document, previews=evidence, judge_configured=False, rubric_issues=[], example_answers=[]
    )
    ran = set(evidence)
    results = [
        result
        for result in gates.evaluate_gates(inputs)
        if not (result.policy or "").startswith("hack:") or result.policy in ran or limits.hacks is None
    ]
    what = {f"hack:{plan.name}": plan.what for plan in plans}
    for plan in plans:
        results.append(gates.hack_gate(inputs, f"hack:{plan.name}"))
    entry["gates"] = [
        {
            "gate": result.gate,
            "title": result.title,
            "status": result.status,
            "message": _short(
                result.message
                + (f" ({what[result.gate]})" if result.gate in what and result.status == gates.FAIL else "")
            ),
        }
        for result in results
    ]
    reasons = [
        row["message"] if row["gate"].startswith("hack:") else f"{row['title']}: {row['message']}"
        for row in entry["gates"]
        if row["status"] == gates.FAIL and row["gate"] != "judge"
    ]
    findings = verifier.static_findings(
        facts,
        instruction=instruction,
        dockerfile=(document.get("environment") or {}).get("dockerfile"),
        agent_files={
            **{
                path: data
                for path, data in subject.files.items()
                if not path.startswith(verifier.VERIFIER_FILES) and _role(document, path) != "grader"
            },
            **{f"/env/{path}": data for path, data in subject.env_files.items()},
            **{name: b"" for name in _survey_names(survey)},
        },
        truth=truth,
    )
    findings += _image_truth(survey, truth)
    if any("wrote no /logs/verifier/reward" in text for text in nop_explanations):
        findings.append(
            verifier.Finding(
                "no-reward",
                "with the work absent (nop), test.sh ended without writing /logs/verifier/reward.txt: Harbor counts "
                "that as an error, not a reward of 0"
                + (
                    " (test.sh runs under `set -e`: a failing command ends it before the reward)"
                    if verifier.sets_errexit(facts)
                    else ""
                ),
            )
        )
    entry["findings"] = [finding.to_dict() for finding in findings[:10]]
    timed_out = over_budget or len(evidence) < len(policies)
    return _classify(entry, results, reasons, findings, started, timed_out=timed_out, limits=limits)


# Gymwright runs every check with Python reading no bytecode and no user site (grading.engine.sandbox.NO_BYTECODE_ENV);
# Harbor runs test.sh with the image's environment. The verifier probes judge the dataset, wherever it runs: its
# verifier runs without those defences, as Harbor runs it.
_AS_HARBOR = "unset PYTHONPYCACHEPREFIX PYTHONDONTWRITEBYTECODE PYTHONNOUSERSITE\n"


def _as_harbor_runs_it(document: dict) -> dict:
    rubric = dict(document.get("rubric") or {})
    rubric["checks"] = [
        {**check, "run": _AS_HARBOR + check["run"]}
        if isinstance(check, dict) and check.get("kind") == "command" and isinstance(check.get("run"), str)
        else check
        for check in rubric.get("checks") or []
    ]
    return {**document, "rubric": rubric}


def _role(document: dict, path: str) -> str:
    for entry in document.get("files") or []:
        if isinstance(entry, Mapping) and entry.get("path") == path:
            return str(entry.get("role") or "workspace")
    return "workspace"


def _survey_names(survey: str) -> list[str]:
    _, _, names = survey.partition("--- names ---\n")
    return [line for line in names.splitlines() if line.startswith("/workspace/")][:500]


def _image_truth(survey: str, truth: Mapping[str, bytes]) -> list[verifier.Finding]:
    digests = {hashlib.sha256(data).hexdigest(): name for name, data in truth.items()}
    found = []
    hashes, _, _ = survey.partition("--- names ---")
    for line in hashes.splitlines():
        digest, _, path = line.strip().partition("  ")
        if digest in digests and path:
            found.append(
                verifier.Finding("truth-in-image", f"the agent's image holds {path}, a copy of {digests[digest]}")
            )
    return found[:5]


def _done(entry: dict, verdict: str, reason: str, started: float) -> dict:
    entry["verdict"] = verdict
    entry["reason"] = _short(reason, REASON_CHARS)
    entry["seconds"] = round(time.monotonic() - started, 1)
    return entry


def _classify(entry, results, reasons, findings, started, *, timed_out: bool, limits: HealthLimits) -> dict:
    if timed_out:  # a reward too high stands whatever the time; an oracle that ran out of it says nothing
        reasons = [reason for reason in reasons if not reason.startswith("Oracle passes")]
    if timed_out and not (reasons or findings):
        return _done(
            entry,
            NOT_RUNNABLE,
            f"its rollouts ran over the time a task may take here ({limits.task_s:g} s; --task-timeout, "
            "GYMWRIGHT_DATASET_CHECK_TASK_S)",
            started,
        )
    if reasons or findings:
        return _done(entry, BROKEN, "; ".join(reasons + [finding.message for finding in findings]), started)
    if any(result.gate == "judge" and result.status == gates.FAIL for result in results):
        return _done(entry, NOT_RUNNABLE, "its rubric needs a judge model, and none is configured here", started)
    undecided = [result for result in results if result.status == gates.NOT_RUN]
    if undecided:
        return _done(
            entry,
            NOT_RUNNABLE,
            "; ".join(f"{result.title}: {_short(result.message, 200)}" for result in undecided),
            started,
        )
    return _done(entry, HEALTHY, "every gate passes", started)


def check_subjects(
    subjects: Iterable[Subject | dict],
    *,
    backend,
    limits: HealthLimits,
    on_entry: Callable[[dict], None] | None = None,
    on_rollout: Callable[[str], None] | None = None,
) -> list[dict]:
    """Every subject's entry, in order; a dict in `subjects` is an entry already (a task the import refused).
    Once the whole run's budget is spent, the rest are not checked (not runnable, with the reason)."""
    deadline = time.monotonic() + limits.total_s
    entries = []
    for subject in subjects:
        if isinstance(subject, dict):
            entry = subject
        elif time.monotonic() >= deadline:
            entry = {
                "task": subject.slug,
                "where": subject.where,
                "verdict": NOT_RUNNABLE,
                "reason": f"not checked: the dataset's time limit ({limits.total_s:g} s) ran out",
                "gates": [],
                "findings": [],
                "rollouts": {},
                "seconds": 0,
            }
        else:
            try:
                entry = check_subject(subject, backend=backend, limits=limits, on_rollout=on_rollout)
            except Exception as exc:  # one task's failure must not lose the others' entries
                log.exception("health check of %s failed", subject.slug)
                entry = {
                    "task": subject.slug,
                    "where": subject.where,
                    "verdict": NOT_RUNNABLE,
                    "reason": _short(f"the check itself failed: {type(exc).__name__}: {exc}", REASON_CHARS),
                    "gates": [],
                    "findings": [],
                    "rollouts": {},
                    "seconds": 0,
                }
        entries.append(entry)
        if on_entry is not None:
            on_entry(entry)
    return entries


def summary_line(entry: dict) -> str:
    """`where: healthy task-slug` / `where: broken task-slug: reason`."""
    words = VERDICT_WORDS.get(entry["verdict"], entry["verdict"])
    task = f" {entry['task']}" if entry.get("task") else ""
    reason = f": {entry['reason']}" if entry["verdict"] != HEALTHY and entry.get("reason") else ""
    return f"{entry['where']}: {words}{task}{reason}"


def report_document(entries: list[dict], *, source: str, limits: HealthLimits) -> dict:
    counts = {verdict: sum(1 for entry in entries if entry["verdict"] == verdict) for verdict in VERDICT_WORDS}
    return {
        "schema": "gymwright.dataset-health/v1",
        "source": source,
        "backend": "docker",
        "limits": {"task_s": limits.task_s, "total_s": limits.total_s},
        "counts": counts,
        "tasks": entries,
    }
