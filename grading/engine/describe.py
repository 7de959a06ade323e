"""A rubric check said in words, for people reading a rubric (the review page's check cards)."""

from __future__ import annotations

from collections.abc import Mapping

from .models import CHECK_MODELS


def _target(check: Mapping) -> str:
    target = str(check.get("target") or "answer")
    if target.startswith("file:"):
        return f"file {target[5:]}"
    if target.startswith("stdout:"):
        return f"the output of `{target[7:]}`"
    return {"answer": "the answer", "trajectory": "the transcript"}.get(target, target)


def _quote(value, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    return f"“{text[:limit]}{'…' if len(text) > limit else ''}”"


# How each string_match mode reads after "the answer".
_MODE_WORDS = {
    "equals": "equals",
    "contains": "contains",
    "not_contains": "does not contain",
    "starts_with": "starts with",
    "ends_with": "ends with",
}


def check_default(kind, key: str):
    """What the format fills in for a key a check of `kind` leaves out (the engine grades by it); None
    for a key without a default."""
    model = CHECK_MODELS.get(kind)
    field = model.model_fields.get(key) if model is not None else None
    return None if field is None else field.get_default(call_default_factory=True)


def _value(check: Mapping, key: str):
    value = check.get(key)
    return check_default(check.get("kind"), key) if value is None else value


def check_in_words(check: Mapping) -> str:
    """What must hold for `check` to be met, in one sentence; a key left out reads as the default the
    engine grades by (a string_match without a mode is "contains", not "equals")."""
    kind = check.get("kind")
    where = _target(check)
    if kind == "string_match":
        mode = str(_value(check, "mode"))
        return f"{where} {_MODE_WORDS.get(mode, mode.replace('_', ' '))} {_quote(check.get('expected'))}" + (
            " (case-sensitive)" if _value(check, "case_sensitive") else ""
        )
    if kind == "regex":
        must = _value(check, "must_match")
        count = _value(check, "min_count") or 1
        times = f" at least {count} times" if must and count > 1 else ""
        return f"{where} {'matches' if must else 'does not match'} /{check.get('pattern', '')}/{times}"
    if kind == "number":
        tolerance = check.get("tolerance") or check.get("rel_tolerance")
        return f"a number in {where} equals {check.get('expected')}" + (f" ± {tolerance}" if tolerance else "")
    if kind == "json_field":
        return (
            f"{where} is JSON whose {check.get('pointer', '')} {_value(check, 'op')} "
            f"{_quote(check.get('expected')) if 'expected' in check else ''}"
        ).rstrip()
    if kind == "file_exists":
        return f"a file matching {check.get('path')} exists"
    if kind == "file_content":
        for key, verb in (
            ("contains", "contains"),
            ("not_contains", "does not contain"),
            ("regex", "matches"),
            ("equals", "equals"),
            ("sha256", "has sha256"),
        ):
            if check.get(key) is not None:
                return f"file {check.get('path')} {verb} {_quote(check.get(key))}"
        return f"file {check.get('path')} has the expected content"
    if kind == "table_cell":
        sheet = f" sheet {check.get('sheet')}" if check.get("sheet") else ""
        return (
            f"cell ({check.get('row')}, {check.get('column')}) of {check.get('path')}{sheet} equals "
            f"{check.get('expected')}" + (f" ± {check.get('tolerance')}" if check.get("tolerance") else "")
        )
    if kind == "text_similarity":
        return (
            f"{where} is at least {check.get('threshold')} similar ({_value(check, 'metric')}) to "
            f"{_quote(check.get('reference'), 120)}"
        )
    if kind == "command":
        return f"`{check.get('run')}` exits with {_value(check, 'expect_exit')} in the sandbox"
    if kind == "python":
        return (
            f"the Python function {check.get('function')} says so"
            if check.get("function")
            else "the check's Python code says so (run in the sandbox)"
        )
    if kind == "tests":
        files = check.get("files") if isinstance(check.get("files"), list) else []
        shown = ", ".join(str(path) for path in files[:3]) + (" …" if len(files) > 3 else "")
        chosen = f"the {len(check['select'])} selected tests" if isinstance(check.get("select"), list) else "the tests"
        credit = "each passing test earns its share" if _value(check, "credit") == "per_test" else "every one passes"
        return f"{chosen} of {shown or 'its test files'} pass under Gymwright's {_value(check, 'runner')} runner ({credit})"
    if kind == "llm_judge":
        scale = check.get("scale")
        scaled = f" (scored {scale.get('min')}–{scale.get('max')})" if isinstance(scale, dict) else ""
        return f"the judge finds: {check.get('criterion', '')}{scaled}"
    if kind == "group":
        return f"{_value(check, 'aggregate')} of its {len(check.get('checks') or [])} checks"
    return str(kind)
