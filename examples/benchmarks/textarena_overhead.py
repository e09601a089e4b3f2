"""The TextArena adapter's cost per step over calling textarena directly, measured side by side.

Both sides play the same Tower of Hanoi solution (7 moves, then a reset) on the same games: the
direct side calls textarena's own `reset` / `step` / `get_observation` on a raw game; the adapter
side calls `step` on `gymnasium.make("gymenvs/TextArena-v0", game=...)`, unwrapped (the env's own
cost) and wrapped as `gymnasium.make` returns it. A third side calls textarena directly but with the
adapter's swap of Python's global `random` state around each call, to show what that part costs.
Rounds alternate between the sides, so a change in machine load hits all of them alike.
Run:  python examples/benchmarks/textarena_overhead.py
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

import gymnasium as gym
import textarena as ta

import gymenvs  # noqa: F401

GAME = "TowerOfHanoi-v0"
SOLUTION = ["[A C]", "[A B]", "[C B]", "[A C]", "[B A]", "[B C]", "[A C]"]


def direct_round(game, episodes: int, isolation=contextlib.nullcontext) -> float:
    """Microseconds per step, calling textarena directly (step, then read the agent's observation),
    each call inside `isolation()`."""
    elapsed = 0.0
    for seed in range(episodes):
        game.reset(num_players=1, seed=seed)
        game.get_observation()
        start = time.perf_counter()
        for move in SOLUTION:
            with isolation():
                game.step(move)
            with isolation():
                game.get_observation()
        elapsed += time.perf_counter() - start
    return elapsed / (episodes * len(SOLUTION)) * 1e6


def adapter_round(env, episodes: int, as_tool_call: bool) -> float:
    elapsed = 0.0
    for seed in range(episodes):
        env.reset(seed=seed)
        start = time.perf_counter()
        for move in SOLUTION:
            env.step({"name": "move", "arguments": {"action": move}} if as_tool_call else move)
        elapsed += time.perf_counter() - start
    return elapsed / (episodes * len(SOLUTION)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--episodes", type=int, default=200, help="episodes per round and side")
    args = parser.parse_args()

    direct = ta.make(f"{GAME}-raw")
    wrapped = gym.make("gymenvs/TextArena-v0", game=GAME, max_turns=100)
    sides = {
        "textarena, direct": lambda: direct_round(direct, args.episodes),
        # The part of the adapter's cost that keeps each game's `random` state its own (thread safety):
        "textarena, direct, own random state per call": lambda: direct_round(
            direct, args.episodes, wrapped.unwrapped._game_random
        ),
        "gymenvs env.unwrapped, free text": lambda: adapter_round(wrapped.unwrapped, args.episodes, False),
        "gymenvs env.unwrapped, tool call": lambda: adapter_round(wrapped.unwrapped, args.episodes, True),
        "gymenvs gymnasium.make(...), tool call": lambda: adapter_round(wrapped, args.episodes, True),
    }
    for side in sides.values():  # warm-up
        side()
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, side in sides.items():
            samples[name].append(side())
    base = statistics.median(samples["textarena, direct"])
    load = os.getloadavg()[0]
    print(f"{GAME}, {args.rounds} rounds x {args.episodes} episodes x {len(SOLUTION)} steps; load average {load:.2f}")
    print(f"{'path':<48} {'us/step (median)':>17} {'overhead us':>12}")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:<48} {median:>17.1f} {median - base:>12.1f}")


if __name__ == "__main__":
    main()
