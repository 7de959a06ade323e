"""Reward functions for this Gymwright task pack: verl's `compute_score` and a TRL reward function.

Stand-alone: needs only the bundled grader's dependencies (`pip install -r grader/requirements.txt`),
no Django and no Gymwright install. Each response is graded by the pack's own grading engine
(grader/) against the task's rubric from tasks.jsonl, exactly as Gymwright graded the previews.

Judge checks (`llm_judge`) call the OpenAI-compatible endpoint in OPENAI_BASE_URL (key in
OPENAI_API_KEY, model in GYMWRIGHT_JUDGE_MODEL). Without one they are *unscored*. `compute_score`'s
score is then the grade's lower bound (an unscored check earns nothing), with `score_upper`, `complete: 0`
and the number of unscored checks beside it (numbers only, the same keys for every response: verl stacks
each key into an array over the batch and averages it in validation), and warns once naming them; the TRL
function returns None for a response whose grade has no scored check at all (TRL gives it no
advantage and leaves it out of its group's mean) and logs the share of incomplete grades.
`grade_response(task_id, response)` gives the whole grade, every check's result included.

data/*.parquet holds only tasks that a response alone grades. A task whose checks need the agent's
workspace, its sandbox or its trajectory (files, commands, python checks) is a Harbor task only
(tasks/<id>/, graded whole by tests/test.sh): graded here, those checks would be unscored.

Safe in a training loop: any response string gets a score (NULs and lone surrogates are read as their
\\uXXXX escapes), and every check is bounded on any thread (verl calls reward functions from a thread
pool, where no CPU timer can fire): patterns run under their own timeout, parses under size and depth
limits.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from pathlib import Path

PACK_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(PACK_DIR / "grader"))

from grading.engine import JudgeClient, JudgeConfig, grade, parse_task  # noqa: E402
from grading.engine.limits import GradeLimits  # noqa: E402

_tasks: dict[str, dict] | None = None
_parsed: dict = {}  # task id -> the parsed task (rubric patterns compiled once, not per response)
_judge: JudgeClient | None = None
_limits: GradeLimits | None = None
_judge_loaded = False
_lock = threading.Lock()
_warned = False


def _task_documents() -> dict[str, dict]:
    global _tasks
    with _lock:
        if _tasks is None:
            tasks = {}
            with open(PACK_DIR / "tasks.jsonl", encoding="utf-8") as handle:
                for line in handle:
                    if line.strip():
                        document = json.loads(line)
                        tasks[document["id"]] = document
            _tasks = tasks
        return _tasks


def _from_env() -> tuple[JudgeClient | None, GradeLimits]:
    """The judge and the grading limits, read from the environment on the first call (not on every response:
    a trainer calls this tens of thousands of times, from a thread pool)."""
    global _judge, _limits, _judge_loaded
    if not _judge_loaded:
        with _lock:
            if not _judge_loaded:
                config = JudgeConfig.from_env()
                _judge = JudgeClient(config) if config is not None else None
                _limits = GradeLimits.from_env()
                _judge_loaded = True
    return _judge, _limits


def _task(task_id: str):
    task = _parsed.get(task_id)
    if task is None:
        document = _task_documents().get(task_id)
        if document is None:
            raise KeyError(f"task {task_id!r} is not in this pack")
        task = _parsed.setdefault(task_id, parse_task(document))  # a race parses twice, keeps one
    return task


def grade_response(task_id: str, response: str) -> dict:
    """The full gymwright.grade/v1 document for one response to one pack task.

    Any response text gets a grade, never an exception: the grader reads lone surrogates and NULs as
    their \\uXXXX escapes, and every check is bounded on any thread (a trainer's thread pool included) without a
    CPU timer: patterns have their own timeout, parses their size and depth limits."""
    task = _task(task_id)
    if not isinstance(response, str):
        response = "" if response is None else str(response)
    judge, limits = _from_env()
    result = grade(
        task.rubric, answer=response, judge=judge, checks_module=task.environment.checks_module, limits=limits
    )
    return result.to_document()


def _task_id(ground_truth, extra_info) -> str:
    if isinstance(extra_info, dict) and extra_info.get("task_id"):
        return extra_info["task_id"]
    return str(ground_truth)


def _warn_unscored(document: dict) -> None:
    global _warned
    if _warned or document["complete"]:
        return
    _warned = True
    unscored = ", ".join(check["id"] for check in document["checks"] if check["status"] != "scored")
    warnings.warn(
        f"some checks are unscored (no judge configured, or they need the agent's workspace or sandbox: "
        f"such tasks are Harbor tasks, not rows of data/*.parquet), e.g. {unscored}; the score is the "
        "reward's lower bound (score_upper beside it)",
        stacklevel=3,
    )


def compute_score(data_source, solution_str, ground_truth, extra_info=None) -> dict:
    """verl's custom reward function: {"score": reward in [0, 1], "score_upper": the reward's upper bound,
    "passed": 0/1, "complete": 0/1, "gated": 0/1, "unscored": number of unscored checks}. The score is
    the grade's lower bound (an unscored check earns nothing, RUBRIC.md "Scoring"); score_upper is what
    it could be if every unscored check were met (equal to score when the grade is complete). Numbers
    only, and the same keys for every response, so that verl can stack each into an array and average it
    (val-aux/<source>/passed/...)."""
    document = grade_response(_task_id(ground_truth, extra_info), solution_str)
    _warn_unscored(document)
    reward = float(document["reward"])
    upper = document.get("reward_upper")
    return {
        "score": reward,
        "score_upper": reward if upper is None else float(upper),
        "passed": int(bool(document["passed"])),
        "complete": int(bool(document["complete"])),
        "gated": int(bool(document["gated"])),
        "unscored": sum(1 for check in document["checks"] if check["status"] != "scored"),
    }


def _completion_text(completion) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion:  # conversational: a list of messages
        last = completion[-1]
        return last.get("content") or "" if isinstance(last, dict) else str(last)
    return str(completion)


def trl_reward(prompts, completions, **columns) -> list[float | None]:
    """TRL GRPOTrainer reward function: one reward per completion, None when no check of its rubric
    could be scored (TRL then gives it no advantage and leaves it out of its group's baseline).
    With TRL's `log_metric` (1.16), logs gymwright/incomplete (the share of grades with unscored
    checks) and gymwright/unscorable (the share of None rewards)."""
    reward_models = columns.get("reward_model") or [None] * len(completions)
    extra_infos = columns.get("extra_info") or [None] * len(completions)
    rewards: list[float | None] = []
    incomplete = 0
    for completion, reward_model, extra_info in zip(completions, reward_models, extra_infos):
        ground_truth = reward_model.get("ground_truth") if isinstance(reward_model, dict) else reward_model
        document = grade_response(_task_id(ground_truth, extra_info), _completion_text(completion))
        _warn_unscored(document)
        incomplete += not document["complete"]
        scored = any(check["status"] == "scored" for check in document["checks"])
        rewards.append(float(document["reward"]) if scored else None)
    log_metric = columns.get("log_metric")
    if callable(log_metric) and rewards:
        log_metric("gymwright/incomplete", incomplete / len(rewards))
        log_metric("gymwright/unscorable", sum(reward is None for reward in rewards) / len(rewards))
    return rewards


trl_reward.__name__ = "gymwright_rubric"

if __name__ == "__main__":  # python reward.py TASK_ID < answer.txt
    if len(sys.argv) != 2:
        sys.exit("usage: python reward.py TASK_ID < answer.txt")
    print(json.dumps(grade_response(sys.argv[1], sys.stdin.read()), indent=2, ensure_ascii=False))
    sys.stdout.flush()  # os._exit skips it: a pipe's or a file's buffer would be lost
    os._exit(0)  # the judge client's threads need not be joined
