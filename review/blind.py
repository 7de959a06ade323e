"""Blind human reward prediction: reviewers score a stratified sample of a task's model-preview rollouts before
they see the grade (pass / fail and 0-10), and the app measures how well the rubric's reward ranks rollouts as
humans do (Spearman, with a seeded bootstrap interval) per task and per environment, and lists every rollout the
rubric passes that humans fail (a hack the probes missed), which the task's editor can turn into an example
answer expected to fail, or into a probe scoring below the pass threshold, in one click each (audited).

Rules:
- the sample is drawn from the finished, graded rollouts of the task's `model` previews, every version (as judge
  labels are): nop, oracle, probe and hack runs say nothing of how a policy's answers are ranked;
- the task's owner never scores its rollouts blind (they wrote the rubric: their score is no independent
  prediction); reviewers and admins do, once per rollout: after scoring they have seen the grade;
- per rollout the human score is the mean of its reviewers' 0-10, and humans fail it when most of its reviewers
  did (an even split flags nothing);
- the maths is grading.engine.calibration's (stratified_sample, spearman, spearman_interval,
  human_prediction_verdict); an environment's BlindRule overrides the defaults (0.5 over 10 rollouts).
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal

from django.db import IntegrityError, transaction
from django.http import Http404
from pydantic import ValidationError

from accounts import permissions
from authoring.models import AuditEvent, Task
from authoring.services import audit_record
from authoring.services.tasks import task_version_content, task_version_create
from grading.engine import calibration
from grading.engine.models import (
    EXAMPLE_ANSWER_MAX_CHARS,
    EXAMPLE_FILES_MAX_CHARS,
    EXAMPLE_MAX_FILES,
    MAX_EXAMPLES,
    ExampleFile,
    Rubric,
)
from grading.engine.text import storable_text
from gymwright.errors import ConflictError, DomainError, NotAllowed
from gymwright.sql import Prepared
from review.models import BlindRule, BlindScore
from sandbox.models import PreviewRun, Rollout

#: At most this many rollouts are read for one task's figures (the newest): bounds the page, the API and the pack.
MAX_ROLLOUTS = 2000
EXAMPLE_PREFIX = "blind-hack-rollout-"


def _rules(environment_ids) -> dict[int, calibration.HumanPredictionRule]:
    """environment id -> its BlindRule, for those of `environment_ids` that have one (the defaults for the rest)."""
    return {
        row.environment_id: calibration.HumanPredictionRule(
            min_correlation=row.min_correlation, min_scored=row.min_scored
        )
        for row in BlindRule.objects.filter(environment_id__in=list(environment_ids))
    }


def rule_for(environment) -> calibration.HumanPredictionRule:
    if environment is None:
        return calibration.HumanPredictionRule()
    return _rules([environment.pk]).get(environment.pk, calibration.HumanPredictionRule())


def _candidate_filter(prefix: str = "") -> dict:
    """The blind pool's conditions on a rollout (reached through `prefix`): a finished, graded model preview's."""
    return {
        f"{prefix}preview_run__policy_kind": "model",
        f"{prefix}preview_run__status__in": PreviewRun.FINISHED,
        f"{prefix}status": Rollout.Status.DONE,
        f"{prefix}reward__isnull": False,
    }


def _candidates(*, tasks):
    return Rollout.objects.filter(preview_run__task_version__task__in=tasks, **_candidate_filter())


def sample_ids(*, task: Task) -> list[int]:
    """The task's stratified blind sample (rollout ids, in the order to score them; seeded by the task)."""
    items = list(_candidates(tasks=[task]).order_by("-id").values_list("id", "reward")[:MAX_ROLLOUTS])
    return calibration.stratified_sample(items, seed=calibration.BLIND_SEED + task.pk)


def blind_check(*, task: Task, user) -> None:
    """NotAllowed unless `user` may score `task`'s rollouts blind."""
    if not permissions.can_review(user):
        raise NotAllowed("Only reviewers and admins score rollouts blind.")
    if task.owner_id == user.id:
        raise NotAllowed("You wrote this task: its rollouts are scored blind by other reviewers.")


def _may_score(*, task: Task, user) -> bool:
    try:
        blind_check(task=task, user=user)
    except NotAllowed:
        return False
    return True


def next_for(*, task: Task, user) -> Rollout | None:
    """The first rollout of the sample `user` has not scored yet, or None."""
    ids = sample_ids(task=task)
    done = set(BlindScore.objects.filter(reviewer=user, rollout_id__in=ids).values_list("rollout_id", flat=True))
    todo = [pk for pk in ids if pk not in done]
    return Rollout.objects.select_related("preview_run__task_version").get(pk=todo[0]) if todo else None


def rollout_for(*, task: Task, rollout_id: int) -> Rollout:
    """A finished model-preview rollout of `task` that can be scored blind; Http404 for any other."""
    rollout = (
        _candidates(tasks=[task]).select_related("preview_run__task_version", "grade").filter(pk=rollout_id).first()
    )
    if rollout is None:
        raise Http404(f"No finished model-preview rollout {rollout_id} of {task.slug}")
    return rollout


def scored_by(*, rollout: Rollout, user) -> BlindScore | None:
    return BlindScore.objects.filter(rollout=rollout, reviewer=user).first()


def score_record(*, task: Task, rollout: Rollout, reviewer, passed, score) -> BlindScore:
    """Record `reviewer`'s blind score of `rollout`; once only (ConflictError for a second)."""
    blind_check(task=task, user=reviewer)
    if not isinstance(passed, bool):
        raise DomainError(
            "Say whether the rollout passes: true or false.",
            code="invalid",
            details=[{"pointer": "/passed", "message": "true or false"}],
        )
    if isinstance(score, bool) or not isinstance(score, int) or not 0 <= score <= 10:
        raise DomainError(
            f"The score must be a whole number from 0 to 10, not {str(score)[:20]!r}.",
            code="invalid",
            details=[{"pointer": "/score", "message": "a whole number from 0 to 10"}],
        )
    try:
        with transaction.atomic():
            return BlindScore.objects.create(rollout=rollout, reviewer=reviewer, passed=passed, score=score)
    except IntegrityError:
        raise ConflictError(
            f"You already scored rollout {rollout.pk} blind; a second score would not be blind.",
            extra={"rollout": rollout.pk},
        )


# ---------------------------------------------------------------- the figures


def _pass_threshold(spec: dict) -> float:
    value = (spec.get("rubric") or {}).get("pass_threshold")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return float(Rubric.model_fields["pass_threshold"].default)


def _cutoffs(*, tasks, per_task: bool) -> dict[int | None, int]:
    """The id of the MAX_ROLLOUTS-th newest candidate rollout (older ones are not read), per task with `per_task`
    (key: task id), else over all `tasks` (key: None); nothing for fewer candidates."""
    from django.db.models import F, Window
    from django.db.models.functions import RowNumber

    if not per_task:
        ids = list(
            _candidates(tasks=tasks).order_by("-id").values_list("id", flat=True)[MAX_ROLLOUTS - 1 : MAX_ROLLOUTS]
        )
        return {None: ids[0]} if ids else {}
    task = F("preview_run__task_version__task_id")
    return dict(
        _candidates(tasks=tasks)
        .annotate(task=task, rank=Window(RowNumber(), partition_by=task, order_by=F("id").desc()))
        .filter(rank=MAX_ROLLOUTS)
        .values_list("task", "id")
    )


_VERSION = "rollout__preview_run__task_version__"


def _scores(**where):
    """Blind scores of candidate rollouts (those of `where`), each with what a row shows of its rollout."""
    return BlindScore.objects.filter(**where, **_candidate_filter("rollout__")).values_list(
        "rollout_id",
        "passed",
        "score",
        "rollout__reward",
        f"{_VERSION}task_id",
        f"{_VERSION}task__slug",
        f"{_VERSION}task__environment_id",
        f"{_VERSION}number",
        f"{_VERSION}spec__rubric__pass_threshold",
    )


# One task's (the gates ask on every view of a task page): compiled once per process (gymwright.sql)
_one_task_scores = Prepared(lambda task_id: _scores(**{f"{_VERSION}task_id": task_id}), task_id=int)


def _rows(*, tasks, per_task: bool = False) -> list[dict]:
    """One row per blind-scored rollout of `tasks` among the newest MAX_ROLLOUTS candidates (of each task with
    `per_task`, else of all `tasks`): reward, threshold, the human mean score and pass votes.

    The scores are read first, joined to their rollouts (one query, and a cheap one for the many tasks nobody
    scored blind: the gates ask on every task page); the newest-candidates bound only when there are some."""
    scores: dict[int, list[tuple[bool, int]]] = {}
    rollouts: dict[int, tuple] = {}
    one = tasks[0] if isinstance(tasks, (list, tuple)) and len(tasks) == 1 else None
    found = (
        _one_task_scores(task_id=getattr(one, "pk", one))
        if one is not None
        else _scores(**{f"{_VERSION}task__in": tasks})
    )
    for rollout_id, passed, score, *rollout in found:
        scores.setdefault(rollout_id, []).append((passed, score))
        rollouts[rollout_id] = tuple(rollout)
    if not scores:
        return []
    scored_tasks = {rollout[1] for rollout in rollouts.values()}
    cutoffs = _cutoffs(tasks=list(scored_tasks) if per_task else tasks, per_task=per_task)
    rows = []
    for rollout_id, (reward, task_id, slug, environment_id, number, spec_threshold) in rollouts.items():
        cutoff = cutoffs.get(task_id if per_task else None)
        if cutoff is not None and rollout_id < cutoff:
            continue
        votes = scores[rollout_id]
        fails = sum(1 for passed, _ in votes if not passed)
        rows.append(
            {
                "rollout": rollout_id,
                "task": slug,
                "task_id": task_id,
                "environment_id": environment_id,
                "version": number,
                "reward": reward,
                "pass_threshold": _pass_threshold({"rubric": {"pass_threshold": spec_threshold}}),
                "human_score": sum(score for _, score in votes) / len(votes),
                "human_pass": len(votes) - fails,
                "human_fail": fails,
                "scorers": len(votes),
            }
        )
    rows.sort(key=lambda row: row["rollout"])
    return rows


def _figures(rows: list[dict], rule: calibration.HumanPredictionRule) -> dict:
    pairs = [(row["reward"], row["human_score"]) for row in rows]
    rho = calibration.spearman(pairs)
    interval = calibration.spearman_interval(pairs)
    verdict = calibration.human_prediction_verdict(rho, len(pairs), rule)
    return {
        "scored": len(pairs),
        "scores": sum(row["scorers"] for row in rows),
        "spearman": rho,
        "spearman_ci95": list(interval) if interval else None,
        "flagged": not verdict.ok,
        "verdict": verdict.message,
    }


def hacks(rows: list[dict]) -> list[dict]:
    """Rollouts the rubric passes (reward >= the pass threshold) that most of their blind scorers fail."""
    return [row for row in rows if row["reward"] >= row["pass_threshold"] and row["human_fail"] * 2 > row["scorers"]]


def task_figures(*, task: Task, viewer=None) -> dict:
    """A task's blind-prediction figures: scored rollouts, Spearman (reward vs mean human score) and interval,
    whether it is flagged under its environment's rule, and its hacks (each with whether it is an example answer
    yet, and whether its answer is a probe).
    A hack names its rollout and reward: to a `viewer` who may still score that rollout blind it would be the grade
    before the score, so such hacks are only counted (`hacks_hidden`) until the viewer has scored them."""
    rule = rule_for(task.environment)
    rows = _rows(tasks=[task])
    latest = task.latest_version
    examples = {example.get("name") for example in (latest.spec.get("examples") or [])} if latest else set()
    probes = {
        probe.get("answer")
        for probe in ((latest.spec.get("rubric") or {}).get("probes") or [] if latest else [])
        if isinstance(probe, dict)
    }
    found = hacks(rows)
    answers = dict(Rollout.objects.filter(pk__in=[row["rollout"] for row in found]).values_list("id", "answer"))
    found = [
        {
            **row,
            "example": example_name(row["rollout"]) in examples,
            "probe": _probe_answer(answers.get(row["rollout"])) in probes,
        }
        for row in found
    ]
    shown = found
    if viewer is not None and found and _may_score(task=task, user=viewer):
        scored = set(
            BlindScore.objects.filter(reviewer=viewer, rollout_id__in=[row["rollout"] for row in found]).values_list(
                "rollout_id", flat=True
            )
        )
        shown = [row for row in found if row["rollout"] in scored]
    return {
        "task": task.slug,
        **_figures(rows, rule),
        "rule": rule.to_dict(),
        "sample": len(sample_ids(task=task)),
        "hacks": [_public(row) for row in shown],
        "hacks_hidden": len(found) - len(shown),
        "bootstrap": {"resamples": calibration.RESAMPLES, "seed": calibration.BOOTSTRAP_SEED},
    }


def environment_figures(*, environment, viewer=None) -> dict:
    """Per task of `environment` with blind scores its figures, and the environment's, pooled over its rollouts.
    Hacks are counted, never named. With a `viewer` (the dashboard), each task also says how many of its hacks are
    among the rollouts that viewer may still score blind (`hacks_hidden`, as task_figures hides them): a few
    queries whatever the number of tasks."""
    rule = rule_for(environment)
    tasks = Task.objects.filter(environment=environment)
    rows = _rows(tasks=tasks)
    by_task: dict[str, list[dict]] = {}
    for row in rows:
        by_task.setdefault(row["task"], []).append(row)
    hidden = _hidden_hacks(hacks(rows), viewer=viewer) if viewer is not None else None
    task_entries = []
    for slug, task_rows in sorted(by_task.items()):
        entry = {"task": slug, **_figures(task_rows, rule), "hacks": len(hacks(task_rows))}
        if hidden is not None:
            entry["hacks_hidden"] = hidden.get(slug, 0)
        task_entries.append(entry)
    return {
        "environment": environment.slug,
        **_figures(rows, rule),
        "rule": rule.to_dict(),
        "hacks": len(hacks(rows)),
        "tasks": task_entries,
        "bootstrap": {"resamples": calibration.RESAMPLES, "seed": calibration.BOOTSTRAP_SEED},
    }


def _hidden_hacks(found: list[dict], *, viewer) -> dict[str, int]:
    """task slug -> how many of the hacks `found` (rows of several tasks) `viewer` may still score blind: the rule
    of task_figures' `hacks_hidden`, for every task at once (two queries at most)."""
    if not found or not permissions.can_review(viewer):
        return {}
    owners = dict(Task.objects.filter(pk__in={row["task_id"] for row in found}).values_list("pk", "owner_id"))
    scorable = [
        row
        for row in found
        if _may_score(task=Task(pk=row["task_id"], owner_id=owners.get(row["task_id"])), user=viewer)
    ]
    if not scorable:
        return {}
    scored = set(
        BlindScore.objects.filter(reviewer=viewer, rollout_id__in=[row["rollout"] for row in scorable]).values_list(
            "rollout_id", flat=True
        )
    )
    hidden: dict[str, int] = {}
    for row in scorable:
        if row["rollout"] not in scored:
            hidden[row["task"]] = hidden.get(row["task"], 0) + 1
    return hidden


def _public(row: dict) -> dict:
    return {key: value for key, value in row.items() if key not in ("task_id", "environment_id")}


def gate_verdict(*, task_version) -> calibration.Verdict:
    """The gates' input (one cheap query when nothing was scored blind yet, which is most tasks)."""
    rows = _rows(tasks=[task_version.task_id])
    if not rows:
        return calibration.Verdict(True, "not measured yet: no rollout scored blind")
    environment_id = rows[0]["environment_id"]
    rule = _rules([environment_id]).get(environment_id, calibration.HumanPredictionRule())
    pairs = [(row["reward"], row["human_score"]) for row in rows]
    return calibration.human_prediction_verdict(calibration.spearman(pairs), len(pairs), rule)


def pack_entries(*, task_ids) -> dict[int, dict]:
    """task id -> its "human_prediction" entry in a pack's calibration.json, for those of `task_ids` with blind
    scores: task_figures' figures but the sample's, for all the tasks at once (a few queries, whatever their
    number: a pack may hold 10,000 tasks)."""
    by_task: dict[int, list[dict]] = {}
    for row in _rows(tasks=list(task_ids), per_task=True):
        by_task.setdefault(row["task_id"], []).append(row)
    rules = _rules({rows[0]["environment_id"] for rows in by_task.values()}) if by_task else {}
    entries = {}
    for task_id, rows in by_task.items():
        rule = rules.get(rows[0]["environment_id"], calibration.HumanPredictionRule())
        entries[task_id] = {
            **_figures(rows, rule),
            "hacks": len(hacks(rows)),
            "rule": rule.to_dict(),
            "bootstrap": {"resamples": calibration.RESAMPLES, "seed": calibration.BOOTSTRAP_SEED},
        }
    return entries


# ---------------------------------------------------------------- a hack becomes an example answer


def example_name(rollout_id: int) -> str:
    return f"{EXAMPLE_PREFIX}{rollout_id}"


def _example_files(workspace_files) -> tuple[list[dict], list[str]]:
    """(example files, what was left out and why) from a rollout's workspace listing, which its agent wrote: each
    whole text file the task format's ExampleFile takes (a workspace-relative path, bounded content), while the
    example stays within EXAMPLE_MAX_FILES files and EXAMPLE_FILES_MAX_CHARS characters; not a file whose name was
    not UTF-8 (its listed name is not its name)."""
    files: list[dict] = []
    left_out: list[str] = []
    total = 0
    for entry in workspace_files if isinstance(workspace_files, list) else []:
        if not isinstance(entry, dict):
            left_out.append("(not a file entry)")
            continue
        path, content = entry.get("path"), entry.get("content")
        shown = storable_text(str(path))[:200]
        if entry.get("raw_name_b64") or entry.get("left_out") or entry.get("truncated") or not isinstance(content, str):
            left_out.append(f"{shown}: not a whole text file with a UTF-8 name")
            continue
        try:
            file = ExampleFile.model_validate({"path": path, "content": storable_text(content)})
        except ValidationError as exc:
            left_out.append(f"{shown}: {exc.errors()[0]['msg'][:200]}")
            continue
        if len(files) >= EXAMPLE_MAX_FILES or total + len(file.content) > EXAMPLE_FILES_MAX_CHARS:
            left_out.append(
                f"{shown}: past an example's {EXAMPLE_MAX_FILES} files or {EXAMPLE_FILES_MAX_CHARS} characters"
            )
            continue
        files.append({"path": file.path, "content": file.content})
        total += len(file.content)
    return files, left_out


def _flagged_hack(*, task: Task, rollout_id: int, user, what: str) -> dict:
    """The figures' row of `task`'s flagged hack `rollout_id`, if `user` may turn it into `what` (the task's editor:
    its owner, an admin; it saves a version); NotAllowed, or DomainError for a rollout that is no flagged hack of
    `task` (another task's rollout is none)."""
    if not permissions.can_edit_task(user, task):
        raise NotAllowed(f"Only the task's author or an admin can add {what} to it.")
    row = next((row for row in hacks(_rows(tasks=[task])) if row["rollout"] == rollout_id), None)
    if row is None:
        raise DomainError(
            f"Rollout {rollout_id} is not one the rubric passes and blind scorers fail.",
            code="not_a_hack",
            details=[{"pointer": "/rollout", "message": "not a flagged hack"}],
        )
    return row


def _hack_version_save(*, task: Task, latest, content: dict, user, rollout_id: int, message: str, data: dict):
    """Save `content` as `task`'s next version (from `latest`), audited as made from blind hack `rollout_id`."""
    version, _ = task_version_create(
        task=task, author=user, content=content, base_version=latest.number, message=message, _audit=False
    )
    audit_record(
        actor=user,
        verb=AuditEvent.Verb.NEW_VERSION,
        target=task,
        summary=f"{task.slug} v{version.number}: {message}"[:300],
        data={
            "version": version.number,
            "sha256": version.sha256,
            "from_rollout": rollout_id,
            "blind_hack": True,
            **data,
        },
    )
    return version


@transaction.atomic
def hack_to_example(*, task: Task, rollout_id: int, user):
    """Add the flagged rollout's answer (and its whole text workspace files, up to the format's bounds) to the
    task's example answers, expected to fail, as a new version; audited. Only the task's editor (its owner, an
    admin) may: it saves a version. Refused for a rollout that is not a flagged hack, or already an example."""
    row = _flagged_hack(task=task, rollout_id=rollout_id, user=user, what="example answers")
    latest = task.latest_version
    content = task_version_content(latest)
    content["environment_version"] = latest.environment_version  # an example answer moves nothing else
    examples = list(content.get("examples") or [])
    name = example_name(rollout_id)
    if any(example.get("name") == name for example in examples):
        raise ConflictError(f"Rollout {rollout_id} is already the example answer {name}.", extra={"example": name})
    if len(examples) >= MAX_EXAMPLES:
        raise DomainError(
            f"{task.slug} already has {MAX_EXAMPLES} example answers, the most a task may have: remove one first.",
            code="invalid",
            details=[{"pointer": "/examples", "message": f"at most {MAX_EXAMPLES}"}],
        )
    rollout = Rollout.objects.only("answer", "workspace_files").get(pk=rollout_id)
    files, left_out = _example_files(rollout.workspace_files)
    answer = storable_text(rollout.answer or "")[:EXAMPLE_ANSWER_MAX_CHARS]
    example = {"name": name, "answer": answer, "expect": "fail"}
    if files:
        example["files"] = files
    content["examples"] = [*examples, example]
    message = f"example answer {name}: rollout {rollout_id} scored {row['reward']:.2f}, blind scorers fail it"
    return _hack_version_save(
        task=task,
        latest=latest,
        content=content,
        user=user,
        rollout_id=rollout_id,
        message=message,
        data={"files_left_out": left_out[:20]},
    )


# ---------------------------------------------------------------- a hack becomes a probe

_HUNDREDTH = Decimal("0.01")


def probe_max_reward(*, pass_threshold: float, reward: float) -> float | None:
    """A blind hack's probe's max_reward: the largest hundredth strictly below both the task's pass threshold and
    the reward the rubric gave the hack (None when that is below 0: a threshold of 0 passes every answer).

    Below the reward: the rubric that rewarded this exact hack fails its probe's gate (the gate fails a probe
    scoring above its max_reward). Below the pass threshold: once the gate passes, the hack no longer passes the
    task. Hundredths, so that the rubric reads as an author would write it."""
    limit = Decimal(repr(min(float(pass_threshold), float(reward))))
    value = limit.quantize(_HUNDREDTH, rounding=ROUND_CEILING) - _HUNDREDTH
    return None if value < 0 else float(value)


def _probe_answer(answer: str | None) -> str:
    return storable_text(answer or "")


@transaction.atomic
def hack_to_probe(*, task: Task, rollout_id: int, user):
    """Add the flagged rollout's final answer to the task's rubric probes, with `probe_max_reward` (below the task's
    pass threshold and the hack's reward), as a new version; audited. The rules of hack_to_example: the task's
    editor only, a flagged hack of this task only. Refused when its answer is already a probe, or longer than a
    probe runs (sandbox PROBE_TEXT_MAX: make it an example answer instead), or when no reward is below the task's
    pass threshold. A probe answers with text only: the hack's workspace files go with its example answer."""
    from sandbox.services import PROBE_TEXT_MAX

    row = _flagged_hack(task=task, rollout_id=rollout_id, user=user, what="probes")
    latest = task.latest_version
    content = task_version_content(latest)
    content["environment_version"] = latest.environment_version  # a probe moves nothing else
    rubric = dict(content.get("rubric") or {})
    probes = list(rubric.get("probes") or [])
    answer = _probe_answer(Rollout.objects.only("answer").get(pk=rollout_id).answer)
    if len(answer) > PROBE_TEXT_MAX:
        raise DomainError(
            f"Rollout {rollout_id}'s answer is {len(answer)} characters; a probe answers at most {PROBE_TEXT_MAX}. "
            "Make it an example answer expected to fail instead.",
            code="invalid",
            details=[{"pointer": "/answer", "message": f"at most {PROBE_TEXT_MAX} characters"}],
        )
    if any(isinstance(probe, dict) and probe.get("answer") == answer for probe in probes):
        raise ConflictError(
            f"Rollout {rollout_id}'s answer is already a probe of {task.slug}.", extra={"rollout": rollout_id}
        )
    threshold = _pass_threshold(latest.spec)
    limit = probe_max_reward(pass_threshold=threshold, reward=row["reward"])
    if limit is None:
        raise DomainError(
            f"{task.slug} passes every answer (pass threshold {threshold:g}): no probe's max_reward is below it.",
            code="invalid",
            details=[{"pointer": "/rubric/pass_threshold", "message": "no reward is below it"}],
        )
    rubric["probes"] = [*probes, {"answer": answer, "max_reward": limit}]
    content["rubric"] = rubric
    message = f"probe from rollout {rollout_id} (scored {row['reward']:.2f}, blind scorers fail it): at most {limit:g}"
    return _hack_version_save(
        task=task,
        latest=latest,
        content=content,
        user=user,
        rollout_id=rollout_id,
        message=message,
        data={"probe": {"index": len(probes), "max_reward": limit}},
    )
