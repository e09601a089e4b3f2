"""A tour of gymenvs: every environment made with `gymnasium.make` and played by a scripted agent,
then many episodes at once in a `ConcurrentVectorEnv`. An agent sees the env and its first observation.

The agent uses the three action forms an LLM may produce (a tool-call mapping, the same as JSON
text, plain text) and one invalid action, to show that a bad action is an observation, not a crash.
The SWE env runs on its embedded fixture tasks (it needs a Docker engine and the images from
`gymenvs swe build-images`, which `.ci/setup` builds); the agent applies the task's gold patch
through the `bash` tool and submits, and the host-side grader runs the task's tests.
Run:  python examples/demo.py
"""

from __future__ import annotations

import json
import re
import time

import gymnasium as gym
import numpy as np

import gymenvs


def wordle_agent(env, observation):
    secret = env.unwrapped.state()["secret"]  # a scripted agent may peek; an LLM may not
    yield "my guess is crane"  # invalid: free text must be one word or [bracketed]
    yield {"name": "guess", "arguments": {"word": "slate" if secret != "slate" else "crane"}}
    yield f"[{secret}]"


def sudoku_agent(env, observation):
    while True:
        state = env.unwrapped.state()
        r, c = next((r, c) for r in range(9) for c in range(9) if not state["board"][r][c])
        yield json.dumps({"name": "place", "arguments": {"row": r + 1, "col": c + 1, "digit": state["solution"][r][c]}})


def catch_agent(env, observation):
    yield "jump"
    while True:
        state = env.unwrapped.state()
        gap = state["ball"][1] - state["paddle"]
        yield {"name": "move", "arguments": {"direction": "right" if gap > 0 else "left" if gap < 0 else "stay"}}


def echo_agent(env, observation):
    while True:
        yield "hello, gymenvs"


def reasoning_agent(env, observation):
    yield "<answer>42</answer>"


def hanoi_agent(env, observation):
    yield "[B C]"  # invalid: tower B is empty, and the game says so (a second invalid move would lose)
    for source, target in [("A", "C"), ("A", "B"), ("C", "B"), ("A", "C"), ("B", "A"), ("B", "C"), ("A", "C")]:
        yield {"name": "move_disk", "arguments": {"source": source, "target": target}}


def miniwob_agent(env, observation):
    label = re.search(r'Click on the "(.*)" button', observation).group(1)
    yield {"name": "click", "arguments": {"element": 9999}}  # invalid: no such element
    element = next(int(m.group(1)) for m in re.finditer(r"^\[(\d+)\] button.* '(.*)'$", observation, re.M) if m.group(2) == label)
    yield {"name": "click", "arguments": {"element": element}}


def swe_inside_agent(env, observation):
    """SWEAgent-v0: the reference agent runs in the container; each of its LLM calls is this step's observation."""
    gold_patch = env.unwrapped.task.patch  # a scripted policy may peek; an LLM may not
    yield {"name": "bash", "arguments": {"command": "git status --short && ls"}}
    yield {"name": "bash", "arguments": {"command": f"git apply <<'PATCH'\n{gold_patch}PATCH\ngit diff --stat"}}
    yield {"name": "submit", "arguments": {}}


def swe_agent(env, observation):
    gold_patch = env.unwrapped.task.patch  # a scripted agent may peek; an LLM may not
    yield {"name": "submit_patch", "arguments": {}}  # invalid: no such tool
    yield "git status --short && ls"
    yield {"name": "bash", "arguments": {"command": f"git apply <<'PATCH'\n{gold_patch}PATCH\ngit diff --stat"}}
    yield {"name": "submit", "arguments": {}}


def terminal_agent(env, observation):
    """Terminal-v0 and TerminalAgent-v0: a Harbor task; the scripted policy runs its oracle, solution/solve.sh."""
    oracle = (env.unwrapped.task.solution_dir / "solve.sh").read_text()  # a scripted policy may peek; an LLM may not
    yield {"name": "bash", "arguments": {"command": "pwd && ls"}}
    yield {"name": "bash", "arguments": {"command": oracle}}
    yield {"name": "submit", "arguments": {}}


AGENTS = {
    "gymenvs/Echo-v0": ({"max_turns": 2}, echo_agent),
    "gymenvs/ReasoningGym-v0": ({"dataset": "basic_arithmetic"}, reasoning_agent),
    "gymenvs/Wordle-v0": ({}, wordle_agent),
    "gymenvs/Sudoku-v0": ({}, sudoku_agent),
    "gymenvs/Catch-v0": ({}, catch_agent),
    "gymenvs/TextArena-v0": ({"game": "TowerOfHanoi-v0"}, hanoi_agent),
    "gymenvs/MiniWoB-v0": ({"task": "click-button"}, miniwob_agent),
    "gymenvs/SWE-v0": ({"dataset": "fixtures"}, swe_agent),
    "gymenvs/SWEAgent-v0": ({"dataset": "fixtures", "agent": "reference"}, swe_inside_agent),
    "gymenvs/Terminal-v0": ({"instance_ids": ["gymenvs/edit-config"]}, terminal_agent),
    "gymenvs/TerminalAgent-v0": ({"instance_ids": ["gymenvs/edit-config"], "agent": "reference"}, terminal_agent),
}


def play(env_id: str, kwargs: dict, agent, verbose_steps: int = 3) -> None:
    env = gym.make(env_id, **kwargs)
    observation, info = env.reset(seed=0)
    tools = ", ".join(schema["function"]["name"] for schema in info["tools"])
    print(f"=== {env_id}  (tools: {tools})\n{observation.strip()}\n")
    total, steps = 0.0, 0
    for action in agent(env, observation):
        observation, reward, terminated, truncated, info = env.step(action)
        total, steps = total + reward, steps + 1
        if steps <= verbose_steps or terminated or truncated:
            print(f"--> {action!r}"[:120])
            print(observation.strip()[-400:] + ("\n" if "error" not in info else f"\n(info['error'] = {info['error']!r})\n"))
        if terminated or truncated:
            break
    if "report" in info:
        print(f"grading report: {json.dumps(info['report'])[:400]}...")
    print(f"episode over after {steps} steps: return {total:g}, {'terminated' if terminated else 'truncated'}\n")
    env.close()


def many_at_once(num_envs: int = 64, episodes: int = 1000) -> None:
    """Wordle in a thread-backed ConcurrentVectorEnv: GRPO-style groups of 8 share a secret."""
    print(f"=== {episodes} Wordle episodes over {num_envs} slots (gymnasium.make_vec -> ConcurrentVectorEnv)")
    envs = gym.make_vec("gymenvs/Wordle-v0", num_envs=num_envs, autoreset_mode="SameStep")
    envs.reset(seed=0, options={"group_size": 8})
    secrets = [state["secret"] for state in envs.state()]
    print(f"slots 0-7 share the secret {secrets[0]!r}, slots 8-15 {secrets[8]!r}")
    rng = np.random.default_rng(0)
    words = ["crane", "slate", "pious", "mound", "light", "dwarf", "chomp", "fuzzy"]
    finished, solved, steps = 0, 0, 0
    start = time.perf_counter()
    while finished < episodes:
        _, rewards, terminated, truncated, _ = envs.step([words[i] for i in rng.integers(len(words), size=num_envs)])
        finished += int(np.sum(terminated | truncated))
        solved += int(np.sum(rewards > 0))
        steps += num_envs
    seconds = time.perf_counter() - start
    rate = steps / seconds
    print(f"{finished} episodes, {solved} solved by luck, {steps} env steps in {seconds:.2f} s ({rate:,.0f} steps/s)\n")
    envs.close()


def main() -> None:
    print(f"gymenvs {gymenvs.__version__}: {len(gymenvs.list_envs())} environments registered\n")
    for env_id, (kwargs, agent) in AGENTS.items():
        try:
            play(env_id, kwargs, agent)
        except ImportError as exc:
            print(f"=== {env_id} skipped: {exc}\n")
        except RuntimeError as exc:  # the SWE env without a Docker engine or its images
            print(f"=== {env_id} skipped: {exc}\n")
    many_at_once()


if __name__ == "__main__":
    main()
