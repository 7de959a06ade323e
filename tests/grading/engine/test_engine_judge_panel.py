"""Judge panels (the rubric's judge.panel) against the scripted model server, routed by model name: the
majority (binary, a tie not met) or mean (scales) of the members, the disagreement stored, and a member
with no verdict scored around only when it cannot change the verdict."""

from __future__ import annotations

import json

import jsonschema
import pytest

from grading.engine import SpecError, grade, parse_rubric
from grading.engine.schema import json_schema
from tests.support.openai_server import Reply

MET = '{"met": true, "explanation": "it says so"}'
NOT_MET = '{"met": false, "explanation": "it does not"}'
DOWN = Reply(status=503, content="unavailable")


def panel_rubric(*checks, panel=("judge-a", "judge-b", "judge-c"), **judge):
    return parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "judge": {"panel": list(panel), **judge},
            "checks": list(checks)
            or [{"id": "dose", "kind": "llm_judge", "points": 5, "criterion": "States the dose."}],
        }
    )


def route(replies: dict):
    """A handler answering by the request's model: replies[model] (a reply, or a callable of the body)."""

    def handler(body):
        reply = replies[body["model"]]
        return reply(body) if callable(reply) else reply

    return handler


def graded(openai_server, make_judge, replies, rubric=None, **config):
    openai_server.handler = route(replies)
    with make_judge(openai_server, **config) as judge:
        result = grade(rubric or panel_rubric(), answer="Take 200-400 mg every 4-6 h.", judge=judge)
    document = result.to_document()
    jsonschema.validate(document, json_schema("grade"))  # the panel entry keeps the grade schema valid
    return document, document["checks"][0]


def test_a_panel_of_three_with_one_wrong_judge_keeps_the_majority_and_stores_the_disagreement(
    openai_server, make_judge
):
    document, check = graded(openai_server, make_judge, {"judge-a": MET, "judge-b": MET, "judge-c": NOT_MET})
    assert sorted(body["model"] for body in openai_server.requests) == ["judge-a", "judge-b", "judge-c"]
    assert check["status"] == "scored" and check["score"] == 1.0 and check["awarded"] == 5
    assert check["panel"] == {
        "models": ["judge-a", "judge-b", "judge-c"],
        "verdicts": [True, True, False],
        "disagreement": pytest.approx(1 / 3),
    }
    assert check["votes"] == [True, True, False]
    assert check["explanation"].startswith("panel 2 met, 1 not met of 3")
    assert document["complete"] is True and document["reward"] == 1.0


def test_the_panel_verdict_is_the_majority_not_the_first_member(openai_server, make_judge):
    _, check = graded(openai_server, make_judge, {"judge-a": MET, "judge-b": NOT_MET, "judge-c": NOT_MET})
    assert check["status"] == "scored" and check["score"] == 0.0
    assert check["panel"]["disagreement"] == pytest.approx(1 / 3)


def test_a_tie_is_not_met(openai_server, make_judge):
    rubric = panel_rubric(panel=("judge-a", "judge-b"))
    _, check = graded(openai_server, make_judge, {"judge-a": MET, "judge-b": NOT_MET}, rubric)
    assert check["status"] == "scored" and check["score"] == 0.0
    assert check["panel"]["disagreement"] == 0.5


def test_an_unreachable_member_that_cannot_change_the_majority_leaves_the_check_scored(openai_server, make_judge):
    document, check = graded(openai_server, make_judge, {"judge-a": MET, "judge-b": MET, "judge-c": DOWN})
    assert check["status"] == "scored" and check["score"] == 1.0
    assert check["panel"]["verdicts"] == [True, True, None] and check["panel"]["disagreement"] == 0.0
    assert "could not change it" in check["explanation"]
    assert document["complete"] is True
    # retried like any judge call before its vote counted as missing
    assert sum(body["model"] == "judge-c" for body in openai_server.requests) == 3


def test_an_unreachable_member_that_could_change_the_majority_leaves_the_check_unscored_never_passed(
    openai_server, make_judge
):
    # 1 met, 1 not met and one silent: the missing vote decides, so the grader cannot say; an answer that makes a
    # member fail must not turn the 1-1 tie (not met) into a pass.
    document, check = graded(openai_server, make_judge, {"judge-a": MET, "judge-b": NOT_MET, "judge-c": DOWN})
    assert check["status"] == "unscored" and check["score"] is None and check["awarded"] is None
    assert "could change the verdict" in check["explanation"] and "judge-c" in check["explanation"]
    assert "HTTP 503" in check["explanation"]
    assert check["panel"]["verdicts"] == [True, False, None]
    assert document["reward"] == 0.0 and document["passed"] is False and document["complete"] is False


def test_a_penalty_with_a_silent_member_is_charged_when_the_rest_decide(openai_server, make_judge):
    rubric = panel_rubric(
        {"id": "dose", "kind": "llm_judge", "points": 5, "criterion": "States the dose."},
        {"id": "unsafe", "kind": "llm_judge", "points": -5, "criterion": "Recommends over 3200 mg a day."},
    )
    document, _ = graded(openai_server, make_judge, {"judge-a": MET, "judge-b": MET, "judge-c": DOWN}, rubric)
    unsafe = document["checks"][1]
    assert unsafe["status"] == "scored" and unsafe["score"] == 1.0 and unsafe["awarded"] == -5
    assert document["reward"] == 0.0


def test_a_scale_panel_takes_the_mean_and_the_spread(openai_server, make_judge):
    rubric = panel_rubric(
        {"id": "clear", "kind": "llm_judge", "points": 4, "criterion": "Clear.", "scale": {"min": 0, "max": 10}}
    )
    replies = {
        f"judge-{name}": json.dumps({"score": score, "explanation": "ok"}) for name, score in zip("abc", (8, 6, 10))
    }
    _, check = graded(openai_server, make_judge, replies, rubric)
    assert check["status"] == "scored" and check["score"] == pytest.approx(0.8)
    assert check["panel"]["verdicts"] == pytest.approx([0.8, 0.6, 1.0])
    assert check["panel"]["disagreement"] == pytest.approx(0.4)
    assert check["votes"] == pytest.approx([8, 6, 10])
    # a silent member could move the mean anywhere in its range: unscored
    replies["judge-b"] = DOWN
    _, check = graded(openai_server, make_judge, replies, rubric)
    assert check["status"] == "unscored"


def test_each_member_votes_over_its_own_samples(openai_server, make_judge):
    flips = iter([MET, NOT_MET, NOT_MET])  # judge-c's three samples: not met by its own majority

    def judge_c(body):
        return next(flips)

    rubric = panel_rubric(samples=3)
    _, check = graded(
        openai_server, make_judge, {"judge-a": MET, "judge-b": MET, "judge-c": judge_c}, rubric, concurrency=1
    )
    assert check["panel"]["verdicts"] == [True, True, False] and check["score"] == 1.0
    assert openai_server.calls == 9


def test_a_check_naming_its_own_model_is_judged_by_it_alone(openai_server, make_judge):
    rubric = panel_rubric({"id": "own", "kind": "llm_judge", "points": 1, "criterion": "c", "model": "judge-a"})
    _, check = graded(openai_server, make_judge, {"judge-a": MET}, rubric, models={"judge-a": "judge-a"})
    assert openai_server.calls == 1 and check["panel"] is None and check["score"] == 1.0


def test_members_map_through_the_configured_models_and_an_unconfigured_one_gives_no_verdict(openai_server, make_judge):
    # The app's judge config (models_only): a member must be a configured judge endpoint.
    _, check = graded(
        openai_server,
        make_judge,
        {"gpt-a": MET, "gpt-b": MET},
        models={"judge-a": "gpt-a", "judge-b": "gpt-b"},
        models_only=True,
    )
    assert sorted(body["model"] for body in openai_server.requests) == ["gpt-a", "gpt-b"]
    assert check["status"] == "scored" and check["score"] == 1.0
    assert check["panel"]["verdicts"] == [True, True, None]  # judge-c was never called
    # with judge-a also unconfigured, the one vote left cannot decide: unscored, naming why
    _, check = graded(openai_server, make_judge, {"gpt-b": MET}, models={"judge-b": "gpt-b"}, models_only=True)
    assert check["status"] == "unscored"
    assert "'judge-a' is not a judge endpoint configured" in check["explanation"]


@pytest.mark.parametrize(
    "panel, message",
    [(["a"], "at least 2"), (["a", "b", "a"], "named twice"), ([f"m{i}" for i in range(8)], "at most 7")],
)
def test_a_panel_is_two_to_seven_distinct_names(panel, message):
    with pytest.raises(SpecError) as raised:
        panel_rubric(panel=panel)
    assert message in str(raised.value) and "/judge/panel" in str(raised.value)


# Azure's (and OpenAI-compatible gateways') refusal of a prompt its content filter flags: the graded answer
# chose its words, so an answer that trips one member's filter must not turn a decided penalty into a skipped one.
CONTENT_FILTERED = Reply(
    status=400,
    body=json.dumps(
        {
            "error": {
                "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management "
                "policy. Please modify your prompt and retry.",
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": 400,
            }
        }
    ).encode(),
)


@pytest.mark.parametrize(
    "filtered", [CONTENT_FILTERED, Reply(content="", finish_reason="content_filter")], ids=["http-400", "finish"]
)
def test_an_answer_that_trips_one_members_content_filter_fails_the_check_and_the_penalty_is_charged(
    openai_server, make_judge, filtered
):
    # 1 met, 1 not met: were the filtered member a missing vote, the penalty would go unscored and uncharged.
    rubric = panel_rubric(
        {"id": "dose", "kind": "llm_judge", "points": 5, "criterion": "States the dose."},
        {"id": "unsafe", "kind": "llm_judge", "points": -5, "criterion": "Recommends over 3200 mg a day."},
    )
    document, _ = graded(openai_server, make_judge, {"judge-a": MET, "judge-b": NOT_MET, "judge-c": filtered}, rubric)
    unsafe = document["checks"][1]
    assert unsafe["status"] == "scored" and unsafe["awarded"] == -5, unsafe["explanation"]
    assert "content filter" in unsafe["explanation"]
    assert document["reward"] == 0.0
    # not retried: a filter's refusal is the answer's doing, not the provider's hiccup
    assert sum(body["model"] == "judge-c" for body in openai_server.requests) == 2
