"""The agent rollout's family matrix, shared by its two lanes: the model's scripted turns in each family's dialect
(two parallel calls of the agent's shell tool after a thought, then a plain reply, which ends the agent's run) and
the checks on the episode. tests/trl/rollout/test_agent_families.py plays them through the real CLIs in containers;
tests/trl/rollout/test_host_agent_families.py through the wire test agent on the host, in the quick lane."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.trl.bridge_support import env_runs, teacher_forced_logprobs

#: Each prints a marker its text does not hold. No parentheses: TRL's LFM2 parser ends a call at the first `)`, even
#: in a quoted string (docs/model-families.md).
COMMANDS = ("printf marker-%d 6", "printf marker-%d 12")
MARKERS = ("marker-6", "marker-12")
THOUGHT = "Two markers at once."

#: A call of the agent's shell tool running `command`, as the model writes it: {"name": ..., "arguments": {...}}.
Shell = Callable[[str], dict]


@dataclass
class Played:
    tokenizer: Any
    model: Any
    sampled: list[list[int]]  # the turns the model is scripted to sample
    calls: int  # how many calls its call turn makes
    episode: Any
    reasoning_key: str | None  # where the family's parser puts a thought, when its template writes one
    error: Exception | None = None  # what the rollout raised

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.episode


def reasoning_key(tokenizer: Any) -> str | None:
    from gymenvs.core.actions import REASONING_KEYS
    from gymenvs.dialects import TurnReader

    fields = TurnReader(tokenizer).parser.response_template["fields"]
    return next((key for key in REASONING_KEYS if key in fields), None)


def scripted_turns(tokenizer: Any, shell: Shell, template: str | None, key: str | None) -> tuple[list[list[int]], int, bool]:
    """The call turn and the closing reply; how many calls the call turn makes (two, or one where the family's
    template writes one call per turn: Llama 3's and gpt-oss's), and whether it holds the thought (its template
    writes it)."""
    from jinja2 import TemplateError

    from wrappers.trl.extras.tiny_families import model_turn_text

    for commands in (COMMANDS, COMMANDS[:1]):
        calls = [{"type": "function", "function": shell(command)} for command in commands]
        call_turn: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": calls}
        if key:
            call_turn[key] = THOUGHT
        results = [{"role": "tool", "name": calls[0]["function"]["name"], "content": "ok"} for _ in calls]
        try:
            call_text = model_turn_text(tokenizer, call_turn, commands[-1].split()[-1], results, template)
            break
        except (TemplateError, ValueError):  # the template refuses several calls, or leaves all but one out
            continue
    reply = {"role": "assistant", "content": "All done."}
    texts = [call_text, model_turn_text(tokenizer, reply, "All done.", [{"role": "user", "content": "Next."}], template)]
    return [tokenizer.encode(text, add_special_tokens=False) for text in texts], len(commands), THOUGHT in call_text


def scripted(family: str, shell: Shell) -> Played:
    """The family's tokenizer, model and scripted turns (built before any thread: transformers' lazy imports are
    not safe to race)."""
    from gymenvs.dialects import apply_chat_template
    from wrappers.trl.extras.tiny_families import family_model, family_tokenizer
    from wrappers.trl.rollout.transcript import training_template

    tokenizer = family_tokenizer(family)
    key = reasoning_key(tokenizer)
    if key and "</think>" in apply_chat_template(tokenizer, [{"role": "user", "content": "Play."}], tokenize=False,
                                                 add_generation_prompt=True)[-20:]:
        key = None  # the prompt closes the thought before the model's turn (Qwen 3.5 without thinking)
    turns, calls, thought_written = scripted_turns(tokenizer, shell, training_template(tokenizer), key)
    return Played(tokenizer, family_model(tokenizer), turns, calls, None, key if thought_written else None)


def play(case: Played, env_id: str, env_kwargs: dict[str, Any]) -> Played:
    """`case` played once through `make_rollout_func` on the agent env `env_id`; what the rollout raised is kept."""
    from wrappers.trl import make_rollout_func
    from wrappers.trl.extras.tiny_families import ScriptedTurns

    rollout = make_rollout_func(env_id, env_kwargs=env_kwargs)
    try:
        (case.episode,) = rollout.run([""], ScriptedTurns(case.model, case.sampled), case.tokenizer, seeds=[0],
                                      max_completion_length=8000)
    except Exception as error:  # noqa: BLE001  (the family's tests raise it; the other families' go on)
        case.error = error
    finally:
        rollout.close()
    return case


def check_the_calls_reached_the_agent(case: Played) -> None:
    """Both commands ran (their markers came back in the tool results), the thought was read as reasoning."""
    episode = case.result()
    assert episode.turns == 2 and episode.end_reason == "terminated" and episode.history_rewrites == 0, episode.error
    env_text = case.tokenizer.decode([t for t, m in zip(episode.completion_ids, episode.env_mask) if not m])
    assert all(marker in env_text for marker in MARKERS[: case.calls])
    (said,) = [message for message in episode.messages if message["role"] == "assistant" and message.get("tool_calls")]
    assert len(said["tool_calls"]) == case.calls
    if case.reasoning_key:
        assert said[case.reasoning_key].strip() == THOUGHT


def check_token_exact(case: Played) -> None:
    """Logprobs equal one forward pass, `env_mask` is 1 exactly on the sampled tokens, and the tool results the agent
    inserted are what the family's template renders for them."""
    from gymenvs.dialects import apply_chat_template
    from wrappers.trl.rollout.transcript import training_template

    episode, tokenizer = case.result(), case.tokenizer
    sampled = [t for t, m in zip(episode.completion_ids, episode.env_mask) if m]
    assert sampled == [t for turn in case.sampled for t in turn]
    forward = teacher_forced_logprobs(case.model, episode.prompt_ids, episode.completion_ids).tolist()
    assert max(abs(lp - forward[i]) for i, (lp, m) in enumerate(zip(episode.logprobs, episode.env_mask)) if m) < 1e-4
    (run,) = env_runs(episode)
    model_turns = [i for i, message in enumerate(episode.messages) if message["role"] == "assistant"]
    # the messages after the first model turn, up to the next: the tool results the agent inserted
    results = episode.messages[: model_turns[-1]]
    assert [message["role"] for message in results[model_turns[-2] + 1 :]] == ["tool"] * case.calls
    rendered = apply_chat_template(tokenizer, results, add_generation_prompt=True, tokenize=False,
                                   chat_template=training_template(tokenizer))
    assert rendered.endswith(tokenizer.decode(run))
