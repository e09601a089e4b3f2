"""A local transformers causal LM as a policy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gymenvs.dialects import TurnReader, action_of, apply_chat_template
from gymenvs.eval.policies.base import Action, Messages


class TransformersPolicy:
    """Generates each turn with a local causal LM (a path or a loaded model) and its chat template, and reads
    the reply in the model's own dialect (`gymenvs.dialects.TurnReader`): tool calls as an assistant message,
    else its text, which the env reads (a `<tool_call>` block, JSON or free text).

    Args:
        model: a model path / name for `AutoModelForCausalLM.from_pretrained`, or a loaded model.
        tokenizer: the tokenizer (default: loaded from `model` when it is a path).
        max_new_tokens: the longest turn.
        temperature: 0 decodes greedily.
    """

    name = "transformers"

    def __init__(self, model: Any, tokenizer: Any = None, *, max_new_tokens: int = 256, temperature: float = 0.0):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(model, str):
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(model)
            model = AutoModelForCausalLM.from_pretrained(model)
        if tokenizer is None:
            raise ValueError("tokenizer=None: a loaded model needs its tokenizer")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.reader = TurnReader(tokenizer)
        self.generation: dict[str, Any] = {"max_new_tokens": max_new_tokens, "do_sample": temperature > 0}
        if temperature > 0:
            self.generation["temperature"] = temperature

    def new_episode(self) -> TransformersPolicy:
        return self

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action:
        import torch

        inputs = apply_chat_template(
            self.tokenizer, messages, tools=list(tools) or None, add_generation_prompt=True, return_tensors="pt",
            return_dict=True,
        )
        with torch.no_grad():
            output = self.model.generate(**inputs, **self.generation, pad_token_id=self.tokenizer.pad_token_id)
        prompt_ids = inputs["input_ids"][0].tolist()
        return action_of(self.reader.read(output[0, len(prompt_ids) :].tolist(), prompt_ids, tools))
