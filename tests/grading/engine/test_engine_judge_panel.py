"""Judge panels (the rubric's judge.panel) against the scripted model server, routed by model name: the
majority (binary, a tie not met) or mean (scales) of the members, the disagreement stored, and a member
with no verdict scored around only when it cannot change the verdict."""

from __future__ import annotations

import json

import jsonschema
import pytest

from grading.engine import JudgeClient, JudgeConfig, SpecError, grade, parse_rubric
from grading.engine.judge import JudgeEndpoint
from grading.engine.schema import json_schema
from tests.support.openai_server import OpenAIServer, Reply, unused_port

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


# ---------------------------------------------------------------- members at endpoints of their own

KEYS = {"judge-a": "key-a", "judge-b": "key-b", "judge-c": "key-c"}


@pytest.fixture
def three_providers():
    """Three OpenAI-protocol servers, each a provider of its own: its own address, and its own API key checked."""
    servers = {name: OpenAIServer(api_key=key).start() for name, key in KEYS.items()}
    yield servers
    for server in servers.values():
        server.stop()


def member_endpoints(servers, **changes) -> dict[str, JudgeEndpoint]:
    return {
        name: JudgeEndpoint(
            base_url=server.base_url, model=f"{name}-model", api_key=KEYS[name], **changes.get(name, {})
        )
        for name, server in servers.items()
    }


def panel_judge(endpoints, tmp_path=None, **overrides) -> JudgeClient:
    # the default judge is at an address nothing serves: a member called there would give no verdict
    options = {
        "base_url": f"http://127.0.0.1:{unused_port()}/v1",
        "model": "house-judge",
        "api_key": "house-key",
        "timeout_s": 2,
        "max_retries": 2,
        "backoff_s": 0.01,
        "backoff_max_s": 0.05,
        "endpoints": endpoints,
        "models_only": True,
    }
    options.update(overrides)
    return JudgeClient(JudgeConfig(**options))


def test_a_panel_of_three_providers_calls_each_member_at_its_own_address_with_its_own_key(three_providers):
    servers = three_providers
    servers["judge-a"].default, servers["judge-b"].default, servers["judge-c"].default = MET, MET, NOT_MET
    endpoints = member_endpoints(
        servers,
        **{"judge-b": {"response_format": "json_object", "max_tokens": 64}, "judge-c": {"response_format": "none"}},
    )
    with panel_judge(endpoints) as judge:
        result = grade(panel_rubric(), answer="Take 200-400 mg every 4-6 h.", judge=judge)
        assert len(judge._clients) == 3  # one client per (address, key), the default judge's never made
    check = result.to_document()["checks"][0]
    assert check["status"] == "scored" and check["score"] == 1.0 and result.complete
    assert check["panel"] == {
        "models": ["judge-a", "judge-b", "judge-c"],
        "verdicts": [True, True, False],
        "disagreement": pytest.approx(1 / 3),
    }
    for name, server in servers.items():
        # each provider received its own member's request only, with its own key
        assert [body["model"] for body in server.requests] == [f"{name}-model"]
        assert server.api_keys == [KEYS[name]]
    # each asked in its own response_format mode, with its own max_tokens
    a, b, c = (servers[name].requests[0] for name in ("judge-a", "judge-b", "judge-c"))
    assert a["response_format"]["type"] == "json_schema" and a["max_tokens"] == 512
    assert b["response_format"] == {"type": "json_object"} and b["max_tokens"] == 64
    assert "response_format" not in c
    assert not any(key in repr(judge.config) for key in (*KEYS.values(), "house-key"))


def test_a_member_whose_provider_is_down_is_a_missing_vote_never_a_pass(three_providers):
    servers = three_providers
    endpoints = member_endpoints(servers)
    down = f"http://127.0.0.1:{unused_port()}/v1"
    endpoints["judge-c"] = JudgeEndpoint(base_url=down, model="judge-c-model", api_key="key-c")
    # 1 met, 1 not met, the third's provider down: the missing vote decides, so unscored (the tie is not a pass)
    servers["judge-a"].default, servers["judge-b"].default = MET, NOT_MET
    with panel_judge(endpoints) as judge:
        result = grade(panel_rubric(), answer="Take 200-400 mg every 4-6 h.", judge=judge)
    check = result.to_document()["checks"][0]
    assert check["status"] == "unscored" and check["awarded"] is None
    assert "could change the verdict" in check["explanation"] and f"could not connect to {down}" in check["explanation"]
    assert check["panel"]["verdicts"] == [True, False, None]
    assert result.reward == 0.0 and not result.passed and not result.complete
    # 2 met and the third down: it cannot change the verdict, so the check is scored
    servers["judge-b"].default = MET
    with panel_judge(endpoints) as judge:
        result = grade(panel_rubric(), answer="Take 200-400 mg every 4-6 h.", judge=judge)
    check = result.to_document()["checks"][0]
    assert check["status"] == "scored" and check["score"] == 1.0 and "could not change it" in check["explanation"]
    assert servers["judge-a"].api_keys == ["key-a", "key-a"] and servers["judge-c"].calls == 0


def test_a_wrong_key_at_a_members_provider_is_that_members_failure_not_a_verdict(three_providers):
    servers = three_providers
    for server in servers.values():
        server.default = MET
    endpoints = member_endpoints(servers)
    endpoints["judge-b"] = JudgeEndpoint(base_url=servers["judge-b"].base_url, model="judge-b-model", api_key="stale")
    with panel_judge(endpoints) as judge:
        result = grade(panel_rubric(), answer="Take 200-400 mg every 4-6 h.", judge=judge)
    check = result.to_document()["checks"][0]
    assert check["panel"]["verdicts"] == [True, None, True] and check["score"] == 1.0
    assert servers["judge-b"].api_keys == ["stale"] and "stale" not in check["explanation"]


def test_the_verdict_cache_keeps_apart_one_model_name_at_two_addresses(three_providers, tmp_path):
    servers = three_providers
    servers["judge-a"].default, servers["judge-b"].default = MET, NOT_MET
    # two providers serving a model of the same name: two judges, whose verdicts must not be shared
    endpoints = {
        name: JudgeEndpoint(base_url=servers[name].base_url, model="same-model", api_key=KEYS[name])
        for name in ("judge-a", "judge-b")
    }
    rubric = parse_rubric(
        {
            "schema": "gymwright.rubric/v1",
            "checks": [
                {"id": "by_a", "kind": "llm_judge", "points": 1, "criterion": "States the dose.", "model": "judge-a"},
                {"id": "by_b", "kind": "llm_judge", "points": 1, "criterion": "States the dose.", "model": "judge-b"},
            ],
        }
    )
    for _ in range(2):  # the second time from the shared cache directory, by a new client: no calls
        with panel_judge(endpoints, cache_dir=tmp_path / "verdicts", concurrency=1) as judge:
            result = grade(rubric, answer="Take 200-400 mg every 4-6 h.", judge=judge)
        assert [(check.id, check.score) for check in result.checks] == [("by_a", 1.0), ("by_b", 0.0)]
    assert judge.calls == 0 and judge.cache_hits == 2
    assert (servers["judge-a"].calls, servers["judge-b"].calls) == (1, 1)
    assert servers["judge-a"].api_keys == ["key-a"] and servers["judge-b"].api_keys == ["key-b"]
    for entry in (tmp_path / "verdicts").iterdir():  # the keys are nowhere in the stored verdicts
        assert not any(key in entry.read_text() for key in KEYS.values())


def test_endpoints_win_over_same_address_models_and_models_keep_the_defaults_settings(openai_server):
    config = JudgeConfig(
        base_url=openai_server.base_url,
        model="house",
        api_key="house-key",
        response_format="json_object",
        max_tokens=99,
        models={"a": "gpt-a", "b": "gpt-b"},
        endpoints={"b": JudgeEndpoint(base_url="http://elsewhere/v1", model="other-b", api_key="b-key")},
    )
    assert config.endpoint_for("a") == JudgeEndpoint(openai_server.base_url, "gpt-a", "house-key", "json_object", 99)
    assert config.endpoint_for("b").base_url == "http://elsewhere/v1" and config.resolve_model("b") == "other-b"
    assert config.endpoint_for("nobody").model == "house" and config.panel_model("nobody") == "nobody"
    config.models_only = True
    assert config.panel_endpoint("nobody") is None and config.panel_model("b") == "other-b"
    with pytest.raises(ValueError, match="response_format"):
        JudgeEndpoint(base_url="http://x/v1", model="m", response_format="yaml")


def test_a_request_with_a_resolved_model_id_but_no_endpoint_is_refused_not_sent_to_the_default_address():
    from grading.engine.judge import JudgeRequest

    # Only panel members carry a model_id, always with their endpoint; one built elsewhere must not silently
    # call that model id at the default judge's address.
    client = JudgeClient(JudgeConfig(base_url=f"http://127.0.0.1:{unused_port()}/v1", model="default-judge"))
    request = JudgeRequest(criterion="States the dose.", text="200 mg", model_id="other-provider-model")
    with pytest.raises(ValueError, match="model_id 'other-provider-model' but no endpoint"):
        client.judge(request)
