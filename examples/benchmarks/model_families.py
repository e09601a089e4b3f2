"""Every model family whose chat template TRL ships, through `make_rollout_func`: are its tool calls read, and is
the sequence trained what the model saw?

    python examples/benchmarks/model_families.py [--families qwen2_5 llama3_1 ...] [--repeats 200]

For each family a tiny tokenizer carries the family's real template (wrappers/trl/extras/tiny_families.py) and a
tiny random model plays a 3-turn Wordle episode whose turns are tool calls written as the template writes them.
Prints per family:
- `parser`: whose response parser reads its turns (`trl`: TRL's `add_response_schema`; `own`: gymenvs'
  `OWN_RESPONSE_TEMPLATES`; `no`: none, the turn's text goes to the env);
- `prefix`: whether the template is prefix-preserving, and the template the rollout renders with (`own`, or TRL's
  `training` variant where it is not);
- `read`: the share of the model's tool calls read as tool calls (the call and its arguments, not free text);
- `text reader`: the same share with the reader gymenvs had before it read dialects (the turn's text, decoded
  without special tokens, read by `parse_action` as a `<tool_call>` block or a JSON call), on the same turns;
- `gap`: the largest difference between a sampled token's recorded logprob and one forward pass over the final
  sequence (fp32); `mask`: whether `env_mask` is 1 exactly on the sampled tokens;
- `parse µs`: the median cost of reading one turn with the family's parser, and with the text reader.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import timeit
import warnings
from typing import Any

GUESSES = ["crane", "slate", "pious"]


def median_us(function, repeats: int) -> float:
    return statistics.median(timeit.repeat(function, number=1, repeat=repeats)) * 1e6


def measure(family: str, repeats: int) -> str:
    import torch
    from trl.chat_template_utils import (
        add_response_schema,
        get_training_chat_template,
        is_chat_template_prefix_preserving,
        supports_tool_calling,
    )

    from gymenvs.core import ActionError, parse_action
    from gymenvs.dialects import TurnReader
    from wrappers.trl import make_rollout_func
    from wrappers.trl.extras.tiny_families import ScriptedTurns, family_model, family_tokenizer, tool_call_turns

    try:
        tokenizer = family_tokenizer(family)
    except ValueError:
        return f"{family:24} no stop marker known: not a tool-calling template"
    if not supports_tool_calling(tokenizer):
        return f"{family:24} the template renders no tool calls"
    try:
        add_response_schema(copy.copy(tokenizer))
        parser = "trl"
    except ValueError:
        parser = "own" if TurnReader(tokenizer).knows_dialect else "no"
    preserving = is_chat_template_prefix_preserving(tokenizer)
    template = None if preserving else get_training_chat_template(tokenizer)
    model = family_model(tokenizer)
    turns = tool_call_turns(tokenizer, "guess", "word", GUESSES, template)
    generator = ScriptedTurns(model, turns)
    rollout = make_rollout_func("gymenvs/Wordle-v0", env_kwargs={"max_turns": len(GUESSES)}, show_tools=True)
    try:
        (episode,) = rollout.run(["Play."], generator, tokenizer, seeds=[0], max_completion_length=4000)
    finally:
        rollout.close()
    said = [message for message in episode.messages if message["role"] == "assistant"]
    read = sum(message.get("tool_calls", [{}])[0].get("function") == {"name": "guess", "arguments": {"word": word}}
               for message, word in zip(said, GUESSES))

    prompt = episode.prompt_ids

    def no_free_text(text: str) -> Any:
        raise ActionError("not a tool call")

    def text_reader(turn: list[int], word: str = GUESSES[0]) -> bool:
        try:
            call = parse_action(tokenizer.decode(turn, skip_special_tokens=True), no_free_text)
        except ActionError:
            return False
        return call.name == "guess" and call.arguments == {"word": word}

    before = sum(text_reader(turn, word) for turn, word in zip(turns, GUESSES))
    reader = TurnReader(tokenizer)
    parse_us = median_us(lambda: reader.read(turns[0], prompt), repeats)
    text_us = median_us(lambda: text_reader(turns[0]), repeats)

    ids = torch.tensor([episode.prompt_ids + episode.completion_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(episode.prompt_ids) - 1 : -1].float()
    forward = logits.log_softmax(-1).gather(-1, torch.tensor(episode.completion_ids)[:, None]).squeeze(-1).tolist()
    gap = max(abs(lp - forward[i]) for i, (lp, m) in enumerate(zip(episode.logprobs, episode.env_mask)) if m)
    sampled = [token for token, mask in zip(episode.completion_ids, episode.env_mask) if mask]
    mask_exact = sampled == [token for turn in generator.sampled for token in turn]
    rule = "own" if preserving else ("training" if template else "own (no variant)")
    return (f"{family:24} parser {parser:3}  prefix {str(preserving):5} {rule:9} read {read}/{len(GUESSES)}  "
            f"text reader {before}/{len(GUESSES)}  gap {gap:.1e}  mask {'exact' if mask_exact else 'WRONG'}  "
            f"parse µs {parse_us:7.1f} vs {text_us:6.1f}")


def main() -> None:
    from wrappers.trl.extras.tiny_families import text_templates

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="*", default=None, help="template names (default: every text template)")
    parser.add_argument("--repeats", type=int, default=200, help="timed reads per family")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()
    for family in args.families or text_templates():
        try:
            line = measure(family, args.repeats)
        except Exception as exc:  # a template that breaks on the way is a row that says how
            line = f"{family:24} fails: {type(exc).__name__}: {exc}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
