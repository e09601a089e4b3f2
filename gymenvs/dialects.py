"""Reading a model's turn in its own dialect: the tool calls of every model family TRL knows.

Models write tool calls in their family's own syntax: Qwen and Hermes `<tool_call>` blocks, Llama 3's
`{"name": ..., "parameters": ...}`, gpt-oss's harmony channels, Gemma 4's `<|tool_call>call:NAME{...}`,
GLM-4's XML arguments. A `TurnReader` reads a sampled turn with the tokenizer's response parser, the one
TRL's `add_response_schema` sets for the chat templates it ships (or the tokenizer's own), into an
assistant message: `{"role": "assistant", "content": ..., "tool_calls": [...], "reasoning_content": ...}`,
which every gymenvs env takes as an action. A tokenizer whose template has no known parser gets the
turn's text, which the env reads as it always has: `<tool_call>` blocks, a JSON call, or its own free
text. A turn the parser cannot read is text too, so the env answers it with an invalid-action observation.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gymenvs.core.actions import reasoning_of

#: How much of the prompt the parser sees before the turn: enough to hold the assistant header and what
#: the template pre-writes after it (an opening `<think>`); the parser cuts the rest away anyway, and a
#: whole agent prompt would be decoded again on every turn.
PREFIX_TOKENS = 64


class TurnReader:
    """Reads sampled turns of one tokenizer's model.

    Args:
        tokenizer: the model's tokenizer, with its chat template. It is not changed: the parser is set on a
            shallow copy.
    """

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.parser = response_parser(tokenizer)

    @property
    def knows_dialect(self) -> bool:
        """Whether turns are read by the family's parser (else they are handed to the env as text)."""
        return self.parser is not None

    def read(
        self, token_ids: Sequence[int], prompt_ids: Sequence[int], tools: Sequence[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The turn `token_ids`, sampled after `prompt_ids`, as an assistant message. `tools`: the schemas the model
        was shown; the parser types arguments by them (`"7"` is `7` for an integer parameter)."""
        if self.parser is None:
            return {"role": "assistant", "content": self.text(token_ids)}
        from trl.chat_template_utils import parse_response

        prefix = list(prompt_ids[-PREFIX_TOKENS:])
        return parse_response(self.parser, list(token_ids), prefix=prefix, tools=list(tools) if tools else None)

    def text(self, token_ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(token_ids), skip_special_tokens=True))


#: Response templates (transformers' `response_template` format) for chat templates TRL ships without one, by the
#: template's file name in trl/chat_templates.
OWN_RESPONSE_TEMPLATES: dict[str, dict[str, Any]] = {
    # DeepSeek V3: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>
    "deepseekv3": {
        "defaults": {"role": "assistant"},
        "start_anchor_pattern": r"<｜Assistant｜>|<｜tool▁outputs▁end｜>",  # a turn after tool results has no header
        "fields": {
            "reasoning_content": {"open": "<think>", "close_pattern": r"</think>\s*", "content": "text"},
            "tool_calls": {
                "open_pattern": (r"(?:<｜tool▁calls▁begin｜>)?\s*<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                                 r"(?P<name>[^\n]+)\n```json\n"),
                "close_pattern": r"\n```<｜tool▁call▁end｜>\s*(?:<｜tool▁calls▁end｜>)?\s*",
                "repeats": True,
                "content": "json",
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
            },
            "content": {"close_pattern": r"<｜end▁of▁sentence｜>\s*|$", "content": "text"},
        },
    },
}


def response_parser(tokenizer: Any) -> Any | None:
    """`tokenizer` itself when it carries a response parser, else a copy of it with the one TRL ships for its chat
    template (or one of `OWN_RESPONSE_TEMPLATES`), or None when none knows the template."""
    if getattr(tokenizer, "response_template", None) is not None:
        return tokenizer
    from trl.chat_template_utils import add_response_schema

    parser = copy.copy(tokenizer)
    try:
        add_response_schema(parser)
    except ValueError:  # a template TRL does not know
        own = own_response_template(tokenizer.chat_template)
        if own is None:
            return None
        parser.response_template = own
        parser.chat_template = with_mapping_arguments(tokenizer.chat_template)
    return parser


#: How DeepSeek V3's template writes a call's arguments: joined to text, which fails on a mapping (`TypeError`).
_ARGUMENTS_JOINED = "tool['function']['arguments']"


def with_mapping_arguments(chat_template: str) -> str:
    """`chat_template` writing a call's arguments given as a mapping as JSON (transformers' `tojson`: not sorted, not
    escaped, as `with_json_arguments` writes them), and arguments given as text as before. TRL's tool loop renders
    the calls it parsed with mapping arguments: the tokenizer `response_parser` returns renders them."""
    written = f"({_ARGUMENTS_JOINED} if {_ARGUMENTS_JOINED} is string else {_ARGUMENTS_JOINED} | tojson)"
    return chat_template.replace(_ARGUMENTS_JOINED, written)


def own_response_template(chat_template: Any) -> dict[str, Any] | None:
    import trl

    for name, response_template in OWN_RESPONSE_TEMPLATES.items():
        shipped = Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja"
        if shipped.is_file() and chat_template == shipped.read_text(encoding="utf-8"):
            return response_template
    return None


def action_of(message: dict[str, Any]) -> dict[str, Any] | str:
    """What an env is given for a model turn: the parsed message when it holds tool calls or reasoning, else its
    text, which the env reads as it reads any text (so a call the parser could not read is an invalid action
    that says why, not a message)."""
    return message if message.get("tool_calls") or reasoning_of(message) else str(message.get("content") or "")


def apply_chat_template(tokenizer: Any, messages: Sequence[dict[str, Any]], **options: Any) -> Any:
    """`tokenizer.apply_chat_template(messages, **options)`, the messages adapted to a stricter template where it
    refuses them: tool-call arguments as JSON text where it takes no mapping (DeepSeek V3's joins them to a string:
    `TypeError`), and one system message, first, where it takes no other (Qwen 3.5's and 3.6's: `TemplateError`)."""
    from jinja2 import TemplateError

    adaptations = {TypeError: with_json_arguments, TemplateError: with_one_system_message}
    messages = list(messages)
    while True:
        try:
            return tokenizer.apply_chat_template(messages, **options)
        except (TypeError, TemplateError) as error:
            kind = TypeError if isinstance(error, TypeError) else TemplateError
            adapt = adaptations.pop(kind, None)
            adapted = adapt(messages) if adapt is not None else messages
            if adapted == messages:
                raise
            messages = adapted


def with_one_system_message(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with one system message, first: the leading ones joined (a CLI sends its instructions and its
    developer notes as two), a later one (Claude Code's environment notes) given as what the user says there."""
    leading = 0
    while leading < len(messages) and messages[leading].get("role") == "system":
        leading += 1
    system = "\n\n".join(str(message.get("content") or "") for message in messages[:leading])
    head = [{"role": "system", "content": system}] if leading else []
    rest = [{**message, "role": "user"} if message.get("role") == "system" else message for message in messages[leading:]]
    return [*head, *rest]


def with_json_arguments(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with every tool call's arguments as JSON text, for the templates that take no mapping there
    (DeepSeek V3's concatenates them to a string)."""
    def call_as_json(call: dict[str, Any]) -> dict[str, Any]:
        function = call.get("function", call)
        arguments = function.get("arguments")
        text = arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False)
        return {**call, "function": {**function, "arguments": text}} if "function" in call else {**call, "arguments": text}

    return [{**message, "tool_calls": [call_as_json(call) for call in message["tool_calls"]]} if message.get("tool_calls")
            else message for message in messages]

