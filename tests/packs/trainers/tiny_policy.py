"""A policy for trainer tests that needs no download: a character-level tokenizer with a chat template,
and a randomly initialised one-layer Llama. It proves data and reward wiring, not learning."""

import string

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {token: i for i, token in enumerate(SPECIALS + list(string.printable))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")  # one token per character
    core.decoder = decoders.Fuse()  # and back without spaces between them
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def model(vocab_size: int) -> LlamaForCausalLM:
    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
        )
    )


def tool_tokenizer() -> PreTrainedTokenizerFast:
    """The character-level tokenizer with Qwen3's chat template (which TRL 1.16 knows how to parse tool
    calls from and patches for multi-turn training): tools, tool calls and tool results render as text."""
    from trl.chat_template_utils import qwen3_chat_template

    tok = tokenizer()
    tok.add_special_tokens({"eos_token": "<|im_end|>"})  # Qwen's end of turn, which its response parser expects
    tok.chat_template = qwen3_chat_template
    return tok


ASSISTANT = "<|im_start|>assistant\n"
TAIL = 3000  # characters of the conversation the script reads (the tools' schemas come before)
NO_THINKING = "<think>\n\n</think>\n\n"


def scripted_model(tok: PreTrainedTokenizerFast, scripts: dict, *, max_positions: int = 16384):
    """A one-layer Llama (trained as usual: its gradients are real) whose generation follows a script: a
    logits processor its `generate` adds gives a large bonus to the next character of a scripted assistant
    turn.

    `scripts` maps a text the prompt contains (which task) to its variants, each a list of assistant turns
    (turn k answers after k tool results). Where variants still matching what was generated differ, each
    next character gets the same bonus, so sampling picks a variant at random: rollouts of one prompt differ."""
    from transformers import LogitsProcessor, LogitsProcessorList

    class FollowScript(LogitsProcessor):
        def __call__(self, input_ids, scores):
            for row in range(input_ids.shape[0]):
                # the end of the conversation: the task's prompt, then the turns and tool results so far
                text = tok.decode(input_ids[row, -TAIL:].tolist(), skip_special_tokens=True)
                for next_token in _script_next(text, scripts, tok):
                    scores[row, next_token] += 1e4
            return scores

    class ScriptedLlama(LlamaForCausalLM):
        def generate(self, *args, **kwargs):
            processors = LogitsProcessorList(kwargs.pop("logits_processor", None) or [])
            processors.append(FollowScript())
            return super().generate(*args, logits_processor=processors, **kwargs)

    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    return ScriptedLlama(config)


def _script_next(text: str, scripts: dict, tok) -> set:
    """The token ids the script allows next after `text` (a whole rendered conversation)."""
    variants = next((v for key, v in scripts.items() if key in text), None)
    head, found, generated = text.rpartition(ASSISTANT)
    if variants is None or not found:
        return {tok.eos_token_id}
    generated = generated.removeprefix(NO_THINKING)
    turn = head.count("<tool_response>")
    choices = set()
    for turns in variants:
        # the variant must have produced the earlier turns of this conversation
        if turn >= len(turns) or not all(earlier in head for earlier in turns[:turn]):
            continue
        target = turns[turn]
        if target.startswith(generated):
            rest = target[len(generated) :]
            choices.add(tok.convert_tokens_to_ids(rest[0]) if rest else tok.eos_token_id)
    return choices or {tok.eos_token_id}
