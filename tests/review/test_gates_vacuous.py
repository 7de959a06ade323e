"""No gate passes for want of evidence (issue 26): a task without a reference solution fails "Oracle
passes" (a key that said 6×7 = 43 passed every gate and reached review) unless an example answer
expected to pass, and graded so, stands in; and Submit says which gates block it and what to do,
on the task page next to the disabled button and in the API's 409."""

from __future__ import annotations

from authoring import services as authoring_services
from grading.engine import gate_rules as engine_gates
from gymwright.errors import DomainError
from review import gate_evidence as review_gates
from review import services as review_services
from tests.review.conftest import RUBRIC, api_client, pass_gates, task_content

NO_KEY = (
    "no reference solution, and no example answer expected to pass that passes: nothing shows the task can be solved"
)


def gates_of(version) -> dict:
    return {result.gate: result for result in review_gates.gates_evaluate(task_version=version)}


def test_a_task_without_a_solution_fails_the_oracle_gate_and_cannot_be_submitted(author, environment, client):
    task = authoring_services.task_create(
        slug="six-by-seven",
        environment=environment,
        author=author,
        content=task_content(solution={"script": None, "answer": None}),
    )
    version = task.latest_version
    pass_gates(version, author)  # every preview the gates ask for, as it should be: still no oracle
    oracle = gates_of(version)["oracle"]
    assert oracle.status == "fail" and oracle.message == NO_KEY
    assert ("oracle", 3) not in review_gates.gates_missing_previews(task_version=version)

    try:
        review_services.task_submit(task=task, user=author)
        raise AssertionError("submitted without a reference solution")
    except DomainError as caught:
        assert caught.code == "gates_failed"
        [detail] = caught.details
        assert detail["pointer"] == "/gates/oracle" and detail["message"] == f"fail: {NO_KEY}"
        assert detail["what_to_do"].startswith(
            "Add a reference solution (solution.script and/or solution.answer), or an example answer expected to pass"
        )

    body = api_client(author).post(f"/api/tasks/{task.slug}/versions/1/submit/", {}, format="json").json()["error"]
    assert body["code"] == "gates_failed" and body["details"][0]["what_to_do"] == detail["what_to_do"]
    assert {g["gate"]: g["what_to_do"] for g in body["gates"]}["oracle"] == detail["what_to_do"]

    client.force_login(author)
    page = client.get(f"/tasks/{task.slug}/").content.decode()
    assert 'data-gate="oracle" data-status="fail"' in page
    blocked = page.split('id="submit-blocked"', 1)[1].split("</ul>", 1)[0]
    assert '<li data-gate="oracle"><strong>Oracle passes</strong> (fail): Add a reference solution' in blocked
    assert "disabled" in page.split('id="submit-form"', 1)[1].split("</form>", 1)[0]
    # Statuses read as words: a gate not run yet says "(not run)", never "(notrun)".
    assert all(
        reason["status_text"] == reason["status"].replace("_", " ")
        for reason in engine_gates.blocking_reasons(
            [
                engine_gates.GateResult(
                    gate="oracle", title="Oracle passes", status=engine_gates.NOT_RUN, message="no run yet"
                )
            ]
        )
    )
    assert "notrun" not in blocked


def test_an_example_answer_expected_to_pass_stands_in_for_the_solution(author, environment):
    examples = [
        {"name": "full marks", "answer": "Six times seven is 42.", "expect": "pass"},
        {"name": "wrong key", "answer": "43", "expect": "fail"},
    ]
    task = authoring_services.task_create(
        slug="six-by-seven",
        environment=environment,
        author=author,
        content=task_content(solution={"script": None, "answer": None}, rubric=RUBRIC, examples=examples),
    )
    version = task.latest_version
    pass_gates(version, author)
    oracle = gates_of(version)["oracle"]
    assert oracle.status == "pass", oracle
    assert oracle.message == (
        "no reference solution; the example answer “full marks” passes as expected and stands in for it"
    )
    assert review_services.task_submit(task=task, user=author).override_reason == ""

    # An example that fails as its author expects shows nothing: alone it does not stand in.
    only_failing = authoring_services.task_create(
        slug="six-by-seven-b",
        environment=environment,
        author=author,
        content=task_content(solution={"script": None, "answer": None}, examples=examples[1:]),
    )
    pass_gates(only_failing.latest_version, author)
    assert gates_of(only_failing.latest_version)["oracle"].message == NO_KEY
