"""Published JSON Schemas (checked with the vendored Ajv 2020), canonical JSON, import purity, the CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grading.engine import canonical_json, content_sha256, json_schema
from tests.support.openai_server import OpenAIServer
from tests.support.services import missing

ROOT = Path(__file__).resolve().parents[3]
AJV = ROOT / "static" / "vendor" / "ajv-8.17.1" / "ajv2020.min.js"

GOOD_RUBRIC = {
    "schema": "gymwright.rubric/v1",
    "checks": [
        {"id": "a", "kind": "string_match", "points": 2, "expected": "42"},
        {
            "id": "g",
            "kind": "group",
            "points": 1,
            "aggregate": "mean",
            "checks": [{"id": "b", "kind": "regex", "points": -1, "pattern": "TODO"}],
        },
        {"id": "j", "kind": "llm_judge", "points": 1, "criterion": "c", "scale": {"min": 0, "max": 5}},
    ],
}


def test_json_schema_names_and_dialect():
    for name in ("rubric", "task", "grade"):
        schema = json_schema(name)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert "discriminator" not in json.dumps(schema)
        assert all(ref.startswith("#/$defs/") for ref in _refs(schema))
    with pytest.raises(ValueError):
        json_schema("nope")


def _refs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_the_schema_states_the_constraints():
    defs = json_schema("rubric")["$defs"]
    regex = defs["RegexCheck"]
    assert regex["additionalProperties"] is False
    assert regex["properties"]["id"]["pattern"] == "^[a-z0-9_]{1,64}$"
    assert regex["properties"]["points"]["not"] == {"const": 0}
    assert set(defs["StringMatchCheck"]["properties"]["mode"]["enum"]) == {
        "equals",
        "contains",
        "not_contains",
        "starts_with",
        "ends_with",
    }
    assert "weighted by |points|" in defs["GroupCheck"]["description"]


AJV_SCRIPT = r"""
const Ajv2020 = require(process.argv[1]);
const Cls = Ajv2020.default || Ajv2020;
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const ajv = new Cls({strict: true, strictTypes: true, strictTuples: true, strictRequired: true, allErrors: true});
const validate = ajv.compile(input.schema);
console.log(JSON.stringify(input.documents.map((d) => validate(d))));
"""


def ajv_validate(schema: dict, documents: list) -> list[bool]:
    node = shutil.which("node")
    if not node:
        missing("Node.js (to run the vendored Ajv against the schemas)", "apt-get install nodejs")
    completed = subprocess.run(
        [node, "-e", AJV_SCRIPT, str(AJV)],
        input=json.dumps({"schema": schema, "documents": documents}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def variant(**changes):
    document = json.loads(json.dumps(GOOD_RUBRIC))
    for pointer, value in changes.items():
        *path, last = pointer.split("__")
        node = document
        for key in path:
            node = node[int(key)] if key.isdigit() else node[key]
        node[int(last) if last.isdigit() else last] = value
    return document


def test_ajv_strict_2020_compiles_the_schemas_and_agrees_with_the_engine():
    from grading.engine import validate_rubric

    documents = [
        GOOD_RUBRIC,
        variant(checks__0__points=0),
        variant(checks__0__id="Bad Id"),
        variant(checks__0__colour="red"),
        variant(checks__0__kind="telepathy"),
        variant(checks__0__mode="sounds_like"),
        variant(checks__1__checks__0__flags="q"),
        variant(checks__2__scale="stars"),
        variant(checks__0__target="clipboard"),
        variant(checks__0__points="1"),
    ]
    ajv = ajv_validate(json_schema("rubric"), documents)
    engine = [not validate_rubric(document) for document in documents]
    assert ajv == engine == [True] + [False] * (len(documents) - 1)


def test_ajv_and_the_engine_agree_on_paths_and_one_of_keys():
    from grading.engine import validate_rubric

    def with_check(check):
        return {"schema": "gymwright.rubric/v1", "checks": [{"id": "c", "points": 1, **check}]}

    paths = [
        "report.md",
        "out/**/*.csv",
        ".hidden/x",
        "a..b",
        "../x",
        "a/../b",
        "a/..",
        "/etc/passwd",
        "C:/x",
        "a\\b",
        "a//b",
        "",
    ]
    documents = [with_check({"kind": "file_exists", "path": path}) for path in paths]
    documents += [
        with_check({"kind": "file_content", "path": "a", "contains": "x"}),
        with_check({"kind": "file_content", "path": "a", "contains": "x", "regex": None, "equals": None}),
        with_check({"kind": "file_content", "path": "a", "contains": "x", "equals": "y"}),
        with_check({"kind": "file_content", "path": "a"}),
        with_check({"kind": "python", "code": "def check(ctx):\n    return True\n"}),
        with_check({"kind": "python", "function": "checks:f", "code": None}),
        with_check({"kind": "python", "function": "checks:f", "code": "def check(ctx):\n    return 1\n"}),
        with_check({"kind": "python"}),
    ]
    engine = [not validate_rubric(document) for document in documents]
    assert engine == [True] * 4 + [False] * 8 + [True, True, False, False, True, True, False, False]
    assert ajv_validate(json_schema("rubric"), documents) == engine


EDITOR_VALIDATOR = ROOT / "static" / "js" / "rubric_editor" / "schema_validator.js"


def test_the_editors_precompiled_validator_agrees_with_the_engine(tmp_path):
    """The browser validates with schema_validator.js (Ajv standalone code, no eval): same verdicts as the engine."""
    from grading.engine import validate_rubric

    node = shutil.which("node")
    if not node:
        missing("Node.js (to run the editor's validator)", "apt-get install nodejs")
    documents = [
        GOOD_RUBRIC,
        variant(checks__0__points=0),
        variant(checks__0__id="Bad Id"),
        variant(checks__0__colour="red"),
        variant(checks__0__kind="telepathy"),
        variant(checks__1__checks__0__flags="q"),
        variant(checks__2__scale="stars"),
        variant(checks__0__points="1"),
    ]
    module = tmp_path / "validator.mjs"
    module.write_text(EDITOR_VALIDATOR.read_text())
    runner = tmp_path / "run.cjs"
    runner.write_text(
        f"import({json.dumps(module.as_uri())}).then((m) => {{"
        "const docs = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(docs.map((d) => m.default(d)))); });"
    )
    completed = subprocess.run(
        [node, str(runner)], input=json.dumps(documents), capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    engine = [not validate_rubric(document) for document in documents]
    assert json.loads(completed.stdout) == engine == [True] + [False] * (len(documents) - 1)


def test_ajv_accepts_task_and_grade_documents():
    from grading.engine import grade

    task = {
        "schema": "gymwright.task/v1",
        "id": "t1",
        "prompt": "p",
        "rubric": GOOD_RUBRIC,
        "environment": {"files": [{"path": "data/a.csv", "sha256": "a" * 64}], "checks_module": "X = 1\n"},
    }
    assert ajv_validate(json_schema("task"), [task, {**task, "files": [{"path": "a", "sha256": "nothex"}]}]) == [
        True,
        False,
    ]
    document = grade(GOOD_RUBRIC, answer="42").to_document()
    assert ajv_validate(json_schema("grade"), [document]) == [True]


def test_canonical_json_is_sorted_compact_utf8_and_refuses_nan():
    assert canonical_json({"b": 1, "a": [1.5, "é"]}) == '{"a":[1.5,"é"],"b":1}'
    assert content_sha256({"a": 1}) == content_sha256({"a": 1}) != content_sha256({"a": 2})
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


def test_importing_the_engine_pulls_in_no_django_or_app_code():
    code = (
        "import sys, grading.engine, grading.engine.cli, grading.engine.judge, grading.engine.checks;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'rest_framework', 'celery', 'authoring', 'sandbox', 'gymwright')"
        " or m in ('grading.models', 'grading.services', 'grading.views', 'grading.tasks'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


# ---------------------------------------------------------------- CLI


def cli(*args, input_text=None, env=None):
    base_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "grading.engine", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        input=input_text,
        timeout=60,
        env={**base_env, **(env or {})},
    )


def test_cli_schema_prints_the_schema():
    completed = cli("schema", "rubric")
    assert completed.returncode == 0
    assert json.loads(completed.stdout) == json_schema("rubric")


def test_cli_validate_ok_and_errors(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD_RUBRIC))
    completed = cli("validate", str(good))
    assert (completed.returncode, completed.stdout.strip()) == (0, "ok")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(variant(checks__0__points=0, checks__2__id="a")))
    completed = cli("validate", str(bad))
    assert completed.returncode == 1
    lines = completed.stdout.strip().splitlines()
    assert lines[0].startswith("/checks/0/points: ") and lines[1].startswith("/checks/2/id: duplicate")


def test_cli_validate_a_task(tmp_path, capsys):
    task = tmp_path / "task.json"
    task.write_text(
        json.dumps({"schema": "gymwright.task/v1", "id": "t", "prompt": "p", "rubric": variant(checks__0__points=0)})
    )
    code, out, _ = run_main(capsys, "validate", str(task))
    assert code == 1 and out.startswith("/rubric/checks/0/points: ")


def run_main(capsys, *args):
    """The CLI in-process (cheaper than a subprocess, which pays the openai import each time)."""
    from grading.engine.cli import main

    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_usage_errors_exit_2(tmp_path, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "schema": "gymwright.rubric/v1",\n  "checks": [,]\n}')
    code, _, err = run_main(capsys, "validate", str(broken))
    assert code == 2 and f"{broken}:3:" in err
    assert run_main(capsys, "validate", str(tmp_path / "absent.json"))[0] == 2
    assert run_main(capsys, "schema", "nope")[0] == 2
    assert run_main(capsys)[0] == 2
    assert run_main(capsys, "grade", "--answer-file", "x")[0] == 2  # neither --task nor --rubric
    rubric = tmp_path / "r.json"
    rubric.write_text(json.dumps(GOOD_RUBRIC))
    assert run_main(capsys, "grade", "--rubric", str(rubric), "--judge-model", "m")[0] == 2  # no base URL


def test_cli_grade_round_trip(tmp_path):
    task = {
        "schema": "gymwright.task/v1",
        "id": "t",
        "prompt": "p",
        "rubric": {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {"id": "a", "kind": "string_match", "points": 3, "expected": "42"},
                {"id": "f", "kind": "file_exists", "points": 1, "path": "out/*.md"},
                {"id": "j", "kind": "llm_judge", "points": 2, "criterion": "c"},
            ],
        },
    }
    (tmp_path / "task.json").write_text(json.dumps(task))
    (tmp_path / "answer.txt").write_text("it is 42")
    (tmp_path / "ws" / "out").mkdir(parents=True)
    (tmp_path / "ws" / "out" / "r.md").write_text("x")
    completed = cli(
        "grade",
        "--task",
        str(tmp_path / "task.json"),
        "--answer-file",
        str(tmp_path / "answer.txt"),
        "--workspace",
        str(tmp_path / "ws"),
    )
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["schema"] == "gymwright.grade/v1"
    assert [c["status"] for c in document["checks"]] == ["scored", "scored", "unscored"]
    # the unscored judge check stays in max: 4 of 6 at least, 6 of 6 had it been met
    assert (document["reward"], document["reward_upper"], document["complete"]) == (4 / 6, 1.0, False)
    assert document["passed"] is False
    (tmp_path / "rubric.json").write_text(json.dumps(task["rubric"]))
    by_rubric = cli("grade", "--rubric", str(tmp_path / "rubric.json"), "--answer-file", "-", input_text="no")
    assert by_rubric.returncode == 0 and json.loads(by_rubric.stdout)["checks"][0]["score"] == 0.0


def test_cli_grade_with_a_judge(tmp_path, capsys, monkeypatch):
    rubric = {
        "schema": "gymwright.rubric/v1",
        "checks": [{"id": "j", "kind": "llm_judge", "points": 2, "criterion": "c"}],
    }
    (tmp_path / "rubric.json").write_text(json.dumps(rubric))
    (tmp_path / "answer.txt").write_text("x")
    args = ["grade", "--rubric", str(tmp_path / "rubric.json"), "--answer-file", str(tmp_path / "answer.txt")]
    for name in ("OPENAI_BASE_URL", "GYMWRIGHT_JUDGE_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with OpenAIServer(default='{"met": true, "explanation": "fine"}') as server:
        monkeypatch.setenv("MY_KEY", "secret")
        code, out, _ = run_main(
            capsys, *args, "--judge-base-url", server.base_url, "--judge-model", "m", "--judge-api-key-env", "MY_KEY"
        )
        assert code == 0 and json.loads(out)["checks"][0]["votes"] == [True]
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("GYMWRIGHT_JUDGE_MODEL", "env-model")
        code, out, _ = run_main(capsys, *args)
        assert json.loads(out)["checks"][0]["score"] == 1.0
        assert [body["model"] for body in server.requests] == ["m", "env-model"]
    monkeypatch.delenv("OPENAI_BASE_URL")
    code, out, _ = run_main(capsys, *args)
    assert json.loads(out)["checks"][0]["explanation"] == "no judge model configured"


def test_cli_grade_reports_an_invalid_task_with_pointers(tmp_path, capsys):
    (tmp_path / "task.json").write_text(
        json.dumps({"schema": "gymwright.task/v1", "id": "t", "prompt": "p", "rubric": {}})
    )
    code, out, _ = run_main(capsys, "grade", "--task", str(tmp_path / "task.json"))
    assert code == 1 and "/rubric/checks: required key" in out


def test_canonical_json_does_not_tell_integral_floats_from_ints():
    """A browser round trip turns 1.0 into 1; the content hash must not change because of it."""
    from grading.engine import canonical_json, content_sha256

    assert canonical_json({"b": [1.0, 2.5], "a": {"x": -3.0}}) == '{"a":{"x":-3},"b":[1,2.5]}'
    assert content_sha256({"points": 1.0}) == content_sha256({"points": 1})
    assert content_sha256({"points": 1.5}) != content_sha256({"points": 1})


@pytest.mark.parametrize(
    "value, exact",
    [
        ({"b": [1, 2.5, "1.0", True], "a": {}}, True),
        ({"deep": [[[{"x": 2.0}]]]}, False),
        ({"big": 2.0**60}, True),  # beyond 2**53 a float stays a float
        ([0.0], False),
        ("text", True),
        (3.0, False),  # the text ends with the float
        ({"x": -0.0, "y": 1e15}, False),
        ({"note": "version 1.0, then 2.0]", "n": 1.5}, True),  # text that looks like a float: still exact
        ({"note": "1.0}", "n": [7.0]}, False),
    ],
)
def test_canonical_json_says_whether_its_text_is_the_value_itself(value, exact):
    """An import stores the canonical text it hashed when nothing was normalised in it."""
    from grading.engine import canonical_json, canonical_json_exact

    text, is_exact = canonical_json_exact(value)
    assert (text, is_exact) == (canonical_json(value), exact)
    # exact: the text reads back as the value, floats as floats (json.dumps tells 1.0 from 1)
    assert (json.dumps(json.loads(text), sort_keys=True) == json.dumps(value, sort_keys=True)) is exact
