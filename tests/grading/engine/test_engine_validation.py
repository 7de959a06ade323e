"""Validation: every error carries the JSON pointer of the offending value."""

import copy

import pytest

from grading.engine import SpecError, parse_rubric, parse_task, validate_rubric, validate_task


def rubric(*checks, **extra):
    return {"schema": "gymwright.rubric/v1", "checks": list(checks), **extra}


def ok_check(check_id="ok", **extra):
    return {"id": check_id, "kind": "string_match", "points": 1, "expected": "x", **extra}


def pointers(issues):
    return [issue.pointer for issue in issues]


def issue_at(issues, pointer):
    found = [issue for issue in issues if issue.pointer == pointer]
    assert found, f"no issue at {pointer}: {issues}"
    return found[0].message


def test_it_accepts_the_rubric_md_example():
    data = {
        "schema": "gymwright.rubric/v1",
        "pass_threshold": 0.7,
        "judge": {"model": "judge", "samples": 1, "temperature": 0},
        "checks": [
            {
                "id": "states_dose",
                "kind": "llm_judge",
                "points": 5,
                "criterion": "States the adult dose of ibuprofen (200-400 mg every 4-6 h).",
                "tags": ["accuracy"],
            },
            {
                "id": "recommends_unsafe",
                "kind": "llm_judge",
                "points": -8,
                "criterion": "Recommends exceeding 3200 mg per day.",
            },
            {"id": "report_exists", "kind": "file_exists", "points": 1, "required": True, "path": "report.md"},
            {
                "id": "q3_revenue",
                "kind": "table_cell",
                "points": 4,
                "path": "model.xlsx",
                "sheet": "Summary",
                "row": "Revenue",
                "column": "Q3",
                "expected": 1234.5,
                "tolerance": 0.5,
            },
            {
                "id": "tests_pass",
                "kind": "command",
                "points": 10,
                "run": "pytest -q tests/",
                "expect_exit": 0,
                "timeout_s": 120,
            },
            {
                "id": "core",
                "kind": "group",
                "points": 6,
                "aggregate": "all",
                "checks": [
                    {
                        "id": "a",
                        "kind": "string_match",
                        "points": 1,
                        "target": "answer",
                        "mode": "contains",
                        "expected": "42",
                    }
                ],
            },
        ],
        "probes": [{"answer": "", "max_reward": 0.0}, {"answer": "Thought process:", "max_reward": 0.05}],
    }
    assert validate_rubric(data) == []
    parsed = parse_rubric(data)
    assert [check.id for check in parsed.iter_checks()] == [
        "states_dose",
        "recommends_unsafe",
        "report_exists",
        "q3_revenue",
        "tests_pass",
        "core",
        "a",
    ]


def test_it_rejects_an_unknown_key_at_the_keys_pointer():
    issues = validate_rubric(rubric(ok_check(colour="red")))
    assert pointers(issues) == ["/checks/0/colour"]
    assert "unknown key 'colour'" in issues[0].message


def test_it_rejects_an_unknown_top_level_key():
    assert pointers(validate_rubric(rubric(ok_check(), extra_thing=1))) == ["/extra_thing"]


def test_it_escapes_tilde_and_slash_in_pointers():
    issues = validate_rubric(rubric(ok_check(**{"a/b~c": 1})))
    assert pointers(issues) == ["/checks/0/a~1b~0c"]


def test_it_rejects_duplicate_ids_at_the_second_ones_id():
    issues = validate_rubric(rubric(ok_check("same"), ok_check("other"), ok_check("same")))
    assert pointers(issues) == ["/checks/2/id"]
    assert "duplicate check id 'same'" in issues[0].message
    assert "/checks/0/id" in issues[0].message


def test_it_rejects_duplicate_ids_inside_groups():
    group = {"id": "g", "kind": "group", "points": 2, "checks": [ok_check("inner"), ok_check("ok")]}
    issues = validate_rubric(rubric(ok_check("ok"), group))
    assert pointers(issues) == ["/checks/1/checks/1/id"]


def test_it_rejects_an_unknown_kind_at_kind():
    issues = validate_rubric(rubric(ok_check(), {"id": "b", "kind": "telepathy", "points": 1}))
    assert pointers(issues) == ["/checks/1/kind"]
    assert "unknown check kind 'telepathy'" in issues[0].message
    assert "string_match" in issues[0].message


def test_it_rejects_a_missing_kind_at_kind():
    assert pointers(validate_rubric(rubric(ok_check(), {"id": "b", "points": 1}))) == ["/checks/1/kind"]


def test_it_points_inside_the_check_not_at_the_discriminator_tag():
    issues = validate_rubric(
        rubric(ok_check(), ok_check("b"), {"id": "c", "kind": "regex", "points": 1, "pattern": "(unclosed"})
    )
    assert pointers(issues) == ["/checks/2/pattern"]
    assert "does not compile" in issues[0].message


def test_it_rejects_a_bad_extract_regex():
    check = {"id": "n", "kind": "number", "points": 1, "expected": 1, "extract": "total (\\d+) and (\\d+)"}
    issues = validate_rubric(rubric(check))
    assert pointers(issues) == ["/checks/0/extract"]
    assert "exactly one capturing group" in issues[0].message


def test_it_rejects_an_uncompilable_extract():
    check = {"id": "n", "kind": "number", "points": 1, "expected": 1, "extract": "[("}
    assert pointers(validate_rubric(rubric(check))) == ["/checks/0/extract"]


def test_it_rejects_a_group_without_children():
    issues = validate_rubric(rubric(ok_check(), {"id": "g", "kind": "group", "points": 1, "checks": []}))
    assert pointers(issues) == ["/checks/1/checks"]
    assert "at least one child" in issues[0].message


def test_it_rejects_a_rubric_with_no_positive_points():
    issues = validate_rubric(rubric(ok_check(points=-2)))
    assert pointers(issues) == ["/checks"]
    assert "positive points" in issues[0].message


def test_it_rejects_an_empty_rubric_at_checks():
    assert pointers(validate_rubric(rubric())) == ["/checks"]


def test_it_rejects_a_non_rfc6901_json_pointer():
    check = {"id": "j", "kind": "json_field", "points": 1, "pointer": "a.b", "expected": 1}
    issues = validate_rubric(rubric(check))
    assert pointers(issues) == ["/checks/0/pointer"]
    assert "RFC 6901" in issues[0].message
    bad_tilde = dict(check, pointer="/a~2")
    assert pointers(validate_rubric(rubric(bad_tilde))) == ["/checks/0/pointer"]
    assert validate_rubric(rubric(dict(check, pointer="/a~1b/0"))) == []


def test_it_rejects_zero_points():
    issues = validate_rubric(rubric(ok_check(), ok_check("z", points=0)))
    assert pointers(issues) == ["/checks/1/points"]


def test_it_rejects_a_bad_id():
    issues = validate_rubric(rubric(ok_check("Bad-Id")))
    assert pointers(issues) == ["/checks/0/id"]
    assert "lowercase" in issues[0].message


def test_it_rejects_a_string_for_a_number_without_coercing():
    issues = validate_rubric(rubric(ok_check(points="1")))
    assert pointers(issues) == ["/checks/0/points"]
    assert "expected a number" in issues[0].message


def test_it_rejects_a_missing_key_at_where_the_key_belongs():
    issues = validate_rubric(rubric({"id": "r", "kind": "regex", "points": 1}))
    assert pointers(issues) == ["/checks/0/pattern"]
    assert "missing" in issues[0].message


@pytest.mark.parametrize("path", ["/etc/passwd", "../secrets", "a/../../b", "a\\b", "C:/x"])
def test_it_rejects_unsafe_paths(path):
    check = {"id": "f", "kind": "file_exists", "points": 1, "path": path}
    issues = validate_rubric(rubric(check))
    assert pointers(issues) == ["/checks/0/path"]
    assert "relative to the workspace" in issues[0].message


def test_it_rejects_an_unsafe_file_target():
    issues = validate_rubric(rubric(ok_check(target="file:../x")))
    assert pointers(issues) == ["/checks/0/target"]


def test_it_rejects_an_unknown_target():
    issues = validate_rubric(rubric(ok_check(target="clipboard")))
    assert pointers(issues) == ["/checks/0/target"]
    assert "'answer'" in issues[0].message


def test_it_needs_exactly_one_file_content_condition():
    check = {"id": "c", "kind": "file_content", "points": 1, "path": "a.txt", "contains": "x", "equals": "y"}
    issues = validate_rubric(rubric(check))
    assert pointers(issues) == ["/checks/0"]
    assert "exactly one" in issues[0].message


def test_file_content_not_contains_counts_as_its_one_condition_and_is_never_empty():
    check = {"id": "c", "kind": "file_content", "points": 1, "path": "a.txt", "not_contains": "TODO"}
    assert validate_rubric(rubric(check)) == []
    issues = validate_rubric(rubric({**check, "contains": "x"}))
    assert pointers(issues) == ["/checks/0"] and "'not_contains'" in issues[0].message
    issues = validate_rubric(rubric({**check, "not_contains": "\u200b"}))
    assert pointers(issues) == ["/checks/0/not_contains"] and "no file passes" in issues[0].message


def test_it_needs_code_or_function_in_a_python_check():
    issues = validate_rubric(rubric(ok_check(), {"id": "p", "kind": "python", "points": 1}))
    assert pointers(issues) == ["/checks/1"]


def test_it_rejects_python_code_with_a_syntax_error():
    issues = validate_rubric(rubric({"id": "p", "kind": "python", "points": 1, "code": "def check(ctx):\n  return ("}))
    assert pointers(issues) == ["/checks/0/code"]
    assert "syntax error" in issues[0].message


def test_it_rejects_python_code_without_check():
    issues = validate_rubric(rubric({"id": "p", "kind": "python", "points": 1, "code": "def other(ctx):\n  return 1"}))
    assert "check(ctx)" in issue_at(issues, "/checks/0/code")


def test_it_rejects_a_required_penalty():
    issues = validate_rubric(rubric(ok_check(), ok_check("bad", points=-1, required=True)))
    assert pointers(issues) == ["/checks/1/required"]


def test_it_rejects_a_scale_whose_max_is_not_above_min():
    check = {"id": "j", "kind": "llm_judge", "points": 1, "criterion": "c", "scale": {"min": 5, "max": 5}}
    assert pointers(validate_rubric(rubric(check))) == ["/checks/0/scale/max"]


def test_it_explains_a_bad_scale_once():
    check = {"id": "j", "kind": "llm_judge", "points": 1, "criterion": "c", "scale": "stars"}
    issues = validate_rubric(rubric(check))
    assert pointers(issues) == ["/checks/0/scale"]
    assert '"binary"' in issues[0].message


def test_it_checks_json_field_op_and_expected_agree():
    check = {"id": "j", "kind": "json_field", "points": 1, "pointer": "/a", "op": "in", "expected": 3}
    assert pointers(validate_rubric(rubric(check))) == ["/checks/0/expected"]
    check = dict(check, op="gt", expected="3")
    assert pointers(validate_rubric(rubric(check))) == ["/checks/0/expected"]


def test_it_reports_every_problem_at_once():
    issues = validate_rubric(rubric(ok_check("dup", points=0), ok_check("dup", zz=1)))
    assert sorted(pointers(issues)) == ["/checks/0/points", "/checks/1/id", "/checks/1/zz"]


def test_it_rejects_the_wrong_schema_name():
    issues = validate_rubric({"schema": "gymwright.rubric/v2", "checks": [ok_check()]})
    assert pointers(issues) == ["/schema"]


def test_it_rejects_a_non_object():
    assert pointers(validate_rubric([1, 2])) == [""]


def test_parse_rubric_raises_spec_error_with_issues():
    with pytest.raises(SpecError) as caught:
        parse_rubric(rubric(ok_check("a"), ok_check("a")))
    assert pointers(caught.value.issues) == ["/checks/1/id"]
    assert "/checks/1/id" in str(caught.value)


TASK = {
    "schema": "gymwright.task/v1",
    "id": "q3-revenue-model",
    "version": 3,
    "title": "Q3",
    "prompt": "Do it",
    "environment": {
        "id": "finance-desk",
        "version": 2,
        "image": "python:3.12-slim",
        "dockerfile": None,
        "setup": "pip install openpyxl",
        "network": "none",
        "limits": {"cpus": 1, "memory_mb": 2048, "timeout_s": 600, "max_steps": 40},
        "tools": ["bash", "read_file", "write_file", "submit"],
        "custom_tools": [
            {
                "name": "query_ledger",
                "description": "...",
                "parameters": {"type": "object", "properties": {}},
                "command": "python /env/tools/ledger.py",
            }
        ],
        "files": [{"path": "tools/ledger.py", "sha256": "a" * 64}],
        "checks_module": "def totals(ctx):\n    return True\n",
    },
    "files": [{"path": "data/ledger.csv", "sha256": "b" * 64}],
    "solution": {"script": "python solve.py", "answer": None},
    "rubric": rubric(ok_check()),
    "tags": ["finance"],
    "metadata": {},
}


def test_it_accepts_the_rubric_md_task():
    assert validate_task(TASK) == []
    task = parse_task(TASK)
    assert task.environment.checks_module.startswith("def totals")
    assert task.files[0].path == "data/ledger.csv"


def test_task_rubric_errors_are_under_rubric():
    data = copy.deepcopy(TASK)
    data["rubric"]["checks"].append(ok_check("ok"))
    data["rubric"]["checks"].append({"id": "r", "kind": "regex", "points": 1, "pattern": "("})
    assert pointers(validate_task(data)) == ["/rubric/checks/1/id", "/rubric/checks/2/pattern"]


@pytest.mark.parametrize("dockerfile", [None, "FROM python:3.12-slim\nCOPY tools/ /opt/tools/\n"])
def test_role_build_is_for_environment_files_with_a_dockerfile_to_read_them(dockerfile):
    data = copy.deepcopy(TASK)
    data["environment"]["dockerfile"] = dockerfile
    data["files"][0]["role"] = "build"
    data["environment"]["files"][0]["role"] = "build"
    issues = validate_task(data)
    expected = ["/files/0/role"] + (["/environment/files/0/role"] if dockerfile is None else [])
    assert sorted(pointers(issues)) == sorted(expected)
    assert "not a task's files" in issue_at(issues, "/files/0/role")
    if dockerfile is None:
        assert "has no Dockerfile" in issue_at(issues, "/environment/files/0/role")


@pytest.mark.parametrize("where", [("files",), ("environment", "files")])
def test_task_file_paths_must_be_relative(where):
    data = copy.deepcopy(TASK)
    target = data
    for key in where:
        target = target[key]
    target.append({"path": "/abs/path", "sha256": "c" * 64})
    target.append({"path": "x/../../y", "sha256": "c" * 64})
    prefix = "/" + "/".join(where)
    assert pointers(validate_task(data)) == [f"{prefix}/1/path", f"{prefix}/2/path"]


def test_task_file_sha256_must_be_hex():
    data = copy.deepcopy(TASK)
    data["files"][0]["sha256"] = "XYZ"
    issues = validate_task(data)
    assert pointers(issues) == ["/files/0/sha256"]
    assert "sha256" in issues[0].message


def test_task_rejects_duplicate_file_paths():
    data = copy.deepcopy(TASK)
    data["files"].append(dict(data["files"][0]))
    assert pointers(validate_task(data)) == ["/files/1/path"]


def test_task_rejects_a_checks_module_with_a_syntax_error():
    data = copy.deepcopy(TASK)
    data["environment"]["checks_module"] = "def broken(:\n"
    assert pointers(validate_task(data)) == ["/environment/checks_module"]


def test_task_rejects_unknown_environment_keys():
    data = copy.deepcopy(TASK)
    data["environment"]["gpu"] = True
    assert pointers(validate_task(data)) == ["/environment/gpu"]


def test_task_round_trips_through_its_document():
    task = parse_task(TASK)
    again = parse_task(task.to_document())
    assert again == task


def test_an_unknown_key_in_a_check_suggests_the_right_one():
    issues = validate_rubric(rubric({"id": "r", "kind": "regex", "points": 1, "pattern": "x", "flag": "i"}))
    assert pointers(issues) == ["/checks/0/flag"]
    assert "did you mean 'flags'?" in issues[0].message and "min_count" in issues[0].message


def test_pointers_inside_nested_groups_skip_the_tags():
    inner = {
        "id": "inner",
        "kind": "group",
        "points": 1,
        "checks": [
            {"id": "r", "kind": "regex", "points": 1, "pattern": "(", "colour": 1},
            {"id": "k", "kind": "nope", "points": 1},
        ],
    }
    issues = validate_rubric(rubric(ok_check(), {"id": "g", "kind": "group", "points": 1, "checks": [inner]}))
    assert sorted(pointers(issues)) == [
        "/checks/1/checks/0/checks/0/colour",
        "/checks/1/checks/0/checks/0/pattern",
        "/checks/1/checks/0/checks/1/kind",
    ]


def test_a_target_on_a_kind_that_does_not_read_one_is_an_error():
    check = {"id": "f", "kind": "file_exists", "points": 1, "path": "a.txt", "target": "file:a.txt"}
    issues = validate_rubric(rubric(check))
    assert pointers(issues) == ["/checks/0/target"] and "does not read a target" in issues[0].message
    assert validate_rubric(rubric(dict(check, target="answer"))) == []
