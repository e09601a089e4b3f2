"""Generators that force the first turns of an agent episode: real token ids of a call of the agent's own shell
tool, scored by the real model as if sampled (a random model almost never writes a tool call, and an agent ends its
run at the first reply without one). Imported as `tests.trl.rollout.forcing_support` (tests/trl is no package)."""

from __future__ import annotations

import json

from container.agent.cli_support import CLIS

from tests.trl.bridge_support import teacher_forced_logprobs

TEMPERATURE = 0.8
FORCED_TURNS = 2


class ForcingGenerator:
    """A generator that answers a prompt holding k < len(texts) assistant turns with texts[k] (its token ids
    and the model's logprobs of them at the sampling temperature), and the others with the inner
    generator's samples. Keeps every completion it returned."""

    def __init__(self, inner, model, tokenizer, texts: list[str], temperature: float):
        self.inner, self.model, self.tokenizer, self.temperature = inner, model, tokenizer, temperature
        self.forced = [tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id] for text in texts]
        self.sampled: list[list[int]] = []

    def generate(self, prompts, max_tokens):
        turns = [self.tokenizer.decode(prompt).count("<|im_start|>assistant") - 1 for prompt in prompts]
        free = [i for i, turn in enumerate(turns) if turn >= len(self.forced)]
        sampled = iter(self.inner.generate([prompts[i] for i in free], [max_tokens[i] for i in free]) if free else [])
        completions = [next(sampled) if turn >= len(self.forced) else self._scored(prompt, self._forced_for(turn))
                       for prompt, turn in zip(prompts, turns)]
        self.sampled.extend(completion.token_ids for completion in completions)
        return completions

    def _forced_for(self, turn: int) -> list[int]:
        return self.forced[turn]

    def _scored(self, prompt, token_ids):
        from wrappers.trl.generation.base import Completion

        logprobs = teacher_forced_logprobs(self.model, prompt, token_ids, temperature=self.temperature)
        return Completion(list(token_ids), logprobs.tolist(), "stop")


class FirstSolvesGenerator(ForcingGenerator):
    """A ForcingGenerator whose first forced turn is, for the first episode that asks for it, the gold patch
    applied through the agent's own shell: that episode resolves its task, the others do not."""

    def __init__(self, *args, gold_text: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.gold: list[int] | None = self.tokenizer.encode(gold_text, add_special_tokens=False) + [self.tokenizer.eos_token_id]

    def _forced_for(self, turn: int) -> list[int]:
        if turn == 0 and self.gold is not None:
            gold, self.gold = self.gold, None
            return gold
        return super()._forced_for(turn)


def shell_texts(agent: str, forced_turns: int) -> list[str]:
    """The forced turns: calls of the agent's own shell tool, each printing a marker only its output holds."""
    calls = [CLIS[agent].shell(f"echo marker-$((6 * {turn}))") for turn in range(1, 1 + forced_turns)]
    return [f"<tool_call>{json.dumps(call)}</tool_call>" for call in calls]


def forcing_generator(model, tokenizer, agent: str, temperature: float = TEMPERATURE, inner=None,
                      forced_turns: int = FORCED_TURNS) -> ForcingGenerator:
    from wrappers.trl import Sampling, TransformersGenerator

    inner = inner or TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=temperature))
    return ForcingGenerator(inner, model, tokenizer, shell_texts(agent, forced_turns), temperature)
