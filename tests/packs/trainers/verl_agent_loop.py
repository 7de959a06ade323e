"""verl 0.9's multi-turn rollout on a pack's env/, as the pack's README configures it: `python -m env verl` writes
the agent loop entry and the agentic tasks' dataset into the pack's verl/; verl's `ppo_trainer` config is
composed with the overrides of the README's agent-loop `main_ppo` line ($PWD the pack); verl's own RLHFDataset reads the rows; verl's agent loop registry loads the entry from the
YAML and `hydra.utils.instantiate`s it exactly as `AgentLoopWorker._run_agent_loop` does; each loop runs one
trajectory against a scripted policy (no GPU, no inference server: the server manager's `generate` answers
the tiny tokenizer's ids of the scripted assistant turns, hermes tool calls) and the pack's sandbox.

    python verl_agent_loop.py PACK_DIR OUT_JSON '{"task id": ["assistant turn", ...], ...}'

Writes per task: the reward_score verl would train on, the grade in extra_fields, the turns, the tool
responses the model saw, the tools offered.
"""

import asyncio
import json
import re
import shlex
import sys
from pathlib import Path

import hydra
import tiny_policy
import verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from verl.experimental.agent_loop import agent_loop as verl_agent_loop
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
from verl.trainer.ppo.utils import create_rl_dataset
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

pack, out, scripts = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
sys.path.insert(0, str(pack))

from env.__main__ import write_verl_files  # noqa: E402  the pack's own env/

# The pack card's commands: `python -m env verl --out verl/` from the pack, then its main_ppo overrides.
files = pack / "verl"
assert write_verl_files(str(files), backend="bubblewrap", image=None) == 0
card = (pack / "README.md").read_text(encoding="utf-8")
command = re.search(r"python -m verl\.trainer\.main_ppo ([^`]*?agent_loop_config_path[^`]*?)\n```", card, re.S)
assert command, "the pack's README has no main_ppo command for the agent loop"
words = shlex.split(command.group(1).replace("\\\n", " ").replace("$PWD", str(pack)))
overrides = [word for word in words if "=" in word] + [
    # this test's tiny policy and lengths (a character-level tokenizer: one token per character)
    "data.max_prompt_length=4096",
    "data.filter_overlong_prompts=False",
    f"+data.cache_dir={out.parent}/verl-cache",
    "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=4096",
    "actor_rollout_ref.rollout.prompt_length=4096",
    "actor_rollout_ref.rollout.response_length=8192",
]
assert f"actor_rollout_ref.rollout.agent.agent_loop_config_path={files}/agent_loop.yaml" in overrides
with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
    config = compose(config_name="ppo_trainer", overrides=overrides)
tokenizer = tiny_policy.tokenizer()
dataset = create_rl_dataset(config.data.train_files, config.data, tokenizer, None, is_train=True)

# AgentLoopWorker.__init__'s registry step, then _run_agent_loop's instantiation, verbatim in effect.
for entry in OmegaConf.load(config.actor_rollout_ref.rollout.agent.agent_loop_config_path):
    verl_agent_loop._agent_loop_registry[entry.name] = entry


class ScriptedServer:
    """The rollout server's `generate`: the next scripted assistant turn, as token ids."""

    def __init__(self, turns: list[str]):
        self.turns = list(turns)
        self.prompts: list[str] = []

    async def generate(self, *, request_id, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        self.prompts.append(tokenizer.decode(prompt_ids))
        text = self.turns.pop(0) if self.turns else "nothing more"
        return TokenOutput(token_ids=tokenizer.encode(text, add_special_tokens=False), stop_reason="completed")


async def main() -> dict:
    seen = {}
    for index in range(len(dataset)):
        row = dataset[index]
        task_id = row["extra_info"]["task_id"]
        if task_id not in scripts:
            continue
        agent_name = row.pop("agent_name")
        entry = verl_agent_loop._agent_loop_registry[agent_name]
        server = ScriptedServer(scripts[task_id])
        loop = hydra.utils.instantiate(
            config=entry,
            trainer_config=DictConfigWrap(config=config),
            server_manager=server,
            tokenizer=tokenizer,
            processor=None,
            hf_model_type=None,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(config.data),
            tools=ToolListWrap([]),
        )
        kwargs = {
            key: value for key, value in row.items() if key in ("raw_prompt", "extra_info", "tools_kwargs", "index")
        }
        output = await loop.run({"temperature": 1.0}, **kwargs)
        seen[task_id] = {
            "agent_name": agent_name,
            "loop_class": type(loop).__name__,
            "reward_score": output.reward_score,
            "grade": output.extra_fields["gymwright_grade"],
            "num_turns": output.num_turns,
            "response": tokenizer.decode(output.response_ids),
            "tools": sorted(schema["function"]["name"] for schema in loop.tool_schemas),
            "generate_calls": len(server.prompts),
        }
    return seen


out.write_text(json.dumps(asyncio.run(main())))
