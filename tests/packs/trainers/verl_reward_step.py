"""verl's side of a pack, as the pack's own README configures it: verl's `ppo_trainer` config composed
with the overrides of the README's `python -m verl.trainer.main_ppo` line (read from the unpacked pack's
README.md, $PWD being the pack), without `migrate_legacy_reward_impl`, which main_ppo does not call;
the dataset verl's trainer makes from it (create_rl_dataset: RLHFDataset over data/train.parquet); the
reward loop worker and reward manager verl's agent loop scores with (the pack's reward.py
`compute_score`); then verl's own code over the batch of rewards:

- the agent loop's `_postprocess`, which stacks each reward_extra_info key into one numpy array over
  the batch (what RewardLoopManager.compute_rm_score does too);
- the legacy trainer's `_validate` (RayPPOTrainer) whole, whose reduction is
  `process_validation_metrics`, and its dump of the validation generations;
- the training step's `extract_reward`, the arrays it puts into the batch, and its rollout dump
  (`_log_rollout_data`);
- the v1 trainer's reduction (main_ppo's default trainer): `process_validation_metrics` with the
  expected counts, over the per-key lists its `_validate` gathers (v1's own module needs
  `transferqueue`, which this virtualenv does not install; its `_val_metrics_update` is v0's plus
  those counts).

No Ray, no GPU, no inference server: only the policy's generation is replaced by the given responses;
Ray's actor handles are plain objects. Everything that turns rewards into arrays and metrics is verl's.

    python verl_reward_step.py PACK_DIR OUT_JSON '{"task id": "response", ...}'
"""

import json
import re
import shlex
import sys
from pathlib import Path

import numpy as np
import tiny_policy
import torch
import verl
from hydra import compose, initialize_config_dir
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopWorker, _InternalAgentLoopOutput
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.trainer.ppo.metric_utils import process_validation_metrics
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.trainer.ppo.reward import extract_reward, load_reward_manager
from verl.trainer.ppo.utils import create_rl_dataset
from verl.utils.dataset.rl_dataset import collate_fn

pack, out, answers = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])


def readme_overrides() -> list[str]:
    """The key=value arguments of the README's verl command line, with $PWD the pack."""
    card = (pack / "README.md").read_text(encoding="utf-8")
    command = re.search(r"python -m verl\.trainer\.main_ppo (.*?)(?:\n\s*```|\n\n)", card, re.S)
    assert command, "the pack's README has no `python -m verl.trainer.main_ppo` command"
    words = shlex.split(command.group(1).replace("\\\n", " ").replace("$PWD", str(pack)))
    return [word for word in words if "=" in word]


overrides = readme_overrides() + [
    f"+data.cache_dir={out.parent}/verl-cache",
    f"trainer.validation_data_dir={out.parent}/verl-val",
    f"trainer.rollout_data_dir={out.parent}/verl-rollout",
]
with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
    config = compose(config_name="ppo_trainer", overrides=overrides)
tokenizer = tiny_policy.tokenizer()
dataset = create_rl_dataset(config.data.train_files, config.data, tokenizer, None, is_train=True)
rows = [dataset[i] for i in range(len(dataset))]

# verl's reward loop worker (what AgentLoopWorker._compute_score calls through a Ray handle), with the
# reward manager its __init__ would load; its tokenizer is the policy's (none can be downloaded here).
manager = load_reward_manager(config, tokenizer)
reward_worker = RewardLoopWorker.__new__(RewardLoopWorker)
reward_worker.config, reward_worker.reward_manager, reward_worker.loop = config, manager, manager.loop
agent_worker = AgentLoopWorker.__new__(AgentLoopWorker)
agent_worker.reward_loop_worker_handles = [reward_worker]  # streaming reward: the scores come with the outputs
scored: list[dict] = []


def rollout(batch: DataProto) -> DataProto:
    """What verl's agent loop returns for a batch of prompts: the chat template over raw_prompt
    (left-padded), the response (right-padded), each scored by the reward loop worker, then
    AgentLoopWorker._postprocess (verl's) over the outputs."""
    texts = [
        tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=False)
        for prompt in batch.non_tensor_batch["raw_prompt"]
    ]
    responses = [answers[reward_model["ground_truth"]] for reward_model in batch.non_tensor_batch["reward_model"]]
    tokenizer.padding_side = "left"
    prompts = tokenizer(texts, padding="longest", return_tensors="pt", add_special_tokens=False)
    tokenizer.padding_side = "right"
    replies = tokenizer(responses, padding="max_length", max_length=64, return_tensors="pt", add_special_tokens=False)
    attention_mask = torch.cat([prompts["attention_mask"], replies["attention_mask"]], dim=1)
    to_score = DataProto.from_dict(
        tensors={"prompts": prompts["input_ids"], "responses": replies["input_ids"], "attention_mask": attention_mask},
        non_tensors={key: batch.non_tensor_batch[key] for key in ("data_source", "reward_model", "extra_info")},
    )
    results = manager.loop.run_until_complete(reward_worker.compute_score_batch(to_score))
    scored.extend(results)
    input_ids = torch.cat([prompts["input_ids"], replies["input_ids"]], dim=1)
    outputs = [
        _InternalAgentLoopOutput(
            prompt_ids=prompts["input_ids"][i : i + 1],
            response_ids=replies["input_ids"][i : i + 1],
            response_mask=replies["attention_mask"][i : i + 1],
            attention_mask=attention_mask[i : i + 1],
            input_ids=input_ids[i : i + 1],
            position_ids=(attention_mask[i : i + 1].cumsum(-1) - 1).clamp(min=0),
            num_turns=2,
            metrics=AgentLoopMetrics(),
            reward_score=result["reward_score"],
            extra_fields={"reward_extra_info": result["reward_extra_info"]},
        )
        for i, result in enumerate(results)
    ]
    return AgentLoopWorker._postprocess(agent_worker, outputs, validate=True)


class Rollouts:
    """The rollout manager's interface as RayPPOTrainer._validate calls it."""

    def generate_sequences(self, batch: DataProto) -> DataProto:
        return rollout(batch)


# The legacy trainer's validation, whole: verl's RayPPOTrainer._validate over a dataloader of the pack's
# rows, its rollout replaced by `Rollouts`.
trainer = RayPPOTrainer.__new__(RayPPOTrainer)
trainer.config, trainer.tokenizer, trainer.use_rm, trainer.global_steps = config, tokenizer, False, 1
trainer.val_dataloader = [collate_fn(rows)]
trainer.async_rollout_manager = Rollouts()
trainer._init_dump_executor()
validation = trainer._validate()

# A training step's reward path: the rollout joined to the batch, extract_reward, the arrays the trainer
# puts into the batch (ray_trainer.fit: `{k: np.array(v) ...}`), and the rollout dump.
batch = DataProto.from_single_dict(collate_fn(rows))
batch = batch.union(rollout(batch))
reward_tensor, reward_extra_infos = extract_reward(batch)
batch.batch["token_level_scores"] = reward_tensor
batch.non_tensor_batch.update({key: np.array(values) for key, values in reward_extra_infos.items()})
trainer._log_rollout_data(batch, reward_extra_infos, {}, config.trainer.rollout_data_dir)
trainer._shutdown_dump_executor()

# The v1 trainer (main_ppo's default) gathers reward_extra_info into one list per key, "reward" first,
# and reduces them with process_validation_metrics, with the number of sessions expected per prompt.
infos = [result["reward_extra_info"] for result in scored[: len(rows)]]
gathered = {"reward": [float(result["reward_score"]) for result in scored[: len(rows)]]}
gathered.update({key: [info[key] for info in infos] for key in infos[0]})
sources = [row["data_source"] for row in rows]
uids = [f"uid-{i}" for i in range(len(rows))]
validation_v1 = process_validation_metrics(
    sources, uids, gathered, expected_acc_counts={(s, u): 1 for s, u in zip(sources, uids)}
)


def dumped(folder: str) -> list[dict]:
    return [json.loads(line) for path in sorted(Path(folder).glob("*.jsonl")) for line in path.read_text().splitlines()]


out.write_text(
    json.dumps(
        {
            "manager": f"{type(manager).__module__}.{type(manager).__name__}",
            "columns": sorted(rows[0]),
            "task_ids": [row["reward_model"]["ground_truth"] for row in rows],
            "results": scored[: len(rows)],
            "validation": {key: float(value) for key, value in validation.items()},
            "validation_v1": {
                f"{source}/{name}/{metric}": value
                for source, names in validation_v1.items()
                for name, metrics in names.items()
                for metric, value in metrics.items()
            },
            "batch_arrays": {key: batch.non_tensor_batch[key].tolist() for key in reward_extra_infos},
            "validation_dump": dumped(config.trainer.validation_data_dir),
            "rollout_dump": dumped(config.trainer.rollout_data_dir),
        }
    )
)
