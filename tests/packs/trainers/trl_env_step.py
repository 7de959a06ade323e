"""One GRPO step with TRL on a pack's agentic tasks, as docs/environments.md says a lab runs it:
`GRPOTrainer(environment_factory=TaskEnvironment)` from the pack's env/, one environment (one sandbox) per
rollout, the reward owned by the environment (`get_reward`), on the CPU.

    python trl_env_step.py PACK_DIR OUT_JSON

The policy is a tiny model whose generation follows a script (tiny_policy.scripted_model): it calls the
tasks' tools in the chat format TRL parses, and its rollouts of a task differ (a right and a wrong
variant). Writes, for every rollout of the step: its task, the tools TRL called, the reward TRL logged and
the grade the environment's sandbox produced; and the trainer's log history.
"""

import json
import sys
from pathlib import Path

pack, out = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, str(pack))

import tiny_policy  # noqa: E402
from datasets import Dataset  # noqa: E402
from env import TaskEnvironment, agentic_task_ids  # noqa: E402  the pack's own env/
from trl import GRPOConfig, GRPOTrainer  # noqa: E402


def call(name: str, **arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


SCRIPTS = {
    "Add up the amounts": [
        [
            call("bash", command="awk -F, 'NR > 1 { s += $2 } END { print s }' data/sales.csv > total.txt"),
            call("submit", answer="60"),
            "Done.",
        ],
        [call("bash", command="echo 59 > total.txt"), call("submit", answer="59"), "Done."],
    ],
    "add() is wrong": [
        [
            call("write_file", path="calc.py", content="def add(a, b):\n    return a + b\n"),
            call("submit", answer="fixed"),
            "Done.",
        ],
        [
            call("write_file", path="calc.py", content="def add(a, b):\n    return abs(a) + b\n"),
            call("submit", answer="fixed"),
            "Done.",
        ],
    ],
}

ids = agentic_task_ids()
# a row per task, each rolled out num_generations times; the task_id column reaches reset(task_id=...)
train = Dataset.from_dict({"prompt": [[{"role": "user", "content": ""}]] * len(ids), "task_id": ids})
tokenizer = tiny_policy.tool_tokenizer()
tokenizer.padding_side = "left"
config = GRPOConfig(
    output_dir=str(out.parent / "grpo-env-out"),
    max_steps=1,
    learning_rate=1e-3,
    per_device_train_batch_size=8,
    num_generations=4,
    max_completion_length=1024,
    max_tool_calling_iterations=4,
    temperature=1.0,
    use_cpu=True,
    report_to=[],
    logging_steps=1,
    save_strategy="no",
    seed=0,
    shuffle_dataset=False,
)
trainer = GRPOTrainer(
    model=tiny_policy.scripted_model(tokenizer, SCRIPTS),
    args=config,
    train_dataset=train,
    processing_class=tokenizer,
    environment_factory=TaskEnvironment,
)
result = trainer.train()
rollouts = []
logged = list(trainer._logs["rewards"]["TaskEnvironment"])
for environment, reward in zip(trainer.environments, logged, strict=True):
    rollouts.append(
        {
            "task_id": environment.task_id,
            "tools": [step["name"] for step in environment.trajectory if step["role"] == "tool"],
            "logged_reward": reward,
            "grade": environment.grade(),
        }
    )
    environment.close()
out.write_text(
    json.dumps(
        {
            "steps": result.global_step,
            "tools": sorted(t.__name__ for t in trainer.tools),
            "rollouts": rollouts,
            "log_history": trainer.state.log_history,
        }
    )
)
