"""Terminal-v0 on each Harbor task of a dataset: build, reset, grade times, and the oracle's and an empty run's rewards.

    python examples/benchmarks/terminal_tasks.py [--dataset fixtures] [--runs 3] [--keep-images]

Per task, one after the other:

- build: the image built from environment/ with no cached image of it (the one left from an earlier
  run is removed first unless --keep-images; layers of the base image stay cached);
- reset cold: the first `reset` of a new env (the image exists; the container is started);
- reset warm: a later `reset` of an env with `warm_pool=1` whose pooled container is ready;
- grade: `submit` after the oracle (solution/solve.sh run through the bash tool), i.e. grade_task;
- oracle / empty: the rewards of `--runs` oracle runs and of `--runs` runs that submit at once.

Prints a Markdown table; nothing is asserted. Needs a Docker engine and the base image
(`gymenvs swe build-base-image`).
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym

import gymenvs  # noqa: F401  (registers gymenvs/Terminal-v0)
from gymenvs.container.runtime import shared_runtime
from gymenvs.terminal.images import ensure_task_image, image_name
from gymenvs.terminal.task import TerminalTask
from gymenvs.terminal.tasks import load_terminal_tasks

SUBMIT = {"name": "submit", "arguments": {}}


def build_seconds(task: TerminalTask, keep: bool) -> float:
    runtime = shared_runtime()
    if not keep:
        runtime.remove_image(image_name(task))  # best effort: nothing to remove before the first build
    started = time.perf_counter()
    ensure_task_image(runtime, task)
    return time.perf_counter() - started


def timed_reset(env: gym.Env, task: TerminalTask) -> float:
    started = time.perf_counter()
    env.reset(options={"instance_id": task.name})
    return time.perf_counter() - started


def oracle_run(env: gym.Env, task: TerminalTask) -> tuple[float, float]:
    """(reward, seconds of the grading submit) of one episode that runs solve.sh through the bash tool."""
    env.reset(options={"instance_id": task.name})
    if task.solve_script is not None:
        env.step({"name": "bash", "arguments": {"command": task.solve_script.read_text()}})
    started = time.perf_counter()
    reward = env.step(SUBMIT)[1]
    return float(reward), time.perf_counter() - started


def empty_run(env: gym.Env, task: TerminalTask) -> float:
    env.reset(options={"instance_id": task.name})
    return float(env.step(SUBMIT)[1])


def measure(task: TerminalTask, dataset: str, runs: int, keep: bool) -> dict[str, str]:
    build = build_seconds(task, keep)
    cold_env = gym.make("gymenvs/Terminal-v0", dataset=dataset, command_timeout_s=120.0)
    warm_env = gym.make("gymenvs/Terminal-v0", dataset=dataset, warm_pool=1, command_timeout_s=120.0)
    try:
        cold = timed_reset(cold_env, task)
        timed_reset(warm_env, task)  # fills the pool
        for pool in warm_env.unwrapped._pools:
            while pool.ready() < pool.size:
                time.sleep(0.1)
        warm = timed_reset(warm_env, task)
        oracle = [oracle_run(cold_env, task) for _ in range(runs)]
        empty = [empty_run(cold_env, task) for _ in range(runs)]
    finally:
        cold_env.close()
        warm_env.close()
    return {
        "task": task.name, "build s": f"{build:.1f}", "reset cold s": f"{cold:.2f}", "reset warm s": f"{warm:.2f}",
        "grade s": f"{statistics.median(seconds for _, seconds in oracle):.2f}",
        "oracle rewards": " ".join(f"{reward:g}" for reward, _ in oracle), "empty rewards": " ".join(f"{r:g}" for r in empty),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="fixtures", help="a Harbor dataset gymenvs reads (default: the fixtures)")
    parser.add_argument("--runs", type=int, default=3, help="oracle runs and empty runs per task")
    parser.add_argument("--keep-images", action="store_true", help="do not remove task images before timing their build")
    args = parser.parse_args()
    rows = [measure(task, args.dataset, args.runs, args.keep_images) for task in load_terminal_tasks(args.dataset)]
    header = list(rows[0])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row[column] for column in header) + " |")


if __name__ == "__main__":
    main()
