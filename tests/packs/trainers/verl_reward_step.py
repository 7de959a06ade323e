"""verl's side of a pack, as the README's command line configures it: verl's own `ppo_trainer` config
composed with the README's overrides (data.train_files, custom_reward_function.path/.name), the
dataset verl's trainer makes from it (create_rl_dataset: RLHFDataset over data/train.parquet), and
the reward manager verl's reward loop loads from it (the pack's reward.py `compute_score`), scoring
one response per task as verl's RewardLoopWorker does. No Ray, no GPU: the rollout is replaced by
the given responses.

    python verl_reward_step.py PACK_DIR OUT_JSON '["response for row 0", ...]'
"""

import json
import sys
from pathlib import Path

import tiny_policy
import torch
import verl
from hydra import compose, initialize_config_dir
from verl import DataProto
from verl.experimental.reward_loop import migrate_legacy_reward_impl
from verl.trainer.ppo.reward import load_reward_manager
from verl.trainer.ppo.utils import create_rl_dataset
from verl.utils.dataset.rl_dataset import collate_fn

pack, out, answers = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
overrides = [f"data.train_files={pack}/data/train.parquet", f"data.val_files={pack}/data/test.parquet",
             f"custom_reward_function.path={pack}/reward.py", "custom_reward_function.name=compute_score",
             f"+data.cache_dir={out.parent}/verl-cache"]
with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
    config = migrate_legacy_reward_impl(compose(config_name="ppo_trainer", overrides=overrides))
tokenizer = tiny_policy.tokenizer()
dataset = create_rl_dataset(config.data.train_files, config.data, tokenizer, None, is_train=True)
rows = [dataset[i] for i in range(len(dataset))]
data = DataProto.from_single_dict(collate_fn(rows))
# What verl's agent loop does before the reward: the chat template over raw_prompt (left-padded), then
# the policy's response (right-padded); the attention mask covers both.
texts = [tokenizer.apply_chat_template(list(row["raw_prompt"]), add_generation_prompt=True, tokenize=False)
         for row in rows]
tokenizer.padding_side = "left"
prompts = tokenizer(texts, padding="longest", return_tensors="pt", add_special_tokens=False)
tokenizer.padding_side = "right"
responses = tokenizer(answers, padding="max_length", max_length=64, return_tensors="pt", add_special_tokens=False)
data.batch["prompts"], data.batch["responses"] = prompts["input_ids"], responses["input_ids"]
data.batch["attention_mask"] = torch.cat([prompts["attention_mask"], responses["attention_mask"]], dim=1)
manager = load_reward_manager(config, tokenizer)


async def score_all():
    return [await manager.run_single(data[i:i + 1]) for i in range(len(data))]


results = manager.loop.run_until_complete(score_all())  # the manager's own loop, as verl's RewardLoopWorker
out.write_text(json.dumps({"manager": f"{type(manager).__module__}.{type(manager).__name__}",
                           "columns": sorted(rows[0]), "task_ids": [row["reward_model"]["ground_truth"] for row in rows],
                           "results": results}))
