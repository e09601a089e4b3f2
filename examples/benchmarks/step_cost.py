"""Per-step cost of each gymenvs environment: median microseconds per `step` (and per `reset`).

Each env is driven with valid tool calls (the common case in training) through
`gymnasium.make(...).unwrapped`, so the figures are the env's own cost without gymnasium's
checking wrappers. A second table times one Echo tool call in its three forms (a mapping, the
same as JSON text, free text), interleaved so that load on the machine hits them alike.
Run:  python examples/benchmarks/step_cost.py [--steps 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

import gymenvs  # noqa: F401


def echo_action(env) -> Any:
    return {"name": "echo", "arguments": {"message": "hello world"}}


def wordle_action(env) -> Any:
    words = ["crane", "slate", "pious", "mound", "light", "dwarf"]
    return {"name": "guess", "arguments": {"word": words[env.state()["step_count"] % 6]}}


def sudoku_action(env) -> Any:
    state = env.state()
    r, c = next((r, c) for r in range(9) for c in range(9) if not state["board"][r][c])
    return {"name": "place", "arguments": {"row": r + 1, "col": c + 1, "digit": state["solution"][r][c]}}


def catch_action(env) -> Any:
    return {"name": "move", "arguments": {"direction": "stay"}}


def reasoning_action(env) -> Any:
    return {"name": "answer", "arguments": {"answer": "42"}}


CASES: dict[str, tuple[dict, Callable]] = {
    "gymenvs/Echo-v0": ({}, echo_action),
    "gymenvs/Wordle-v0": ({}, wordle_action),
    "gymenvs/Sudoku-v0": ({}, sudoku_action),
    "gymenvs/Catch-v0": ({}, catch_action),
    "gymenvs/ReasoningGym-v0": ({"dataset": "basic_arithmetic"}, reasoning_action),
}


def measure(env_id: str, kwargs: dict, choose: Callable, steps: int) -> tuple[list[float], list[float]]:
    env = gym.make(env_id, **kwargs).unwrapped
    step_us, reset_us = [], []
    seed = 0
    done = True
    while len(step_us) < steps:
        if done:
            start = time.perf_counter()
            env.reset(seed=seed)
            reset_us.append((time.perf_counter() - start) * 1e6)
            seed += 1
        action = choose(env)  # chosen outside the timed region
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        step_us.append((time.perf_counter() - start) * 1e6)
        done = terminated or truncated
    env.close()
    return step_us, reset_us


ECHO_FORMS: dict[str, Any] = {
    "dict": {"name": "echo", "arguments": {"message": "hello world"}},
    "json text": json.dumps({"name": "echo", "arguments": {"message": "hello world"}}),
    "free text": "hello world",
}


def measure_echo_forms(rounds: int, steps_per_round: int = 2000) -> dict[str, float]:
    """Median µs per Echo step for each action form: `rounds` rounds, each form in turn."""
    env = gym.make("gymenvs/Echo-v0", max_turns=10**9).unwrapped
    env.reset(seed=0)
    samples: dict[str, list[float]] = {form: [] for form in ECHO_FORMS}
    for _ in range(rounds):
        for form, action in ECHO_FORMS.items():
            start = time.perf_counter()
            for _ in range(steps_per_round):
                env.step(action)
            samples[form].append((time.perf_counter() - start) / steps_per_round * 1e6)
    env.close()
    return {form: statistics.median(values) for form, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000, help="steps timed per env")
    args = parser.parse_args()
    print(f"{'env':<26} {'median step µs':>15} {'p90 step µs':>12} {'median reset µs':>16} {'steps':>7}")
    for env_id, (kwargs, choose) in CASES.items():
        try:
            step_us, reset_us = measure(env_id, kwargs, choose, args.steps)
        except ImportError as exc:
            print(f"{env_id:<26} skipped: {exc}")
            continue
        p90 = statistics.quantiles(step_us, n=10)[-1]
        step, reset = statistics.median(step_us), statistics.median(reset_us)
        print(f"{env_id:<26} {step:>15.1f} {p90:>12.1f} {reset:>16.1f} {len(step_us):>7}")
    print()
    forms = measure_echo_forms(rounds=max(5, args.steps // 200))
    print(f"{'Echo action form':<26} {'median step µs':>15} {'vs dict':>8}")
    for form, micros in forms.items():
        print(f"{form:<26} {micros:>15.2f} {micros / forms['dict']:>7.2f}x")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
