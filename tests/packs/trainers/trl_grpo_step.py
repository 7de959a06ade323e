"""One GRPO step with TRL on a pack, as the pack's README says a lab runs it: data/train.parquet through
`datasets`' parquet loader, the pack's reward.py `trl_reward` as the reward function, on the CPU.

    python trl_grpo_step.py PACK_DIR OUT_JSON

Writes what the trainer saw: the dataset's columns, the steps run, every call of the reward
function (the completions it was given, their task ids and the rewards it returned), and the
trainer's log history (where the metrics the reward function logged end up).
"""

import json
import sys
from pathlib import Path

pack, out = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, str(pack))

import reward  # noqa: E402  the pack's own reward.py
import tiny_policy  # noqa: E402
from datasets import load_dataset  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

dataset = load_dataset("parquet", data_files={"train": str(pack / "data" / "train.parquet")})["train"]
tokenizer = tiny_policy.tokenizer()
tokenizer.padding_side = "left"
calls = []


def gymwright_rubric(prompts, completions, **columns):
    rewards = reward.trl_reward(prompts, completions, **columns)
    calls.append(
        {
            "completions": [c[-1]["content"] if isinstance(c, list) else c for c in completions],
            "task_ids": [row["ground_truth"] for row in columns["reward_model"]],
            "rewards": rewards,
        }
    )
    return rewards


config = GRPOConfig(
    output_dir=str(out.parent / "grpo-out"),
    max_steps=1,
    learning_rate=1e-3,
    per_device_train_batch_size=4,
    num_generations=2,
    max_completion_length=8,
    use_cpu=True,
    report_to=[],
    logging_steps=1,
    save_strategy="no",
    seed=0,
)
trainer = GRPOTrainer(
    model=tiny_policy.model(len(tokenizer)),
    reward_funcs=gymwright_rubric,
    args=config,
    train_dataset=dataset,
    processing_class=tokenizer,
)
result = trainer.train()
out.write_text(
    json.dumps(
        {
            "columns": dataset.column_names,
            "rows": len(dataset),
            "steps": result.global_step,
            "calls": calls,
            "log_history": trainer.state.log_history,
        }
    )
)
