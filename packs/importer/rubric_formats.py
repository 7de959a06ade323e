"""Rubric formats people already have: HealthBench rows and Rubrics-as-Rewards (RaR) rows, read into
candidates and written back from task documents (docs/formats.md, "HealthBench and RaR rubrics").

HealthBench (openai/simple-evals, healthbench_eval.py): one conversation per line,
`{"prompt": [{"role", "content"}, ...], "rubrics": [{"criterion", "points", "tags"}], "example_tags",
"prompt_id", ...}`. RaR (Gunjal et al. 2025; the RaR-Medicine / RaR-Science rows): `{"question",
"reference_answer", "rubric": [{"title", "description", "weight"}], ...}`, the weight a number (5 for
Essential, 3-4 Important, 1-2 Optional, -1/-2 Pitfall; the class also starts the description,
"Essential Criteria: ...") or, in files people write by hand, the class's name.

Each criterion becomes an `llm_judge` check `criterion_N` (N from 1, in order) whose points are the
criterion's (negative: a penalty, met when the bad behaviour is present, as both formats mean it). What
Gymwright's task has no field for is kept in the task's metadata under the format's name, so that the
export writes the row back exactly: the conversation's messages, the row's other keys, a criterion's
other keys (by check id) and a weight given as a class name (by check id)."""

from __future__ import annotations

import math
import re
from typing import Any

from grading.engine import content_sha256
from grading.engine.models import MAX_TAGS, PROMPT_MAX_CHARS, TAG_MAX_CHARS, TITLE_MAX_CHARS
from grading.engine.validation import escape_pointer_token
from gymwright.errors import DomainError
from gymwright.storable_input import nul_check
from packs.importer.records import Candidate, Rejection

HEALTHBENCH = "healthbench"
RAR = "rar"
FORMATS = (HEALTHBENCH, RAR)

# A weight class's points when a row names the class instead of a number (RaR's own rows carry the number).
# From the bands of RaR's generation prompt and its released rows: Essential 5, Important 3-4, Optional 1-2,
# Pitfall -1/-2; the export writes the class name back while the points are still the class's.
RAR_CLASS_POINTS = {"essential": 5, "important": 3, "optional": 1, "pitfall": -2}

# Bounds on what a row may hold, beside the import's own (its bytes, rows, the task format's fields).
MAX_CRITERIA = 500  # per row (HealthBench's longest rubric has a few dozen)
CRITERION_MAX_CHARS = 20_000
CHECK_TAG_MAX_CHARS = 200  # a criterion's tags ("axis:accuracy", "cluster:..."); checks' tags have no format bound
MAX_MESSAGES = 1_000
POINTS_MAX = 1_000_000  # |points|: more is no weight anyone meant
KEPT_MAX_DEPTH = 32  # nesting of the row's other keys, kept in the task's metadata

# How a conversation of more than one message becomes the task's prompt: each message as its role in
# bold on a line of its own, a blank line, its content; messages separated by a blank line. The messages
# themselves stay in the metadata: the export writes them while the prompt is still their rendering.
ROLE_LINE = "**{role}:**"


def render_conversation(messages: list[dict]) -> str:
    """The task prompt of a HealthBench conversation: one user message is its content as it is; any
    other conversation is rendered turn by turn (ROLE_LINE)."""
    if len(messages) == 1 and messages[0]["role"] == "user":
        return messages[0]["content"]
    return "\n\n".join(f"{ROLE_LINE.format(role=m['role'])}\n\n{m['content']}" for m in messages)


class Refused(Exception):
    def __init__(self, pointer: str, message: str):
        super().__init__(message)
        self.pointer, self.message = pointer, message


# A row's reference answer is copied into each of its judge checks (the judge reads a check's own `reference`):
# bounded in all, so a long answer times many criteria cannot make a task document hundreds of times its row (a
# 426 kB RaR row made a 200 MB task). Copies of one string cost nothing in memory until the document is written.
REFERENCE_COPIES_MAX_CHARS = 4_000_000


def reference_copies_check(answer: str | None, copies: int, pointer: str) -> None:
    """Refused when `answer`, copied into `copies` judge checks, would pass REFERENCE_COPIES_MAX_CHARS."""
    total = len(answer or "") * copies
    if copies > 1 and total > REFERENCE_COPIES_MAX_CHARS:
        raise Refused(
            pointer,
            f"the reference answer ({len(answer):,} characters) would be copied into each of {copies} judge checks "
            f"({total:,} characters in all; at most {REFERENCE_COPIES_MAX_CHARS:,}): shorten it, or give fewer "
            "criteria per task",
        )


def detect(row: Any) -> str | None:
    """The rubric format a JSON row is in, by its fields: HEALTHBENCH (a `rubrics` list), RAR (a `rubric`
    list), or None (a task document or a table's row)."""
    if not isinstance(row, dict):
        return None
    if isinstance(row.get("rubrics"), list):
        return HEALTHBENCH
    if isinstance(row.get("rubric"), list):
        return RAR
    return None


def points_value(value: Any, pointer: str) -> int | float:
    """A criterion's points: a finite non-zero number of at most POINTS_MAX either way."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Refused(pointer, f"points must be a number, not {_kind(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise Refused(pointer, f"points must be a finite number, not {value}")
    if value == 0:
        raise Refused(pointer, "points must not be 0 (positive: a reward, negative: a penalty)")
    if abs(value) > POINTS_MAX:
        raise Refused(pointer, f"points of {value:.6g} are out of range (at most {POINTS_MAX:,} either way)")
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )


def _text(value: Any, pointer: str, what: str, *, limit: int, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise Refused(pointer, f"{what} must be a string, not {_kind(value)}")
    if not empty and not value.strip():
        raise Refused(pointer, f"{what} is empty")
    if len(value) > limit:
        raise Refused(pointer, f"{what} is longer than {limit:,} characters")
    return value


def _kept(value: Any, pointer: str) -> Any:
    """A value kept as it is in the metadata: nested at most KEPT_MAX_DEPTH levels (walked iteratively)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > KEPT_MAX_DEPTH:
            raise Refused(pointer, f"nested more than {KEPT_MAX_DEPTH} levels deep")
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return value


def _criteria(items: Any, key: str) -> list:
    if not isinstance(items, list):
        raise Refused(f"/{key}", f"{key} must be a list of criteria, not {_kind(items)}")
    if not items:
        raise Refused(f"/{key}", f"{key} is empty: a task needs at least one criterion")
    if len(items) > MAX_CRITERIA:
        raise Refused(f"/{key}", f"{key} has {len(items)} criteria, more than {MAX_CRITERIA}")
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise Refused(f"/{key}/{index}", f"a criterion must be an object, not {_kind(item)}")
    return items


def _extras(item: dict, known: tuple[str, ...], pointer: str) -> dict:
    return {k: _kept(v, f"{pointer}/{escape_pointer_token(k)}") for k, v in item.items() if k not in known}


def _slug(given: Any, stem: str, content: dict) -> str:
    if isinstance(given, str) and given.strip():
        slug = re.sub(r"[^a-z0-9]+", "-", given.strip().lower()).strip("-")[:64].strip("-")
        if slug:
            return slug
    return f"{stem or 'task'}-{content_sha256(content)[:10]}"


def _title(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first[:120] or "Imported task"


def format_candidate(
    fmt: str, where: str, row: Any, first_where: dict[str, str], *, stem: str
) -> Candidate | Rejection:
    """A HealthBench or RaR row as a candidate, or its rejection naming the JSON pointer in the row."""
    if not isinstance(row, dict):
        return Rejection(where, f"expected a {_NAMES[fmt]} row (an object), got {_kind(row)}", "")
    try:
        nul_check(row, what="The row")
    except DomainError as exc:
        return Rejection(where, exc.message, exc.details[0]["pointer"])
    try:
        content, given = (_healthbench if fmt == HEALTHBENCH else _rar)(row)
    except Refused as refusal:
        return Rejection(where, f"{_NAMES[fmt]} row: {refusal.message}", refusal.pointer)
    slug = _slug(given, stem, content)
    if slug in first_where:
        return Rejection(
            where,
            f"duplicate task id {slug!r} (first on {first_where[slug]})"
            if isinstance(given, str) and given.strip()
            else f"the same task as {first_where[slug]}",
            "/prompt_id" if fmt == HEALTHBENCH else "/id",
            slug,
        )
    first_where[slug] = where
    return Candidate(where=where, slug=slug, environment=None, content=content)


_NAMES = {HEALTHBENCH: "HealthBench", RAR: "RaR"}


def _healthbench(row: dict) -> tuple[dict, Any]:
    messages = row.get("prompt")
    if not isinstance(messages, list) or not messages:
        raise Refused("/prompt", "prompt must be a non-empty list of messages ({role, content})")
    if len(messages) > MAX_MESSAGES:
        raise Refused("/prompt", f"prompt has {len(messages)} messages, more than {MAX_MESSAGES}")
    for index, message in enumerate(messages):
        at = f"/prompt/{index}"
        if not isinstance(message, dict):
            raise Refused(at, f"a message must be an object with role and content, not {_kind(message)}")
        _text(message.get("role"), f"{at}/role", "role", limit=64)
        _text(message.get("content"), f"{at}/content", "content", limit=PROMPT_MAX_CHARS, empty=True)
        _kept(message, at)
    prompt = render_conversation(messages)
    if len(prompt) > PROMPT_MAX_CHARS:
        raise Refused("/prompt", f"the conversation is longer than {PROMPT_MAX_CHARS:,} characters")
    checks, items_kept = [], {}
    for index, item in enumerate(_criteria(row.get("rubrics"), "rubrics")):
        at = f"/rubrics/{index}"
        check_id = f"criterion_{index + 1}"
        criterion = _text(item.get("criterion"), f"{at}/criterion", "criterion", limit=CRITERION_MAX_CHARS)
        points = points_value(item.get("points"), f"{at}/points")
        tags = item.get("tags", [])
        if not isinstance(tags, list):
            raise Refused(f"{at}/tags", f"tags must be a list of strings, not {_kind(tags)}")
        if len(tags) > MAX_TAGS:
            raise Refused(f"{at}/tags", f"more than {MAX_TAGS} tags")
        for number, tag in enumerate(tags):
            _text(tag, f"{at}/tags/{number}", "a tag", limit=CHECK_TAG_MAX_CHARS)
        checks.append(
            {
                "id": check_id,
                "kind": "llm_judge",
                "points": points,
                "criterion": criterion,
                **({"tags": list(tags)} if tags else {}),
            }
        )
        if extra := _extras(item, ("criterion", "points", "tags"), at):
            items_kept[check_id] = extra
    row_kept = _extras(row, ("prompt", "rubrics"), "")
    example_tags = row.get("example_tags")
    tags = (
        [t for t in example_tags if isinstance(t, str) and t.strip() and len(t) <= TAG_MAX_CHARS][:MAX_TAGS]
        if isinstance(example_tags, list)
        else []
    )
    last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), messages[-1]["content"])
    kept: dict = {"prompt": messages, "row": row_kept}
    if items_kept:
        kept["criteria"] = items_kept
    content = {
        "title": _title(last_user)[:TITLE_MAX_CHARS],
        "prompt": prompt,
        "rubric": {"schema": "gymwright.rubric/v1", "checks": checks},
        "solution": {"script": None, "answer": None},
        "files": [],
        "tags": list(dict.fromkeys(tags)),
        "metadata": {"source": HEALTHBENCH, HEALTHBENCH: kept},
    }
    return content, row.get("prompt_id")


def _rar(row: dict) -> tuple[dict, Any]:
    prompt_key = "question" if "question" in row else "prompt"
    prompt = _text(row.get(prompt_key), f"/{prompt_key}", prompt_key, limit=PROMPT_MAX_CHARS)
    answer = row.get("reference_answer")
    if answer is not None:
        answer = _text(answer, "/reference_answer", "reference_answer", limit=PROMPT_MAX_CHARS, empty=True)
    checks, items_kept, classes = [], {}, {}
    for index, item in enumerate(_criteria(row.get("rubric"), "rubric")):
        at = f"/rubric/{index}"
        check_id = f"criterion_{index + 1}"
        criterion = _text(item.get("description"), f"{at}/description", "description", limit=CRITERION_MAX_CHARS)
        weight = item.get("weight")
        if isinstance(weight, str):
            points = RAR_CLASS_POINTS.get(weight.strip().lower())
            if points is None:
                raise Refused(
                    f"{at}/weight",
                    f"weight {weight[:40]!r} is neither a number nor a class (Essential, Important, Optional, Pitfall)",
                )
            classes[check_id] = weight
        else:
            points = points_value(weight, f"{at}/weight")
        check = {
            "id": check_id,
            "kind": "llm_judge",
            "points": points,
            "criterion": criterion,
        }
        if "title" in item:
            check["title"] = _text(item["title"], f"{at}/title", "title", limit=TITLE_MAX_CHARS, empty=True)
        if answer:
            check["reference"] = answer
        checks.append(check)
        if extra := _extras(item, ("title", "description", "weight"), at):
            items_kept[check_id] = extra
    reference_copies_check(answer, len(checks), "/reference_answer")
    kept: dict = {"row": _extras(row, (prompt_key, "rubric", "reference_answer"), "")}
    if prompt_key != "question":
        kept["prompt_key"] = prompt_key
    if "reference_answer" in row and answer is None:
        kept["row"]["reference_answer"] = None
    if classes:
        kept["weights"] = classes
    if items_kept:
        kept["criteria"] = items_kept
    content = {
        "title": _title(prompt)[:TITLE_MAX_CHARS],
        "prompt": prompt,
        "rubric": {"schema": "gymwright.rubric/v1", "checks": checks},
        "solution": {"script": None, "answer": answer},
        "files": [],
        "tags": [],
        "metadata": {"source": RAR, RAR: kept},
    }
    return content, row.get("id") if "id" in row else row.get("uid")


# ---------------------------------------------------------------- export


def _judge_checks(spec: dict) -> tuple[list[dict], list[str]]:
    """The task's top-level llm_judge checks, and the ids of the checks the formats have no place for."""
    checks = (spec.get("rubric") or {}).get("checks") or []
    judged = [c for c in checks if c.get("kind") == "llm_judge"]
    return judged, [c.get("id") for c in checks if c.get("kind") != "llm_judge"]


def healthbench_row(spec: dict, slug: str) -> tuple[dict, list[str]]:
    """A task document as a HealthBench row, and the ids of the checks left out (not llm_judge)."""
    kept = (spec.get("metadata") or {}).get(HEALTHBENCH) or {}
    messages = kept.get("prompt")
    prompt = spec.get("prompt") or ""
    if not (isinstance(messages, list) and _renders_to(messages, prompt)):
        messages = [{"role": "user", "content": prompt}]  # written or edited here: one user message
    judged, skipped = _judge_checks(spec)
    criteria_kept = kept.get("criteria") if isinstance(kept.get("criteria"), dict) else {}
    rubrics = []
    for check in judged:
        # `tags` is always written (HealthBench's reader requires it): a criterion without comes back with []
        item = {
            "criterion": check.get("criterion"),
            "points": check.get("points"),
            "tags": list(check.get("tags") or []),
        }
        rubrics.append({**item, **(criteria_kept.get(check.get("id")) or {})})
    row_kept = kept.get("row") if isinstance(kept.get("row"), dict) else None
    if row_kept is None:  # not imported from HealthBench: its id and tags as HealthBench names them
        row_kept = {"example_tags": list(spec.get("tags") or []), "prompt_id": slug}
    return {"prompt": messages, "rubrics": rubrics, **row_kept}, skipped


def _renders_to(messages: list, prompt: str) -> bool:
    try:
        return render_conversation(messages) == prompt
    except (KeyError, TypeError, AttributeError):
        return False


def rar_row(spec: dict, slug: str) -> tuple[dict, list[str]]:
    """A task document as a RaR row, and the ids of the checks left out (not llm_judge)."""
    kept = (spec.get("metadata") or {}).get(RAR) or {}
    judged, skipped = _judge_checks(spec)
    classes = kept.get("weights") if isinstance(kept.get("weights"), dict) else {}
    criteria_kept = kept.get("criteria") if isinstance(kept.get("criteria"), dict) else {}
    rubric = []
    for check in judged:
        item: dict = {}
        if check.get("title") is not None:
            item["title"] = check["title"]
        item["description"] = check.get("criterion")
        weight = classes.get(check.get("id"))
        # the class name goes back while the points are still the class's; edited points are written as they are
        still_class = isinstance(weight, str) and RAR_CLASS_POINTS.get(weight.strip().lower()) == check.get("points")
        item["weight"] = weight if still_class else check.get("points")
        rubric.append({**item, **(criteria_kept.get(check.get("id")) or {})})
    row: dict = {kept.get("prompt_key") or "question": spec.get("prompt") or ""}
    answer = (spec.get("solution") or {}).get("answer")
    if answer is not None:
        row["reference_answer"] = answer
    row["rubric"] = rubric
    row_kept = kept.get("row") if isinstance(kept.get("row"), dict) else {}
    return {**row, **{k: v for k, v in row_kept.items() if k not in row}}, skipped


EXPORTERS = {HEALTHBENCH: healthbench_row, RAR: rar_row}
