"""The dataset card (README.md): a Hugging Face header, then the text of card.md.tmpl, a string.Template filled
with the pack's counts, difficulty histogram and the recipes that load it in verl, TRL, Harbor and Inspect."""

from __future__ import annotations

import json
import string
import uuid
from collections import Counter
from pathlib import Path

from grading.engine.calibration import DEFAULT_BAND
from grading.engine.models import TASK_SCHEMA

from .info import PackInfo
from .splits import DIFFICULTY_BINS, empty_split

CANARY_NAMESPACE = uuid.UUID("8d3c1b52-3f0e-4d8e-9a55-5b7b9f3c2a10")
HARBOR_ONLY_SHOWN = 20  # task ids the card names of those not in the parquet files
CARD_TEMPLATE = Path(__file__).resolve().parent / "card.md.tmpl"


def canary_guid(pack_slug: str) -> str:
    return str(uuid.uuid5(CANARY_NAMESPACE, pack_slug))


def _empty_split_note(counts: dict) -> str:
    empty = empty_split(counts["parquet"])
    if empty is None:
        return ""
    if not counts[empty]:
        head = f"**The {empty} split is empty**: no task's id hashed into it at this ratio"
    else:
        head = (
            f"**The {empty} split of `data/*.parquet` is empty**: its {counts[empty]} "
            f"task{' needs' if counts[empty] == 1 else 's need'} the agent's episode (Harbor only, below)"
        )
    return f"\n\n{head}. " + (
        "Evaluate on `train` (Inspect: `-T split=train`; verl, which refuses an empty validation set: "
        "`data.val_files=$PWD/data/train.parquet`), or build the pack with another test ratio."
        if empty == "test"
        else "Train on `test`, or build the pack with another test ratio."
    )


# Hugging Face's licence identifiers (https://huggingface.co/docs/hub/repositories-licenses) that a pack's
# SPDX-style licence may name; any other licence is `other`, with its name.
HF_LICENCES = frozenset(
    (
        "apache-2.0",
        "mit",
        "openrail",
        "bigscience-openrail-m",
        "creativeml-openrail-m",
        "bigscience-bloom-rail-1.0",
        "bigcode-openrail-m",
        "afl-3.0",
        "artistic-2.0",
        "bsl-1.0",
        "bsd",
        "bsd-2-clause",
        "bsd-3-clause",
        "bsd-3-clause-clear",
        "c-uda",
        "cc",
        "cc0-1.0",
        "cc-by-2.0",
        "cc-by-2.5",
        "cc-by-3.0",
        "cc-by-4.0",
        "cc-by-sa-3.0",
        "cc-by-sa-4.0",
        "cc-by-nc-2.0",
        "cc-by-nc-3.0",
        "cc-by-nc-4.0",
        "cc-by-nd-4.0",
        "cc-by-nc-nd-3.0",
        "cc-by-nc-nd-4.0",
        "cc-by-nc-sa-2.0",
        "cc-by-nc-sa-3.0",
        "cc-by-nc-sa-4.0",
        "cdla-sharing-1.0",
        "cdla-permissive-1.0",
        "cdla-permissive-2.0",
        "wtfpl",
        "ecl-2.0",
        "epl-1.0",
        "epl-2.0",
        "eupl-1.1",
        "agpl-3.0",
        "gfdl",
        "gpl",
        "gpl-2.0",
        "gpl-3.0",
        "lgpl",
        "lgpl-2.1",
        "lgpl-3.0",
        "isc",
        "lppl-1.3c",
        "ms-pl",
        "mpl-2.0",
        "odc-by",
        "odbl",
        "openrail++",
        "osl-3.0",
        "postgresql",
        "ofl-1.1",
        "ncsa",
        "unlicense",
        "zlib",
        "pddl",
        "lgpl-lr",
        "deepfloyd-if-license",
        "llama2",
        "llama3",
        "llama3.1",
        "llama3.2",
        "llama3.3",
        "gemma",
        "unknown",
        "other",
    )
)
SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
)


def _yaml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid YAML double-quoted scalar


def card_front_matter(*, info: PackInfo, counts: dict) -> str:
    """The Hugging Face dataset card's YAML header: licence, name, categories, size, and the parquet
    splits as the `default` config, so that `datasets.load_dataset(<unpacked pack>)` reads them. A split
    with no parquet rows is left out: `datasets` refuses a split with no rows."""
    licence = (info.licence or "").strip().lower()
    lines = ["---"]
    if licence in HF_LICENCES:
        lines.append(f"license: {licence}")
    else:
        name = (
            "-".join(
                part for part in "".join(c if c.isalnum() or c in ".-" else "-" for c in licence).split("-") if part
            )
            or "unknown"
        )
        lines += ["license: other", f"license_name: {_yaml_string(name)}"]
    size = next((label for bound, label in SIZE_CATEGORIES if counts["tasks"] < bound), "n>10M")
    splits = [name for name in ("train", "test") if counts["parquet"][name]] or ["train"]
    lines += [
        f"pretty_name: {_yaml_string(info.name)}",
        "task_categories:",
        "- text-generation",
        "- reinforcement-learning",
        "tags:",
        "- gymwright",
        "- rubric",
        "- agents",
        "- rl-environments",
        "size_categories:",
        f"- {size}",
        "configs:",
        "- config_name: default",
        "  data_files:",
    ]
    for name in splits:
        lines += [f"  - split: {name}", f"    path: data/{name}.parquet"]
    return "\n".join(lines + ["---", ""])


def _harbor_only_note(counts: dict, harbor_only: list[str]) -> str:
    if not harbor_only:
        return ""
    shown = ", ".join(f"`{task_id}`" for task_id in harbor_only[:HARBOR_ONLY_SHOWN])
    more = f" and {len(harbor_only) - HARBOR_ONLY_SHOWN} more" if len(harbor_only) > HARBOR_ONLY_SHOWN else ""
    parquet = counts["parquet"]["train"] + counts["parquet"]["test"]
    return f"""
**{len(harbor_only)} of {counts["tasks"]} tasks are Harbor tasks only, not rows of `data/*.parquet`** ({shown}{more}):
their rubrics check the agent's workspace files, run commands or python checks in its sandbox, or read its
trajectory, which no reward function can grade from a response. Graded from the response text, those checks
would be left out and a reply that skipped the work would earn the rest, so the parquet files (and
`inspect_task.py`) hold only the {parquet} task{"" if parquet == 1 else "s"} that a response alone grades.
Run the others as Harbor tasks (`tasks/<id>/`), whose verifier grades the whole episode in a sandbox.
"""


def _env_note(harbor_only: list[str]) -> str:
    """The card's section on env/ (packs with agentic tasks only)."""
    if not harbor_only:
        return ""
    return f"""
### Agentic tasks, live: `env/`

{"The agentic task also trains" if len(harbor_only) == 1 else f"The {len(harbor_only)} agentic tasks also train"} live through `env/`: `TaskEnvironment` starts a
sandbox (bubblewrap, or docker) with a task's files, offers its tools as typed methods (`bash`,
`read_file`, `write_file`, `list_files`, `submit`, and each custom tool) and grades the episode in that
sandbox with `grader/` (`grade()`: reward, reward_upper, complete, every check). Grader-only files
enter the sandbox only for the grading; protected files are restored before it.
`pip install -r env/requirements.txt` (bubblewrap needs `bwrap` on the host; docker a daemon).

```python
from env import TaskEnvironment
env = TaskEnvironment()                      # backend="bubblewrap" | "docker"
prompt = env.reset(task_id=env.tasks()[0])
print(env.bash("ls"))
print(env.grade()["reward"]); env.close()
```

TRL (1.16, GRPO, one environment per rollout, the reward owned by the environment's `get_reward`):

```python
import sys; sys.path.insert(0, ".")
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer
from env import TaskEnvironment, agentic_task_ids
ids = agentic_task_ids()
train = Dataset.from_dict({{"prompt": [[{{"role": "user", "content": ""}}]] * len(ids), "task_id": ids}})
trainer = GRPOTrainer(model="Qwen/Qwen3-0.6B", train_dataset=train, environment_factory=TaskEnvironment,
                      args=GRPOConfig(output_dir="out", max_tool_calling_iterations=30))
trainer.train()
```

The reward TRL logs (`rewards/TaskEnvironment/mean`) is the grade of each rollout's sandbox. Tasks whose
checks read the final answer need the model to call `submit`.

OpenEnv (openenv-core, in env/requirements.txt): `python -m env serve --port 8000` serves the agentic tasks
over OpenEnv's endpoints for its own client (`openenv.GenericEnvClient`): a `/ws` session is one sandbox,
`reset(task_id=...)` answers the prompt and the task's tools, `step({{"tool": "bash", "arguments": {{...}}}})`
a tool's output, and the step that ends the episode (`submit`, or the task's limits) is `done` with the
grade's `reward`. `--max-concurrent-envs`, `--session-timeout` and `--max-message-bytes` bound it; it listens
on 127.0.0.1 unless `--host` says otherwise. On N hosts: one `python -m env serve --host 0.0.0.0 --backend
docker` per host behind a load balancer that passes WebSocket upgrades (a session is its connection).

verl (0.9, multi-turn agent loop: the task's tools run in the trajectory's sandbox, the grade is its reward):

```bash
python -m env verl --out verl/      # verl/agent_loop.yaml and verl/agentic.parquet (needs pyarrow)
PYTHONPATH=$PWD python -m verl.trainer.main_ppo data.train_files=$PWD/verl/agentic.parquet \\
  data.val_files=$PWD/verl/agentic.parquet actor_rollout_ref.rollout.multi_turn.enable=True \\
  actor_rollout_ref.rollout.agent.agent_loop_config_path=$PWD/verl/agent_loop.yaml \\
  actor_rollout_ref.rollout.agent.default_agent_loop=gymwright_agent ...
```
"""


HUMAN_FLAGGED_SHOWN = 20


def _human_flagged_note(flagged) -> str:
    """The card's word on tasks whose reward ranks rollouts unlike reviewers' blind scores."""
    if not flagged:
        return "No task of this pack is flagged."
    shown = ", ".join(f"`{task_id}`" for task_id in list(flagged)[:HUMAN_FLAGGED_SHOWN])
    more = f" and {len(flagged) - HUMAN_FLAGGED_SHOWN} more" if len(flagged) > HUMAN_FLAGGED_SHOWN else ""
    return (
        f"**{len(flagged)} task{'s are' if len(flagged) != 1 else ' is'} flagged**: {shown}{more}. Its reward ranks "
        "rollouts unlike people scoring them blind; train on it with care."
    )


def dataset_card(
    *,
    info: PackInfo,
    counts: dict,
    histogram: Counter,
    environments: Counter,
    harbor_only: list[str] = (),
    human_flagged: list[str] = (),
) -> str:
    parquet = counts["parquet"]
    low, high = DEFAULT_BAND
    environment_rows = "\n".join(f"| {name} | {count} |" for name, count in sorted(environments.items()))
    fields = {
        "name": info.name,
        "version": info.version,
        "description": info.description or "A Gymwright task pack.",
        "top": f"{info.slug}-{info.version}",
        "train": counts["train"],
        "test": counts["test"],
        "tasks": counts["tasks"],
        "parquet_train": parquet["train"],
        "parquet_test": parquet["test"],
        "parquet_total": parquet["train"] + parquet["test"],
        "test_ratio": f"{info.test_ratio:g}",
        "empty_split_note": _empty_split_note(counts),
        "environment_rows": environment_rows or "| (none) | 0 |",
        "low": f"{low:.0%}",
        "high": f"{high:.0%}",
        "difficulty_rows": "\n".join(f"| {name} | {histogram.get(name, 0)} |" for name in DIFFICULTY_BINS),
        "task_schema": TASK_SCHEMA,
        "harbor_only_note": _harbor_only_note(counts, harbor_only),
        "env_note": _env_note(harbor_only),
        "val": "test" if parquet["test"] else "train",  # verl refuses an empty validation set
        "inspect_split": (
            "            # the test split; -T split=all for every task"
            if parquet["test"]
            else " -T split=train   # the test split is empty"
        ),
        "licence": info.licence,
        "canary": canary_guid(info.slug),
        "human_flagged_note": _human_flagged_note(human_flagged),
    }
    template = string.Template(CARD_TEMPLATE.read_text(encoding="utf-8"))
    return card_front_matter(info=info, counts=counts) + "\n" + template.substitute(fields)
