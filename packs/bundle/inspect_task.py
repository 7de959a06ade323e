"""An Inspect (inspect_ai) task over this Gymwright pack: every pack task is a sample, graded by the
pack's own rubric grader (reward.py), exactly as Gymwright graded the previews.

    pip install inspect_ai openai -r grader/requirements.txt
    inspect eval inspect_task.py --model openai/gpt-4o-mini         # the test split
    inspect eval inspect_task.py -T split=all --model openai/gpt-4o-mini
    inspect eval inspect_task.py -T task_ids=q3-revenue,fizzbuzz --model openai/gpt-4o-mini

Any of Inspect's providers works; for an OpenAI-compatible server (vLLM, SGLang, a gateway) use
`--model openai-api/NAME/MODEL` with NAME_BASE_URL and NAME_API_KEY set (e.g. `openai-api/vllm/qwen`
with VLLM_BASE_URL=http://host:8000/v1). The model answers each prompt in one turn; the score is the rubric's reward in [0, 1]
(metadata: passed, complete, the unscored check ids). Judge checks use OPENAI_BASE_URL /
OPENAI_API_KEY with GYMWRIGHT_JUDGE_MODEL; without a judge they are unscored and the score is the
grade's lower bound. Only tasks that a response alone grades are samples (those of data/*.parquet): a
task whose checks need the agent's workspace, its sandbox or its trajectory (files, commands, python
checks) is left out of a split and refused by name; run it as a Harbor task (tasks/<id>/).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import Score, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState, generate

PACK_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(PACK_DIR))

import reward  # noqa: E402  (the pack's reward.py: its grader, no Django)

from grading.engine.checks import episode_checks  # noqa: E402  (the bundled grader's, via reward.py)


def _samples(split: str, task_ids: str | list[str] | None) -> list[Sample]:
    manifest = json.loads((PACK_DIR / "manifest.json").read_text(encoding="utf-8"))
    splits = {entry["id"]: entry["split"] for entry in manifest["tasks"]}
    if isinstance(task_ids, str):
        task_ids = task_ids.split(",")
    # `-T task_ids=a,b` reaches the task as a list (Inspect splits a value at its commas), `-T task_ids=a` as a str
    wanted = {str(name).strip() for name in task_ids if str(name).strip()} if task_ids else None
    if split not in ("train", "test", "all"):
        raise ValueError(f"split must be train, test or all, not {split!r}")
    samples = []
    harbor_only: dict[str, list[str]] = {}
    with open(PACK_DIR / "tasks.jsonl", encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            document = json.loads(line)
            task_id = document["id"]
            if wanted is not None and task_id not in wanted:
                continue
            if wanted is None and split != "all" and splits.get(task_id) != split:
                continue
            episode = episode_checks(document.get("rubric"))
            if episode:  # not graded from a response: a Harbor task only
                harbor_only[task_id] = episode
                continue
            samples.append(
                Sample(
                    id=task_id,
                    input=document.get("prompt") or "",
                    target=task_id,
                    metadata={
                        "version": document.get("version"),
                        "split": splits.get(task_id),
                        "title": document.get("title") or "",
                    },
                )
            )
    if wanted is not None and wanted & harbor_only.keys():
        named = sorted(wanted & harbor_only.keys())
        raise ValueError(
            f"{', '.join(named)}: not graded from a response (checks "
            f"{', '.join(check for task_id in named for check in harbor_only[task_id])} need the "
            "agent's workspace, sandbox or trajectory); run "
            + (
                "it as a Harbor task: tasks/" + named[0] + "/"
                if len(named) == 1
                else "them as Harbor tasks: tasks/<id>/"
            )
        )
    if wanted is not None and len(samples) != len(wanted):
        missing = sorted(wanted - {sample.id for sample in samples})
        raise ValueError(f"not in this pack: {', '.join(missing)}")
    if not samples:  # a small pack's test split can be empty: say so, rather than evaluate nothing
        count = manifest["counts"]["tasks"]
        if harbor_only:
            raise ValueError(
                f"the {split} split of this pack has no task graded from a response: its "
                f"{len(harbor_only)} task{'' if len(harbor_only) == 1 else 's'} need the agent's episode "
                "(Harbor tasks only, tasks/<id>/); run with -T split=train or -T split=all"
            )
        raise ValueError(
            f"the {split} split of this pack is empty ({count} task{'' if count == 1 else 's'}, "
            f"test ratio {manifest.get('test_ratio')}): run with -T split=train or -T split=all"
        )
    return samples


@scorer(metrics=[mean(), stderr()])
def gymwright_rubric():
    async def score(state: TaskState, target: Target) -> Score:
        # The grader is synchronous (its judge calls block): keep Inspect's event loop free.
        grade = await asyncio.to_thread(reward.grade_response, target.text, state.output.completion)
        unscored = [check["id"] for check in grade["checks"] if check["status"] != "scored"]
        return Score(
            value=float(grade["reward"]),
            answer=state.output.completion,
            explanation=f"{grade['earned']:g} of {grade['max']:g} points"
            + (f"; unscored: {', '.join(unscored)}" if unscored else ""),
            metadata={
                "passed": grade["passed"],
                "complete": grade["complete"],
                "gated": grade["gated"],
                "reward_upper": grade["reward_upper"],
                "unscored": unscored,
            },
        )

    return score


@task
def gymwright_pack(split: str = "test", task_ids: str | list[str] | None = None) -> Task:
    manifest = json.loads((PACK_DIR / "manifest.json").read_text(encoding="utf-8"))
    return Task(
        dataset=MemoryDataset(_samples(split, task_ids), name=f"{manifest['slug']}-{manifest['version']}"),
        solver=generate(),
        scorer=gymwright_rubric(),
    )
