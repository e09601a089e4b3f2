"""The thread backend's own pool against `concurrent.futures.ThreadPoolExecutor`, request for request.

Both run the same batches: one step request per slot of gymenvs/Echo-v0 (a JSON tool call),
on the same `Slot` objects the vector env uses. The executor version is what the standard
library gives directly: submit every request, then `concurrent.futures.wait(timeout=...)`.
The pool is run as the vector env runs it: without a deadline (the default), and with one
(`step_timeout_s`, where the caller only waits). Rounds alternate between the contenders, so
that a change in the machine's load touches them alike.

    python examples/benchmarks/thread_pool_choice.py
    python examples/benchmarks/thread_pool_choice.py --slots 64 --sleep-ms 0 10 --rounds 5

`--compare-with FILE` adds the pool of another revision as one more contender, in the same rounds
(figures of separate runs on a shared machine differ by more than the change being measured):

    git show main:wrappers/vector/backends/threads.py > /tmp/threads_main.py
    python examples/benchmarks/thread_pool_choice.py --compare-with /tmp/threads_main.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import gymnasium as gym

import gymenvs  # noqa: F401
from wrappers.vector.backends.threads import ThreadBackend
from wrappers.vector.slot import Command, Request, Slot

ACTION = json.dumps({"name": "echo", "arguments": {"message": "hello world"}})
DEADLINE_S = 60.0


def echo_factory(sleep_s: float) -> Callable[[], gym.Env]:
    return lambda: gym.make("gymenvs/Echo-v0", step_sleep_s=sleep_s, max_turns=10**9)


class ExecutorRunner:
    """Runs a batch as the standard library would: one future per request, then `wait`."""

    def __init__(self, slots: list[Slot]):
        self.slots = slots
        self.executor = ThreadPoolExecutor(max_workers=len(slots))

    def run(self, requests: list[Request], timeout_s: float | None) -> list:
        futures = [self.executor.submit(self.slots[index].run, command, argument) for index, command, argument in requests]
        wait(futures, timeout_s)
        return [future.result() for future in futures]

    def close(self) -> None:
        self.executor.shutdown()


def steps_per_second(run: Callable[[], list], slots: int, seconds: float) -> float:
    for _ in range(3):
        run()
    calls = 0
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        run()
        calls += 1
    return calls * slots / elapsed


def backend_from(path: str) -> type:
    """The `ThreadBackend` class of a threads.py file (another revision's pool)."""
    spec = importlib.util.spec_from_file_location("threads_compared", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ThreadBackend


def compare(slots: int, sleep_s: float, rounds: int, seconds: float, other: type | None) -> None:
    pool = ThreadBackend([echo_factory(sleep_s)] * slots, max_workers=slots, restart_on_error=True)
    executor = ExecutorRunner([Slot(index, echo_factory(sleep_s)) for index in range(slots)])
    resets: list[Request] = [(index, Command.RESET, (index, None)) for index in range(slots)]
    steps: list[Request] = [(index, Command.STEP, ACTION) for index in range(slots)]
    runners: list[Any] = [pool, executor]
    contenders = {
        "pool, no deadline": lambda: pool.run(steps, None),
        f"pool, {DEADLINE_S:g} s deadline": lambda: pool.run(steps, DEADLINE_S),
        "ThreadPoolExecutor": lambda: executor.run(steps, DEADLINE_S),
    }
    if other is not None:
        other_pool = other([echo_factory(sleep_s)] * slots, max_workers=slots, restart_on_error=True)
        runners.append(other_pool)
        contenders["other, no deadline"] = lambda: other_pool.run(steps, None)
        contenders[f"other, {DEADLINE_S:g} s deadline"] = lambda: other_pool.run(steps, DEADLINE_S)
    for runner in runners:
        runner.run(resets, None)
    figures: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, run in contenders.items():
            figures[name].append(steps_per_second(run, slots, seconds))
    best = statistics.median(figures["pool, no deadline"])
    for name, values in figures.items():
        rates = ", ".join(f"{value:,.0f}" for value in values)
        print(f"{sleep_s * 1e3:>7g} {slots:>6} {name:<24} {statistics.median(values):>12,.0f} "
              f"{statistics.median(values) / best:>8.2f}x   ({rates})", flush=True)
    pool.close(10)
    executor.close()
    if other is not None:
        other_pool.close(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, nargs="+", default=[64])
    parser.add_argument("--sleep-ms", type=float, nargs="+", default=[0, 10])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="time per contender per round")
    parser.add_argument("--compare-with", metavar="FILE", help="a threads.py whose pool joins the contenders")
    args = parser.parse_args()
    other = backend_from(args.compare_with) if args.compare_with else None
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"gymenvs/Echo-v0, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; load average at start: {load}")
    print(f"{'step ms':>7} {'slots':>6} {'runner':<24} {'env-steps/s':>12} {'vs pool':>9}   (each round)")
    for sleep_ms in args.sleep_ms:
        for slots in args.slots:
            compare(slots, sleep_ms / 1e3, args.rounds, args.seconds, other)
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"load average at end: {load}")


if __name__ == "__main__":
    main()
