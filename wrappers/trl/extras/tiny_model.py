"""A tiny Qwen2 model and tokenizer built entirely offline, for tests, examples and CPU demos.

No model can be downloaded here, so the tokenizer is a byte-level BPE trained in-process with
`tokenizers` on a small built-in corpus, and the model is a randomly initialised `Qwen2ForCausalLM`.
The chat template is the Qwen2.5 template that ships inside the trl wheel: TRL recognises it
(`add_response_schema`) and can therefore parse the model's `<tool_call>` blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gymenvs.core.actions import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, render_tool_call

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast, Qwen2ForCausalLM

#: The training arguments every CPU run here shares (examples, benchmarks, tests): no GPU, no bf16, no
#: checkpoints, no loggers, no progress bars. `GRPOConfig(output_dir=..., **CPU_TRAINING_ARGS, ...)`.
CPU_TRAINING_ARGS: dict[str, Any] = {
    "bf16": False, "use_cpu": True, "report_to": "none", "save_strategy": "no", "disable_tqdm": True,
}

EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
SPECIAL_TOKENS = (PAD_TOKEN, "<|im_start|>", EOS_TOKEN)
# Qwen2.5 keeps these as ordinary added tokens (not special), so decoding keeps them in the text.
MARKUP_TOKENS = (TOOL_CALL_OPEN, TOOL_CALL_CLOSE, "<tool_response>", "</tool_response>", "<think>", "</think>")

_CORPUS_WORDS = (
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant. "
    "# Tools You may call one or more functions to assist with the user query. "
    "You are provided with function signatures within <tools></tools> XML tags: "
    "For each function call, return a json object with function name and arguments within XML tags: "
    '{"type": "function", "function": {"name": "guess", "description": "Guess the hidden word.", '
    '"parameters": {"type": "object", "properties": {"word": {"type": "string", "description": "A word"}}, '
    '"required": ["word"]}}} {"name": "move", "arguments": {"direction": "left"}} '
    "user assistant system tool echo message text move left stay right ball paddle row column grid catch "
    "guess word letter letters hidden five tries marked right place in the elsewhere not caught missed "
    "answer question solve number digit true false yes no invalid action error episode turn limit reached "
    "the a an and or of to is it this that with for on at by from as be was are were will can "
    "0 1 2 3 4 5 6 7 8 9 10 A B C D E F G H I J K L M N O P Q R S T U V W X Y Z "
    "a b c d e f g h i j k l m n o p q r s t u v w x y z . , : ; ! ? ( ) [ ] { } = - + * / _ \" ' \n"
)


@cache
def chat_template() -> str:
    """The Qwen2.5 chat template vendored in the installed trl wheel."""
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text(encoding="utf-8")


def tiny_tokenizer(vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained in-process, with Qwen2.5's special tokens and chat template.

    Every byte is in the vocabulary, so any text (any env observation) round-trips.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
    )
    bpe.train_from_iterator([_CORPUS_WORDS] * 4, trainer)
    bpe.add_tokens([AddedToken(token, special=False, normalized=False) for token in MARKUP_TOKENS])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN)
    tokenizer.chat_template = chat_template()
    return tokenizer


def tiny_model(
    *,
    seed: int = 0,
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 64,
    max_position_embeddings: int = 4096,
    vocab_size: int = 512,
) -> tuple[Qwen2ForCausalLM, PreTrainedTokenizerFast]:
    """A randomly initialised fp32 Qwen2 causal LM (seeded) and its tokenizer, built without any download."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = tiny_tokenizer(vocab_size)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model, tokenizer


def imitate(
    model: Qwen2ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    prompts: Sequence[Sequence[int]],
    completions: Sequence[str],
    *,
    steps: int = 100,
    learning_rate: float = 1e-2,
    seed: int = 0,
    paired: bool = False,
) -> Qwen2ForCausalLM:
    """Teach a tiny model, by supervised steps, to answer each prompt (token ids) with the completions (every
    completion, or with `paired` the completion at the prompt's index only).

    A random model almost never writes a well-formed tool call, so tests and benchmarks that need
    tool calls (TRL's tool loop only goes on while the model calls tools) start from a model that
    has seen a few. Each completion is one assistant turn; the end-of-turn token is appended and
    the loss covers the completion tokens only. The model is returned in eval mode.
    """
    import torch

    batch = _imitation_batch(tokenizer, prompts, completions, paired)
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in range(steps):
            loss = model(**batch).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    return model


def _imitation_batch(
    tokenizer: PreTrainedTokenizerFast, prompts: Sequence[Sequence[int]], completions: Sequence[str], paired: bool = False
) -> dict[str, Any]:
    """Every prompt followed by every completion (or by its own, `paired`) and the end-of-turn token, right-padded;
    the labels cover the completion tokens only."""
    import torch

    if paired and len(prompts) != len(completions):
        raise ValueError(f"paired=True needs one completion per prompt, got {len(completions)} for {len(prompts)} prompts")
    matches = zip(prompts, completions) if paired else ((prompt, text) for prompt in prompts for text in completions)
    pairs = [
        (list(prompt), tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
        for prompt, text in matches
    ]
    width = max(len(prompt) + len(answer) for prompt, answer in pairs)
    input_ids = torch.full((len(pairs), width), tokenizer.pad_token_id)
    labels = torch.full((len(pairs), width), -100)
    attention_mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for row, (prompt, answer) in enumerate(pairs):
        end = len(prompt) + len(answer)
        input_ids[row, :end] = torch.tensor(prompt + answer)
        labels[row, len(prompt) : end] = torch.tensor(answer)
        attention_mask[row, :end] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def tool_call_text(name: str, arguments: Mapping[str, Any] | None = None) -> str:
    """A tool call as the Qwen2.5 chat template (and so TRL's parser) writes it: `gymenvs.core.render_tool_call`."""
    return render_tool_call(name, arguments)


def teach_tool_calls(
    model: Qwen2ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    conversations: Sequence[list[dict[str, Any]]],
    calls: Sequence[str],
    *,
    tools: Sequence[dict | Callable] | None = None,
    steps: int = 100,
    learning_rate: float = 1e-2,
    seed: int = 0,
    paired: bool = False,
) -> Qwen2ForCausalLM:
    """Teach a tiny model to answer each conversation with a tool call, by supervised steps.

    A random model almost never writes a well-formed `<tool_call>` block, so TRL's tool loop would
    never run a tool (`tools/call_frequency` 0). Each conversation is rendered as the trainer
    renders it (with `tools`: JSON schemas, or the methods of an `environment_factory` class, as
    TRL passes them) and paired with every text in `calls` (see `tool_call_text`): give several
    calls per conversation to teach the format but leave the choice to reinforcement learning.
    With `paired`, each conversation is paired with the call at its index only (repeat a conversation to
    give it several calls, in the proportions it should learn).
    """
    render: Any = tokenizer.apply_chat_template  # typed as returning text or ids; with return_dict, a mapping
    prompts = [
        render(
            list(conversation),
            tools=list(tools) if tools else None,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
        )["input_ids"]
        for conversation in conversations
    ]
    return imitate(model, tokenizer, prompts, calls, steps=steps, learning_rate=learning_rate, seed=seed, paired=paired)
