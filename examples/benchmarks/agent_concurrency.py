"""Many containerized agents at once: N reference agents (one per slot of a thread-backed
ConcurrentVectorEnv) run bash commands for a fixed time; every reply must come back to the slot that
asked for it.

    python examples/benchmarks/agent_concurrency.py [--agents 32] [--seconds 300]

Each round every slot's policy asks its agent to `echo <slot>-<round>`; the agent runs it in its
container and sends the output in its next LLM request. A reply with another slot's or round's
token is "crossed"; an episode that ends, errors or times out is "lost". Prints the counts, the
requests per second and the load average; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium as gym
import numpy as np

import gymenvs  # noqa: F401


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=300)
    args = parser.parse_args()
    started = time.monotonic()
    envs = gym.make_vec("gymenvs/SWEAgent-v0", num_envs=args.agents, backend="thread", max_turns=10**6,
                        call_timeout_s=300.0, episode_timeout_s=args.seconds + 600)
    try:
        envs.reset(seed=list(range(args.agents)))
        print(f"{args.agents} agents started in {time.monotonic() - started:.1f} s", flush=True)
        live = np.ones(args.agents, dtype=bool)
        ok = crossed = lost = rounds = 0
        loads = []
        begin = time.monotonic()
        while time.monotonic() - begin < args.seconds and live.any():
            actions = [{"name": "bash", "arguments": {"command": f"echo {i}-{rounds}"}} if live[i] else None
                       for i in range(args.agents)]
            observations, _, terminated, truncated, _ = envs.step(actions)
            for i in np.flatnonzero(live):
                if terminated[i] or truncated[i]:
                    lost += 1
                    live[i] = False
                elif observations[i].startswith(f"[tool] (bash)\n{i}-{rounds}\n[exit code: 0]"):
                    ok += 1
                else:
                    crossed += 1
            rounds += 1
            loads.append(os.getloadavg()[0])
        elapsed = time.monotonic() - begin
    finally:
        envs.close()
    print(f"{rounds} rounds in {elapsed:.0f} s: {ok} requests answered in order, {crossed} crossed, {lost} lost "
          f"({ok / elapsed:.1f} requests/s)")
    print(f"load average during the run: mean {np.mean(loads):.1f}, max {np.max(loads):.1f}; now",
          " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
