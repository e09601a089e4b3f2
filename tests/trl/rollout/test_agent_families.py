"""Agent CLIs trained through every model family's template: `make_rollout_func` on SWEAgent-v0, the policy's side
rendered and read with the family's real template (tiny tokenizers built offline, wrappers/trl/extras/tiny_families.py),
real containers, the tiny model on CPU. Each family meets one of the four CLIs, so each CLI's wire format carries
several families.

The model's turns are written in the family's dialect: two parallel calls of the agent's own shell tool (one, for
the families whose template writes one call per turn) after a thought (for those whose template writes one), then
a plain reply, which ends the CLI's run. Each must reach
the agent as what it is (both commands run: their markers come back in the tool results; the thought is read as
reasoning, not text), and the episode must be token-exact: logprobs equal to one forward pass over the sequence,
`env_mask` 1 exactly on the sampled tokens, and the tool results the agent inserted rendered as the family's
template renders them.
"""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Any

import pytest
from container.agent.cli_support import CLIS, FIXTURES

from tests.trl.bridge_support import env_runs, teacher_forced_logprobs
from tests.trl.families_support import PARSED_FAMILIES

pytestmark = [pytest.mark.docker, pytest.mark.slow]

AGENTS = ("claude-code", "codex", "opencode", "pi")
CASES = {family: AGENTS[i % len(AGENTS)] for i, family in enumerate(PARSED_FAMILIES)}
#: Each prints a marker its text does not hold. No parentheses: TRL's LFM2 parser ends a call at the first `)`, even
#: in a quoted string (docs/model-families.md).
COMMANDS = ("printf marker-%d 6", "printf marker-%d 12")
MARKERS = ("marker-6", "marker-12")
THOUGHT = "Two markers at once."


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


def scripted_turns(tokenizer: Any, agent: str, template: str | None, key: str | None) -> tuple[list[list[int]], int, bool]:
    """The call turn and the closing reply; how many calls the call turn makes (two, or one where the family's
    template writes one call per turn: Llama 3's and gpt-oss's), and whether it holds the thought (its template
    writes it)."""
    from jinja2 import TemplateError

    from wrappers.trl.extras.tiny_families import model_turn_text

    cli = CLIS[agent]
    for commands in (COMMANDS, COMMANDS[:1]):
        calls = [{"type": "function", "function": cli.shell(command)} for command in commands]
        call_turn: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": calls}
        if key:
            call_turn[key] = THOUGHT
        results = [{"role": "tool", "name": cli.shell_tool, "content": "ok"} for _ in calls]
        try:
            call_text = model_turn_text(tokenizer, call_turn, commands[-1].split()[-1], results, template)
            break
        except (TemplateError, ValueError):  # the template refuses several calls, or leaves all but one out
            continue
    reply = {"role": "assistant", "content": "All done."}
    texts = [call_text, model_turn_text(tokenizer, reply, "All done.", [{"role": "user", "content": "Next."}], template)]
    return [tokenizer.encode(text, add_special_tokens=False) for text in texts], len(commands), THOUGHT in call_text


def scripted(family: str) -> Played:
    """The family's tokenizer, model and scripted turns (built here, before any thread: transformers' lazy imports
    are not safe to race)."""
    from gymenvs.dialects import apply_chat_template
    from wrappers.trl.extras.tiny_families import family_model, family_tokenizer
    from wrappers.trl.rollout.transcript import training_template

    tokenizer = family_tokenizer(family)
    key = reasoning_key(tokenizer)
    if key and "</think>" in apply_chat_template(tokenizer, [{"role": "user", "content": "Play."}], tokenize=False,
                                                 add_generation_prompt=True)[-20:]:
        key = None  # the prompt closes the thought before the model's turn (Qwen 3.5 without thinking)
    turns, calls, thought_written = scripted_turns(tokenizer, CASES[family], training_template(tokenizer), key)
    return Played(tokenizer, family_model(tokenizer), turns, calls, None, key if thought_written else None)


def play(family: str, case: Played) -> Played:
    from wrappers.trl import make_rollout_func
    from wrappers.trl.extras.tiny_families import ScriptedTurns

    generator = ScriptedTurns(case.model, case.sampled)
    rollout = make_rollout_func("gymenvs/SWEAgent-v0", env_kwargs={
        "agent": CASES[family], "instance_ids": [FIXTURES[0]], "max_turns": 3, "call_timeout_s": 120.0})
    try:
        (case.episode,) = rollout.run([""], generator, case.tokenizer, seeds=[0], max_completion_length=8000)
    except Exception as error:  # noqa: BLE001  (the family's tests raise it; the other families' go on)
        case.error = error
    finally:
        rollout.close()
    return case


@pytest.fixture(scope="module")
def played(swe_images) -> dict[str, Played]:
    """Every family's episode, four at a time (most of an episode is waiting on its container)."""
    cases = [scripted(family) for family in PARSED_FAMILIES]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return dict(zip(PARSED_FAMILIES, pool.map(play, PARSED_FAMILIES, cases)))


@pytest.mark.parametrize("family", PARSED_FAMILIES, ids=[f"{family} through {CASES[family]}" for family in PARSED_FAMILIES])
def test_the_calls_reach_the_agent_and_its_results_come_back(played, family):
    case = played[family]
    episode = case.result()
    assert episode.turns == 2 and episode.end_reason == "terminated" and episode.history_rewrites == 0, episode.error
    env_text = case.tokenizer.decode([t for t, m in zip(episode.completion_ids, episode.env_mask) if not m])
    assert all(marker in env_text for marker in MARKERS[: case.calls])
    (said,) = [message for message in episode.messages if message["role"] == "assistant" and message.get("tool_calls")]
    assert len(said["tool_calls"]) == case.calls
    if case.reasoning_key:
        assert said[case.reasoning_key].strip() == THOUGHT


@pytest.mark.parametrize("family", PARSED_FAMILIES, ids=[f"{family} through {CASES[family]}" for family in PARSED_FAMILIES])
def test_the_episode_is_token_exact_in_the_familys_template(played, family):
    from gymenvs.dialects import apply_chat_template
    from wrappers.trl.rollout.transcript import training_template

    case = played[family]
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
