"""An episode as tokens: the prompt, then model turns and env replies appended one after another.

The prompt of turn k+1 is exactly the tokens of turn k plus the env's reply rendered with the
chat template: the transcript is never re-tokenised, so the tokens the trainer scores are the
tokens the model sampled. Env tokens carry `env_mask` 0 and logprob 0.0, as in TRL's own tool loop.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from gymenvs.core import ActionError, split_tool_calls
from gymenvs.core.actions import tool_names
from gymenvs.core.outcomes import OUTCOME_KEY, REASON_KEY, EndedBy, ended_by
from gymenvs.dialects import TurnReader, action_of, apply_chat_template

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from wrappers.trl.generation.base import Completion

EndReason = Literal["terminated", "truncated", "max_completion_length", "env_error"]


class ChatRenderer:
    """Renders the pieces a rollout appends, as token ids, with the tokenizer's chat template, and reads the
    model's turns in its family's dialect (`gymenvs.dialects.TurnReader`).

    Args:
        tokenizer: a tokenizer with a chat template whose end-of-turn token is its `eos_token`.
        tools: the env's tool schemas, shown to the model in the prompt (None: not shown).
        chat_template_kwargs: extra template variables (`enable_thinking`, say), as TRL's
            `GRPOConfig(chat_template_kwargs=...)` passes them.
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        tools: Sequence[dict] | None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ):
        if tokenizer.chat_template is None:
            raise ValueError("the tokenizer has no chat template; make_rollout_func renders conversations with it")
        self.tokenizer = tokenizer
        self.tools = list(tools) if tools else None
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.end_of_turn_id = tokenizer.eos_token_id
        self.chat_template = training_template(tokenizer)
        self.reader = TurnReader(tokenizer)

    def prompt_ids(self, messages: list[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> list[int]:
        """`messages` rendered ready for the assistant's turn, showing `tools` (default: the renderer's)."""
        return self._render(messages, add_generation_prompt=True, tools=list(tools) if tools else self.tools)

    def read(self, token_ids: Sequence[int], prompt_ids: Sequence[int]) -> dict[str, Any]:
        """A sampled turn as an assistant message (see `gymenvs.dialects.TurnReader`)."""
        return self.reader.read(token_ids, prompt_ids, self.tools)

    def reply_ids(self, text: str, model_message: dict[str, Any], stop_id: int) -> list[int]:
        """The tokens after the model's turn that carry the env's reply and open the next assistant turn. A
        reply to one tool call is a tool result; any other reply is a user message."""
        tool_name = called_tool(model_message)
        reply = {"role": "user", "content": text} if tool_name is None else {"role": "tool", "name": tool_name, "content": text}
        return self.continuation_ids([reply], model_message, stop_id)

    def continuation_ids(self, messages: list[dict[str, Any]], model_message: dict[str, Any], stop_id: int) -> list[int]:
        """The tokens after the model's turn `model_message`, which ended with `stop_id` (the token the model
        stopped on: `<|im_end|>`, `<|eot_id|>`, gpt-oss's `<|call|>`, Gemma 4's `<|tool_response>`, GLM's
        `<|observation|>`), that carry `messages` and open the next assistant turn.

        They are what the template writes after that stop token, for a stand-in turn that calls the same tools:
        the model's own tokens are never rendered again. Where the template writes the stop token itself as the
        opener of the next message (GLM-4), the sampled one stands for it."""
        names = called_tools(model_message)
        previous: dict[str, Any]
        if not names:
            previous = {"role": "assistant", "content": "x"}
        else:
            calls = [{"type": "function", "function": {"name": name, "arguments": {}}} for name in names]
            previous = {"role": "assistant", "content": "", "tool_calls": calls}
        head = [{"role": "user", "content": "x"}, previous]
        # Tool schemas only change the system block, which the slicing below drops: leave them out.
        prefix = self._render(head, add_generation_prompt=False, tools=None)
        full = self._render([*head, *messages], add_generation_prompt=True, tools=None)
        turn_start = len(os.path.commonprefix([self._stand_in_prompt, prefix]))
        if stop_id in prefix[turn_start:]:  # keep what a template writes after the stop token (a newline)
            prefix = prefix[: len(prefix) - prefix[::-1].index(stop_id)]
        if full[: len(prefix)] != prefix:
            raise ValueError("the chat template is not prefix-preserving: an env reply cannot be appended as tokens")
        continuation = full[len(prefix) :]
        return continuation[1:] if continuation[:1] == [stop_id] else continuation

    @functools.cached_property
    def _stand_in_prompt(self) -> list[int]:
        """The stand-in user message `continuation_ids` starts from, ready for the assistant's turn."""
        return self._render([{"role": "user", "content": "x"}], add_generation_prompt=True, tools=None)

    def _render(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool, tools: list[dict] | None = None
    ) -> list[int]:
        rendered: Any = apply_chat_template(
            self.tokenizer,
            messages,
            chat_template=self.chat_template,
            tools=list(tools) if tools is not None else None,
            add_generation_prompt=add_generation_prompt,
            tokenize=True,
            return_dict=True,
            **self.chat_template_kwargs,
        )
        return list(rendered["input_ids"])


def training_template(tokenizer: PreTrainedTokenizerBase) -> str | None:
    """TRL's training variant of the tokenizer's chat template when the template is not prefix-preserving (Qwen3
    drops earlier turns' reasoning when it renders a longer conversation), as TRL's own tool loop chooses; None
    (the tokenizer's own) otherwise, or when TRL has no variant for it."""
    from jinja2 import TemplateError
    from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

    try:
        if is_chat_template_prefix_preserving(tokenizer):
            return None
        return get_training_chat_template(tokenizer)
    except (TemplateError, ValueError, TypeError):
        return None


def called_tools(message: dict[str, Any]) -> list[str]:
    """The names of the tools a model turn calls: its parsed `tool_calls`, or, for a turn read as text (a
    template without a known parser), its well-formed `<tool_call>` blocks."""
    if message.get("tool_calls"):
        return tool_names(message)
    try:
        return [call.name for call in split_tool_calls(message.get("content") or "")[1]]
    except ActionError:
        return []


def called_tool(message: dict[str, Any]) -> str | None:
    """The tool a model turn calls, or None when it calls none or several (an env takes one call a turn)."""
    names = called_tools(message)
    return names[0] if len(names) == 1 else None


def first_message_with(prompt: list[dict[str, Any]] | str, observation: str) -> list[dict[str, Any]]:
    """The prompt with the env's first observation appended to its last message, as TRL does for
    `environment_factory` (separated by a blank line when that message has text)."""
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    if not prompt or not isinstance(prompt[-1], Mapping):
        return [{"role": "user", "content": observation}]
    last = dict(prompt[-1])
    content = last.get("content") or ""
    separator = "\n\n" if content and not content[-1].isspace() else ""
    if last.get("role") != "user":
        return [*prompt, {"role": "user", "content": observation}]
    last["content"] = content + separator + observation
    return [*prompt[:-1], last]


@dataclass
class Episode:
    """One episode of a rollout: its tokens for the trainer and its messages for people.

    `env_mask` is 1 on tokens the model sampled and 0 on tokens the env (or the template) wrote;
    `logprobs` holds the sampling policy's logprob of each sampled token and 0.0 elsewhere.
    """

    seed: int
    prompt_ids: list[int]
    messages: list[dict[str, Any]]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    reward: float = 0.0
    turns: int = 0
    end_reason: EndReason | None = None
    error: str | None = None
    env_name: str | None = None
    #: Who ended the episode (`gymenvs.core.outcomes`): only a `model` ending is a verdict on the model.
    outcome: str = EndedBy.MODEL
    outcome_reason: str | None = None
    #: Attempts of this episode's start that ended `infra` or `invalid`, and how many were replayed.
    infra_failures: int = 0
    retries: int = 0
    #: The info of the episode's last step (its grading report, for a container env).
    final_info: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.end_reason is not None

    def earlier_sequences(self) -> list[dict[str, list]]:
        """The sequences put aside before the current one: none here; an agent episode's, at its history rewrites."""
        return []

    def token_sequences(self) -> list[dict[str, list]]:
        """The episode's token sequences to train on, each with `prompt_ids`, `completion_ids`, `logprobs` and
        `env_mask`: one here; an agent episode whose agent rewrote its history has more."""
        return [{"prompt_ids": self.prompt_ids, "completion_ids": self.completion_ids, "logprobs": self.logprobs,
                 "env_mask": self.env_mask}]

    @property
    def trainable(self) -> bool:
        """Whether the episode's reward is a verdict on the model (its ending was the model's)."""
        return self.outcome == EndedBy.MODEL

    def record_ending(self, info: Mapping[str, Any], *, env_failed: bool = False) -> None:
        """Who ended the episode, from its last `info`. A failed slot or reset that does not say is `infra`."""
        self.final_info = dict(info)
        if env_failed and OUTCOME_KEY not in info:
            self.outcome, self.outcome_reason = EndedBy.INFRA, "env_error"
        else:
            self.outcome, self.outcome_reason = ended_by(dict(info)), info.get(REASON_KEY)

    @property
    def input_ids(self) -> list[int]:
        """What the model reads before its next turn."""
        return self.prompt_ids + self.completion_ids

    def add_model_turn(
        self, completion: Completion, renderer: ChatRenderer, max_completion_length: int
    ) -> dict[str, Any] | str | None:
        """Append a sampled turn; return the action for the env (see `action_of`), or None if the episode ended here."""
        message = renderer.read(completion.token_ids, self.input_ids)
        self._append(completion.token_ids, completion.logprobs, model=True)
        self.messages.append(message)
        if completion.finish_reason == "length":
            if len(self.completion_ids) >= max_completion_length:
                self.end("max_completion_length")
                return None
            # The turn hit its own cap: close it as the template would, with env-written tokens.
            self._append([renderer.end_of_turn_id], [0.0], model=False)
        return action_of(message)

    def add_env_turn(
        self,
        observation: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: Mapping[str, Any],
        renderer: ChatRenderer,
        max_completion_length: int,
    ) -> None:
        """Record the env's answer to the last model turn and append it as tokens if the episode goes on."""
        self.turns += 1
        if is_env_failure(truncated, info):
            self.reward = 0.0
            self.error = str(info["error"])
            self.record_ending(info, env_failed=True)
            self.end("env_error")
            return
        model_message = self.messages[-1]
        self.reward += float(reward)
        self.messages.append({"role": "tool" if called_tool(model_message) else "user", "content": observation})
        if terminated or truncated:
            self.record_ending(info)
            self.end("terminated" if terminated else "truncated")
            return
        reply = renderer.reply_ids(observation, model_message, self.completion_ids[-1])
        if len(self.completion_ids) + len(reply) >= max_completion_length:  # no room left for the model to answer
            self.end("max_completion_length")
            return
        self._append(reply, [0.0] * len(reply), model=False)

    def fail_at_start(self, error: str, renderer: ChatRenderer, info: Mapping[str, Any] | None = None) -> None:
        """End an episode whose env could not reset (`infra` unless its `info` says otherwise). Its completion is
        one end-of-turn token that the env wrote (`env_mask` 0, so nothing is trained on it): trainers expect a
        non-empty completion."""
        self._append([renderer.end_of_turn_id], [0.0], model=False)
        self.error = error
        self.record_ending(info or {}, env_failed=True)
        self.end("env_error")

    def end(self, reason: EndReason) -> None:
        self.end_reason = reason

    def _append(self, token_ids: Sequence[int], logprobs: Sequence[float], *, model: bool) -> None:
        self.completion_ids.extend(token_ids)
        self.logprobs.extend(logprobs)
        self.env_mask.extend([int(model)] * len(token_ids))


def is_env_failure(truncated: bool, info: Mapping[str, Any]) -> bool:
    """A slot that crashed or timed out: the vector env truncates it and records `info["error"]`.

    An invalid action also sets `info["error"]`, but the episode goes on (or ends at its turn
    limit, which the env marks with `truncated_reason`).
    """
    return bool(truncated) and info.get("error") is not None and info.get("truncated_reason") != "turn_limit"
