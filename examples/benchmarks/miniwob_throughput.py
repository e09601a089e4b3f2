"""MiniWoB-v0 in headless Chromium: steps per second at 1, 4 and 8 slots (thread backend), memory per
browser slot, construction (browser start) time and reset time.

Each step clicks the task area (a valid action that does not end the episode), so the figure is the
cost of an action plus a fresh observation (page text; with --screenshot also a screenshot).
Memory is the resident set of each slot's processes (chromedriver, Chromium and its helpers): RSS
counts pages shared between a slot's processes once per process, PSS splits them fairly, so PSS
is the better "memory per slot". Run:  python examples/benchmarks/miniwob_throughput.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import gymnasium as gym
import psutil

import gymenvs  # noqa: F401

TASK = "click-button"
AREA = {"name": "click", "arguments": {"element": 3}}  # div#area: a click that changes nothing


def slot_memory_mib(pids: list[int]) -> tuple[float, float]:
    rss = pss = 0
    for pid in pids:
        try:
            info = psutil.Process(pid).memory_full_info()
        except psutil.Error:
            continue
        rss += info.rss
        pss += info.pss
    return rss / 2**20, pss / 2**20


def throughput(num_envs: int, seconds: float, observation: str) -> dict[str, float]:
    start = time.perf_counter()
    vector_env = gym.make_vec("gymenvs/MiniWoB-v0", num_envs=num_envs, task=TASK, observation=observation, max_turns=10_000)
    build_s = time.perf_counter() - start
    try:
        vector_env.reset(seed=0)
        vector_env.step([AREA] * num_envs)  # warm-up
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            vector_env.step([AREA] * num_envs)
            steps += num_envs
        elapsed = time.perf_counter() - start
        memory = [slot_memory_mib(pids) for pids in vector_env.call("browser_pids")]
    finally:
        vector_env.close()
    return {
        "steps_per_s": steps / elapsed,
        "build_s": build_s,
        "rss_mib": statistics.mean(m[0] for m in memory),
        "pss_mib": statistics.mean(m[1] for m in memory),
    }


def reset_times(resets: int, observation: str) -> list[float]:
    env = gym.make("gymenvs/MiniWoB-v0", task=TASK, observation=observation)
    try:
        env.reset(seed=0)
        times = []
        for seed in range(resets):
            start = time.perf_counter()
            env.reset(seed=seed)
            times.append((time.perf_counter() - start) * 1e3)
        return times
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="stepping time per slot count")
    parser.add_argument("--slots", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--resets", type=int, default=50)
    parser.add_argument("--screenshot", action="store_true", help='observation="screenshot+text"')
    args = parser.parse_args()
    observation = "screenshot+text" if args.screenshot else "text"

    print(f"MiniWoB-v0 task={TASK} observation={observation!r}, thread backend; {os.cpu_count()} CPUs")
    print(f"{'slots':>5} {'steps/s':>9} {'build s':>8} {'RSS MiB/slot':>13} {'PSS MiB/slot':>13} {'load avg':>9}")
    for num_envs in args.slots:
        result = throughput(num_envs, args.seconds, observation)
        print(
            f"{num_envs:>5} {result['steps_per_s']:>9.1f} {result['build_s']:>8.1f} {result['rss_mib']:>13.0f} "
            f"{result['pss_mib']:>13.0f} {os.getloadavg()[0]:>9.2f}"
        )
    times = reset_times(args.resets, observation)
    print(
        f"reset: median {statistics.median(times):.1f} ms, p90 {statistics.quantiles(times, n=10)[-1]:.1f} ms "
        f"over {args.resets} resets; load average {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
