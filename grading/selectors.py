"""Reads for grading: permission-aware getters, the rows of a grade table, judge agreement."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Max, Prefetch, QuerySet, Sum
from django.db.models.fields.json import KeyTextTransform
from django.http import Http404

from accounts import permissions
from authoring.selectors import task_version_before, task_version_check_readable
from grading.engine import example_answers as engine_examples
from grading.engine.calibration import AgreementStats, JudgeRates, cohen_kappa, judge_rates
from grading.engine.models import flat_checks, kinds_with
from grading.models import CheckResult, DryRun, ExampleRun, Grade, JudgeLabel
from gymwright.errors import NotAllowed
from gymwright.numbers import format_number
from gymwright.sql import Prepared

PENDING = "pending"


def grade_check_readable(*, user, grade: Grade, what: str) -> None:
    """Http404 (naming `what`) unless `user` may read `grade`. A rollout's grade follows its task version (a lab
    member: approved versions only). A dry run's grade follows the dry run (`dry_run_get_for_user`): its author's
    scratch work, graded against the rubric as it was in their editor (unsaved, whatever version the panel sat on),
    so only they and admins read it, and never a member who reads approved work only (lab)."""
    if not permissions.reads_drafts(user):
        task_version_check_readable(user=user, version=grade.task_version, what=what)
    if grade.source == Grade.Source.DRY_RUN and not (
        permissions.is_admin(user) or (permissions.reads_drafts(user) and grade.created_by_id == user.pk)
    ):
        raise Http404(f"No {what}")


def grade_get_for_user(*, grade_id: int, user) -> Grade:
    if not permissions.can_view(user):
        raise Http404
    try:
        grade = (
            Grade.objects.select_related("task_version", "task_version__task", "created_by")
            .prefetch_related(check_results_prefetch())
            .get(id=grade_id)
        )
    except Grade.DoesNotExist:
        raise Http404(f"No grade {grade_id}")
    grade_check_readable(user=user, grade=grade, what=f"grade {grade_id}")
    return grade


def check_results_prefetch() -> Prefetch:
    """For Grade querysets: check results in order, with labels and reviewers (what the grade table reads)."""
    return Prefetch(
        "check_results",
        queryset=CheckResult.objects.order_by("position").prefetch_related(
            Prefetch("labels", queryset=JudgeLabel.objects.select_related("reviewer").order_by("created_at", "id"))
        ),
    )


def check_result_get_for_user(*, check_result_id: int, user, action: str = "view") -> CheckResult:
    """The check result, if `user` may see it; NotAllowed for "label" unless a reviewer or admin."""
    if not permissions.can_view(user):
        raise Http404
    try:
        check_result = (
            CheckResult.objects.select_related("grade")
            .prefetch_related(Prefetch("labels", queryset=JudgeLabel.objects.select_related("reviewer")))
            .get(id=check_result_id)
        )
    except CheckResult.DoesNotExist:
        raise Http404(f"No check result {check_result_id}")
    if not permissions.reads_drafts(user):  # a lab member: results of approved versions only
        task_version_check_readable(
            user=user, version=check_result.grade.task_version, what=f"check result {check_result_id}"
        )
    if action == "label" and not permissions.can_review(user):
        raise NotAllowed("Only reviewers and admins can confirm or overrule the judge.")
    return check_result


def dry_run_get_for_user(*, dry_run_id: int, user) -> DryRun:
    """A dry run is its author's scratch work: only they (or an admin) see it."""
    try:
        dry_run = DryRun.objects.select_related("grade", "task", "task_version").get(id=dry_run_id)
    except DryRun.DoesNotExist:
        raise Http404(f"No dry run {dry_run_id}")
    if dry_run.created_by_id != getattr(user, "id", None) and not permissions.is_admin(user):
        raise Http404(f"No dry run {dry_run_id}")
    return dry_run


def grades_for_task_version(*, task_version) -> QuerySet[Grade]:
    return Grade.objects.filter(task_version=task_version).select_related("created_by").order_by("-created_at", "-id")


# ---------------------------------------------------------------- the table


@dataclass
class CheckRow:
    check_id: str
    kind: str
    title: str
    status: str  # scored | unscored | pending
    score: float | None
    points: float
    awarded: float | None
    explanation: str
    depth: int
    required: bool = False
    votes: list = field(default_factory=list)
    duration_ms: int | None = None
    parent_check_id: str = ""
    check_result: CheckResult | None = None
    labels: list[JudgeLabel] = field(default_factory=list)
    #: A `tests` check's per-test results ({id, outcome, message}), as the grade document holds them.
    tests: list[dict] = field(default_factory=list)

    @property
    def id(self) -> int | None:
        """The stored CheckResult's id (what a reviewer labels), None for a grade that was not stored."""
        return self.check_result.pk if self.check_result is not None else None

    @property
    def judged(self) -> bool:
        return self.kind in kinds_with("judged")

    @property
    def indent_em(self) -> float:
        return self.depth * 1.5

    @property
    def votes_text(self) -> str:
        return ", ".join(
            ("met" if vote else "not met") if isinstance(vote, bool) else format_number(vote) for vote in self.votes
        )

    @property
    def tests_summary(self) -> str:
        """e.g. "3 of 4 tests passed"."""
        passed = sum(1 for test in self.tests if test["outcome"] == "passed")
        return f"{passed} of {len(self.tests)} test{'s' if len(self.tests) != 1 else ''} passed"

    @property
    def score_text(self) -> str:
        return format_number(self.score)

    @property
    def points_text(self) -> str:
        return format_number(self.points)

    @property
    def awarded_text(self) -> str:
        return format_number(self.awarded)


@dataclass
class GradeTable:
    rows: list[CheckRow]
    reward: float
    earned: float
    max: float
    passed: bool
    gated: bool
    complete: bool
    grade: Grade | None = None
    # The reward had every unscored check been met (scoring rule 2); None for a grade totalled under the
    # old rule, whose max left unscored checks out.
    reward_upper: float | None = None

    @property
    def unscored(self) -> int:
        return sum(1 for row in self.rows if row.status == "unscored")

    @property
    def reward_range(self) -> str:
        """ "reward 0.40" for a complete grade, "reward 0.40–1.00" for an incomplete one's bounds."""
        return engine_examples.reward_range_text(self.reward, self.reward_upper)

    @property
    def unscored_reasons(self) -> list[str]:
        """Why checks are unscored, each reason once (the checks with no unscored check under them)."""
        reasons: list[str] = []
        for index, row in enumerate(self.rows):
            if row.status != "unscored":
                continue
            below = self.rows[index + 1 :]
            has_unscored_child = any(
                child.status == "unscored"
                for child in itertools.takewhile(lambda child: child.depth > row.depth, below)  # noqa: B023 - used at once
            )
            if not has_unscored_child and row.explanation and row.explanation not in reasons:
                reasons.append(row.explanation)
        return reasons

    @property
    def pending(self) -> int:
        return sum(1 for row in self.rows if row.status == PENDING)

    @property
    def unscored_points(self) -> float:
        """Points of the top-level checks that could not be scored (a group counts as a whole)."""
        return sum(
            row.points for row in self.rows if row.depth == 0 and row.status == "unscored" and (row.points or 0) > 0
        )

    @property
    def incomplete(self) -> bool:
        return not self.pending and (self.unscored > 0 or not self.complete)

    @property
    def summary(self) -> str:
        """e.g. "12 / 15 points, reward 0.80, passed"; a grade with unscored checks gives no verdict, but
        its range: "incomplete — reward 0.40–1.00, 2 checks unscored: no judge model configured"."""
        points = f"{format_number(self.earned)} / {format_number(self.max)} points, reward {format_number(self.reward, fixed=True)}"
        if self.pending:  # no verdict until the judge has spoken
            if self.reward_upper is not None:
                return f"so far {format_number(self.earned)} / {format_number(self.max)} points, {self.reward_range}"
            return f"so far {points}"
        if self.incomplete and self.reward_upper is not None:
            count = self.unscored
            head = f"incomplete — {self.reward_range}"
            if count:
                reasons = self.unscored_reasons
                head += f", {count} check{'s' if count != 1 else ''} unscored" + (
                    f": {'; '.join(reasons[:2])}{'; …' if len(reasons) > 2 else ''}" if reasons else ""
                )
            return head
        if self.incomplete:
            if self.unscored_points:
                # The engine's max leaves unscored checks out; the author thinks in the rubric's total.
                total = self.max + self.unscored_points
                return (
                    f"incomplete — {format_number(self.unscored_points)} of {format_number(total)} points "
                    "could not be scored"
                )
            return "incomplete — some checks could not be scored"
        return f"{points}, {'passed' if self.passed else 'not passed'}"

    @property
    def caveats(self) -> list[str]:
        notes = []
        if self.gated:
            notes.append("gated: a required check was not met, so the reward is 0")
        if self.pending:
            notes.append(f"{self.pending} judge check{'s' if self.pending != 1 else ''} pending")
        if self.incomplete:
            unscored = f"{self.unscored} check{'s' if self.unscored != 1 else ''} unscored" if self.unscored else ""
            if self.reward_upper is None:
                notes.append(
                    f"{unscored + ' · ' if unscored else ''}{format_number(self.earned)} / "
                    f"{format_number(self.max)} points scored, reward {format_number(self.reward, fixed=True)} "
                    "so far (not a verdict; graded under the old scoring rule — grade it again)"
                )
            else:
                notes.append(
                    f"{format_number(self.earned)} / {format_number(self.max)} points earned by the scored "
                    f"checks: {self.reward_range}, the lower bound, not a verdict"
                )
        return notes


def _tests_of(check: Any) -> list[dict]:
    """A stored check result's per-test results, kept to the shape the page shows (the document is the
    grader's, but stored JSON is read as untrusted)."""
    tests = check.get("tests") if isinstance(check, dict) else None
    if not isinstance(tests, list):
        return []
    return [
        {
            "id": str(test.get("id", ""))[:500],
            "outcome": str(test.get("outcome", ""))[:16],
            "message": str(test.get("message") or "")[:500],
        }
        for test in tests[:1000]
        if isinstance(test, dict)
    ]


def _document_tests(document: Any) -> dict[str, list[dict]]:
    """{check id: its per-test results} of a grade document's `tests` checks."""
    checks = document.get("checks") if isinstance(document, dict) else None
    return {
        str(row.check.get("id")): _tests_of(row.check)
        for row in flat_checks(checks)
        if isinstance(row.check, dict) and row.check.get("kind") == "tests"
    }


def _rows_from_document(checks: Any) -> list[CheckRow]:
    return [
        CheckRow(
            check_id=check.get("id", ""),
            kind=check.get("kind", ""),
            title=check.get("title") or "",
            status=check.get("status", ""),
            score=check.get("score"),
            points=check.get("points", 0),
            awarded=check.get("awarded"),
            explanation=check.get("explanation") or "",
            depth=depth,
            required=bool(check.get("required")),
            votes=list(check.get("votes") or []),
            duration_ms=check.get("duration_ms"),
            parent_check_id=parent_id,
            tests=_tests_of(check),
        )
        for check, parent_id, depth, _ in flat_checks(checks)
    ]


def _mark_judge_checks(rows: list[CheckRow], *, status: str, explanation: str) -> None:
    """Judge checks (and the groups above them) are not graded yet: a worker is at it, or it failed."""
    for index, row in enumerate(rows):
        if not row.judged:
            continue
        row.status, row.score, row.awarded, row.explanation = status, None, None, explanation
        depth = row.depth
        for parent in reversed(rows[:index]):
            if depth == 0:
                break
            if parent.depth < depth:
                parent.status, parent.score, parent.awarded, parent.explanation = status, None, None, explanation
                depth = parent.depth


# A stored grade's table (a rollout's page): compiled once per process (gymwright.sql).
_check_results = Prepared(
    lambda grade_id: CheckResult.objects.filter(grade_id=grade_id).order_by("position"), grade_id=int
)
_grade_labels = Prepared(
    lambda grade_id: (
        JudgeLabel.objects.filter(check_result__grade_id=grade_id)
        .select_related("reviewer")
        .order_by("created_at", "id")
    ),
    grade_id=int,
)


def grade_table(grade: Grade | dict | Any, *, pending_judge: bool = False, judge_note: str = "") -> GradeTable:
    """The rows and totals to show for a stored Grade, or for a grade document that was not stored.

    With `pending_judge`, judge checks show as pending (a dry run whose judge part is still
    running); with a `judge_note` they show as unscored for that reason (the judge job failed).
    """
    if isinstance(grade, Grade):
        tests = _document_tests(grade.document) if "document" not in grade.get_deferred_fields() else {}
        if "check_results" in getattr(grade, "_prefetched_objects_cache", {}):
            results = sorted(grade.check_results.all(), key=lambda result: result.position)
            labels = {r.pk: list(r.labels.all()) for r in results}
        else:  # a caller that did not prefetch (a rollout's page): two queries for this grade
            results = _check_results(grade_id=grade.pk)
            labels = {}
            for label in _grade_labels(grade_id=grade.pk):
                labels.setdefault(label.check_result_id, []).append(label)
        rows = [
            CheckRow(
                check_id=r.check_id,
                kind=r.kind,
                title=r.title,
                status=r.status,
                score=r.score,
                points=r.points,
                awarded=r.awarded,
                explanation=r.explanation,
                depth=r.depth,
                required=r.required,
                votes=list(r.votes or []),
                duration_ms=r.duration_ms,
                parent_check_id=r.parent_check_id,
                check_result=r,
                labels=labels.get(r.pk, []),
                tests=tests.get(r.check_id, []) if r.kind == "tests" else [],
            )
            for r in results
        ]
        return GradeTable(
            rows=rows,
            reward=grade.reward,
            earned=grade.earned,
            max=grade.max,
            passed=grade.passed,
            gated=grade.gated,
            complete=grade.complete,
            grade=grade,
            reward_upper=_stored_reward_upper(grade),
        )
    document = grade if isinstance(grade, dict) else grade.to_document()
    rows = _rows_from_document(document.get("checks") or [])
    if judge_note:
        _mark_judge_checks(rows, status=CheckResult.Status.UNSCORED, explanation=judge_note)
    elif pending_judge:
        _mark_judge_checks(rows, status=PENDING, explanation="waiting for the judge")
    upper = document.get("reward_upper")
    if upper is None and document.get("complete", True):
        upper = document.get("reward", 0.0)
    return GradeTable(
        rows=rows,
        reward=document.get("reward", 0.0),
        earned=document.get("earned", 0.0),
        max=document.get("max", 0.0),
        passed=bool(document.get("passed")),
        gated=bool(document.get("gated")),
        complete=bool(document.get("complete", True)),
        reward_upper=upper,
    )


def _stored_reward_upper(grade: Grade) -> float | None:
    """A stored grade's upper bound: its own under the current scoring rule, its reward when complete
    (the bounds agree), None for an incomplete grade of the old rule."""
    upper = getattr(grade, "reward_upper", None)
    if upper is not None and getattr(grade, "scoring_rule", 2) >= 2:
        return upper
    return grade.reward if grade.complete else None


# ---------------------------------------------------------------- judge–human agreement


def _judge_labels(*, task=None, task_version=None, environment=None, check_id: str | None = None):
    labels = JudgeLabel.objects.filter(check_result__status=CheckResult.Status.SCORED)
    if task_version is not None:
        labels = labels.filter(check_result__grade__task_version=task_version)
    if task is not None:
        labels = labels.filter(check_result__grade__task_version__task=task)
    if environment is not None:
        labels = labels.filter(check_result__grade__task_version__task__environment=environment)
    if check_id:
        labels = labels.filter(check_result__check_id=check_id)
    return labels


def _document_answer_key(row: dict):
    """What the judge read, as far as grading knows it: the answer a grade kept; else the label is its own
    answer. (review.agreement knows rollouts too and passes its own key.)"""
    answer = row.get("document_answer")
    return ("answer", answer) if isinstance(answer, str) else ("alone", row["check_result_id"])


def _stats(rows: list[dict], answer_key=_document_answer_key) -> AgreementStats:
    """Agreement over label rows, one observation per distinct (check, answer, judge verdict, human verdict):
    one verdict on a card of identical answers labels every copy, and must not count as many labels. Percent
    agreement over every observation, kappa over met / not met ones; `answers` counts (check, answer) pairs."""
    observations: dict[tuple, dict] = {}
    answers = set()
    for row in rows:
        check = (row["check_result__grade__task_version__task__slug"], row["check_result__check_id"])
        answer = answer_key(row)
        answers.add((*check, answer))
        judge_met = row["check_result__score"] >= 0.5
        observations.setdefault((*check, answer, judge_met, row["verdict"], row["agrees"]), row)
    distinct = list(observations.values())
    pairs = [
        (row["check_result__score"] >= 0.5, row["verdict"] == JudgeLabel.Verdict.MET)
        for row in distinct
        if row["verdict"] in (JudgeLabel.Verdict.MET, JudgeLabel.Verdict.NOT_MET)
    ]
    return AgreementStats(
        labels=len(distinct),
        agreed=sum(1 for row in distinct if row["agrees"]),
        kappa=cohen_kappa(pairs),
        answers=len(answers),
    )


_LABEL_FIELDS = (
    "verdict",
    "reviewer_id",
    "agrees",
    "check_result_id",
    "check_result__score",
    "check_result__check_id",
    "check_result__grade_id",
    "check_result__grade__source",
    "check_result__grade__rollout_id",
    "check_result__grade__task_version_id",
    "check_result__grade__task_version__sha256",
    "check_result__grade__task_version__task_id",
    "check_result__grade__task_version__task__slug",
)


def judge_labels_stamp(*, task) -> tuple:
    """What names the set of `task`'s labels as agreement reads them (one aggregate query): their count, ids and
    last change. A label recorded, replaced or removed changes it; the answers and check results they are about
    never change once made."""
    return tuple(_labels_stamp(task_id=task.pk)[0])


def _labels_stamp_query(task_id):
    # the aggregate of every label of the task as one row (no GROUP BY), as .aggregate() reads it
    queryset = (
        _judge_labels()
        .filter(check_result__grade__task_version__task_id=task_id)
        .order_by()
        .annotate(n=Count("id"), ids=Sum("id"), last=Max("updated_at"))
        .values_list("n", "ids", "last")
    )
    queryset.query.group_by = None
    return queryset


# compiled once per process (gymwright.sql): the task page's gates and the preview page read it on every view
_labels_stamp = Prepared(_labels_stamp_query, task_id=int)


def judge_label_rows(*, task=None, task_version=None, environment=None, check_id: str | None = None) -> list[dict]:
    """The label rows agreement is computed from, each with the answer its grade kept (`document_answer`)."""
    return list(
        _judge_labels(task=task, task_version=task_version, environment=environment, check_id=check_id)
        .annotate(document_answer=KeyTextTransform("answer", "check_result__grade__document"))
        .values(*_LABEL_FIELDS, "document_answer")
        .order_by("check_result__grade__task_version__task__slug", "check_result__check_id", "id")
    )


def judge_agreement(*, task=None, task_version=None, environment=None, check_id: str | None = None) -> AgreementStats:
    """How often reviewers agree with the judge, and Cohen's kappa on binary (met / not met) verdicts."""
    return _stats(judge_label_rows(task=task, task_version=task_version, environment=environment, check_id=check_id))


def judge_agreement_summary(*, task=None, environment=None, answer_keys=None, rows: list[dict] | None = None) -> dict:
    """Agreement and judge rates overall, per task and per (task, check), from one query:
    {"overall": AgreementStats, "overall_rates": JudgeRates, "tasks": {slug: AgreementStats},
     "task_rates": {slug: JudgeRates}, "checks": [{"task": slug, "check_id": id, "stats": AgreementStats,
     "rates": JudgeRates}]}. Pooled rates are the sums of the checks' counts.
    `answer_keys(rows)`, when given, returns the function that says which answer a label row is about; `rows`, when
    given, are the label rows to count (judge_label_rows of `task` or `environment`, some left out), read by the
    caller."""
    if rows is None:
        rows = judge_label_rows(task=task, environment=environment)
    answer_key = answer_keys(rows) if answer_keys else _document_answer_key
    by_task: dict[str, list[dict]] = {}
    by_check: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        slug = row["check_result__grade__task_version__task__slug"]
        by_task.setdefault(slug, []).append(row)
        by_check.setdefault((slug, row["check_result__check_id"]), []).append(row)
    checks = [
        {
            "task": slug,
            "check_id": check_id,
            "stats": _stats(check_rows, answer_key),
            "rates": judge_check_rates(check_rows, answer_key),
        }
        for (slug, check_id), check_rows in by_check.items()
    ]
    task_rates: dict[str, JudgeRates] = {}
    for item in checks:
        task_rates[item["task"]] = task_rates.get(item["task"], JudgeRates()) + item["rates"]
    return {
        "overall": _stats(rows, answer_key),
        "overall_rates": sum((item["rates"] for item in checks), JudgeRates()),
        "tasks": {slug: _stats(task_rows, answer_key) for slug, task_rows in by_task.items()},
        "task_rates": task_rates,
        "checks": checks,
    }


def judge_check_rates(rows: list[dict], answer_key=_document_answer_key) -> JudgeRates:
    """TPR / TNR counts of ONE check's label rows (grading.engine.calibration.judge_rates: one observation per
    distinct answer and judge verdict, the reviewers' majority as the truth), over met / not met verdicts."""
    return judge_rates(
        (
            answer_key(row),
            row["check_result__score"] >= 0.5,
            row["reviewer_id"],
            row["verdict"] == JudgeLabel.Verdict.MET,
        )
        for row in rows
        if row["verdict"] in (JudgeLabel.Verdict.MET, JudgeLabel.Verdict.NOT_MET)
    )


# ---------------------------------------------------------------- example answers


@dataclass
class ExampleRow:
    """One example answer on the task page: what it is, what its author expects, how it graded."""

    verdict: engine_examples.ExampleVerdict
    answer: str
    files: list[str]
    grade: dict | None
    previous: engine_examples.ExampleVerdict | None = None  # the same example on the version before
    previous_number: int | None = None  # that version's number (authoring.selectors.task_version_before)

    @property
    def status_words(self) -> str:
        return engine_examples.STATUS_WORDS.get(self.verdict.status, self.verdict.status)

    @property
    def changed(self) -> bool:
        return self.previous is not None and self.previous.status != self.verdict.status


def example_run_of(*, task_version) -> ExampleRun | None:
    if not task_version.spec.get("examples"):  # a version without examples gets no run
        return None
    return ExampleRun.objects.filter(task_version=task_version).first()


def example_results(*, task_version, run: ExampleRun | None = None) -> list[dict]:
    """One dict per example of the version (ExampleVerdict fields + "grade"), pending until graded."""
    examples = task_version.spec.get("examples") or []
    if run is None:
        run = example_run_of(task_version=task_version)
    if run is not None and run.status == ExampleRun.Status.DONE and len(run.results) == len(examples):
        return [engine_examples.current_result(result) for result in run.results]
    if run is not None and run.status == ExampleRun.Status.ERROR:
        status, message = engine_examples.ERROR, run.error or "grading failed"
    elif run is not None:
        status, message = engine_examples.PENDING, f"being graded ({run.graded} of {run.total} done)"
    else:
        status, message = engine_examples.PENDING, "not graded yet"
    return [
        {**engine_examples.example_failed(example, message, status=status).to_dict(), "grade": None}
        for example in examples
    ]


def example_verdicts(*, task_version) -> list[engine_examples.ExampleVerdict]:
    """The version's example answers as graded (pending ones included); [] when it has none."""
    return [engine_examples.ExampleVerdict.from_dict(result) for result in example_results(task_version=task_version)]


def example_rows(*, task_version, run: ExampleRun | None = None, user=None) -> list[ExampleRow]:
    """The task page's example answers, each with its verdict on the version before it that `user` may read
    (the parent; for a lab member the approved version before it), when that version had it; `run`: the
    version's ExampleRun, when the caller has it already."""
    examples = task_version.spec.get("examples") or []
    before = task_version_before(version=task_version, user=user)
    previous = {verdict.name: verdict for verdict in example_verdicts(task_version=before)} if before else {}
    return [
        ExampleRow(
            verdict=engine_examples.ExampleVerdict.from_dict(result),
            answer=example.get("answer", ""),
            files=[item.get("path", "") for item in example.get("files") or []],
            grade=result.get("grade"),
            previous=previous.get(example.get("name")),
            previous_number=before.number if before else None,
        )
        for example, result in zip(examples, example_results(task_version=task_version, run=run))
    ]


def example_verdict_changes(*, version_a, version_b) -> list[dict]:
    """For the diff view: each example's status on both versions and whether it changed."""
    return engine_examples.verdict_changes(
        example_verdicts(task_version=version_a), example_verdicts(task_version=version_b)
    )


def environment_judge(*, environment) -> dict:
    """What judges the judge checks of `environment`'s tasks whose rubric names no judge endpoint: {"chosen": the
    endpoint its owner chose or None, "used": the endpoint's name or None (none configured), "help": who can
    give them one and where (grading.endpoints.JudgeHelp) when none is used}."""
    from grading.endpoints import endpoint_config_for, judge_help
    from grading.models import ModelEndpoint

    chosen = ModelEndpoint.objects.filter(role=ModelEndpoint.Role.JUDGE, environment_judges__environment=environment)
    chosen = chosen.first()
    used = endpoint_config_for("judge", chosen_id=chosen.pk if chosen is not None else None)
    return {
        "chosen": chosen,
        "used": used.name if used is not None else None,
        "help": judge_help(environment) if used is None else None,
    }
