"""Docker against rootful Podman on one fixture task: the time of a whole SWE-v0 episode (reset, the gold patch
applied with bash, submit and grading) and the latency of a trivial command, on each runtime.

    python examples/benchmarks/runtimes.py [--episodes 10] [--commands 300] [--runtimes docker podman]

Needs both engines (.ci/setup starts them) and the fixture images in each store (`gymenvs swe build-images
--runtime docker|podman`). Runtimes alternate round by round, so that other work on the machine weighs on both
alike. Prints medians and 99th percentiles with the load average; nothing is asserted.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections.abc import Callable

import gymnasium as gym

import gymenvs  # noqa: F401  (registers gymenvs/SWE-v0)
from gymenvs.container.runtime import RUNTIMES, shared_runtime
from gymenvs.swe.images import WORKDIR, image_for
from gymenvs.swe.tasks import FIXTURES, load_tasks

TRIVIAL = "true"


def seconds(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def gold_episode(runtime: str, task) -> Callable[[], None]:
    """One SWE-v0 episode that applies the gold patch with bash and submits; asserts it graded 1."""
    apply = {"name": "bash", "arguments": {"command": f"cat > /tmp/gold.patch <<'EOF_GOLD'\n{task.patch}EOF_GOLD\n"
                                                      "git apply /tmp/gold.patch"}}

    def play() -> None:
        env = gym.make("gymenvs/SWE-v0", runtime=runtime)
        env.reset(options={"instance_id": task.instance_id})
        env.step(apply)
        reward = env.step({"name": "submit", "arguments": {}})[1]
        env.close()
        assert reward == 1.0, f"{runtime}: the gold patch graded {reward}"
    return play


def shell_steps(runtime: str, task, repeats: int) -> list[float]:
    """The times of `true` as SWE-v0's bash tool runs it, in the episode's persistent shell."""
    env = gym.make("gymenvs/SWE-v0", runtime=runtime, max_turns=1_000_000)
    env.reset(options={"instance_id": task.instance_id})
    step = functools.partial(env.step, {"name": "bash", "arguments": {"command": TRIVIAL}})
    times = [seconds(step) for _ in range(repeats)]
    env.close()
    return times


def engine_execs(runtime: str, task, repeats: int) -> list[float]:
    """The times of `true` run by `Sandbox.run`: one exec through the engine's API each."""
    sandbox = shared_runtime(runtime).start(image_for(task), role="benchmark", episode_id="benchmark", workdir=WORKDIR)
    run = functools.partial(sandbox.run, TRIVIAL, timeout=60)
    times = [seconds(run) for _ in range(repeats)]
    sandbox.remove()
    return times


def percentiles(times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered) * 1000:8.2f} ms  p99 {p99 * 1000:8.2f} ms  (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10, help="gold episodes per runtime")
    parser.add_argument("--commands", type=int, default=300, help="trivial commands per runtime and way")
    parser.add_argument("--runtimes", nargs="+", choices=tuple(RUNTIMES), default=list(RUNTIMES))
    args = parser.parse_args()
    task = load_tasks(FIXTURES)[0]
    episodes: dict[str, list[float]] = {name: [] for name in args.runtimes}
    steps: dict[str, list[float]] = {name: [] for name in args.runtimes}
    execs: dict[str, list[float]] = {name: [] for name in args.runtimes}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name in args.runtimes:  # warm up: the engine's connection, the image's first container
        gold_episode(name, task)()
    for _ in range(args.episodes):
        for name in args.runtimes:
            episodes[name].append(seconds(gold_episode(name, task)))
    for name in args.runtimes:
        steps[name] = shell_steps(name, task, args.commands)
        execs[name] = engine_execs(name, task, args.commands)
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"task {task.instance_id}, image {image_for(task)}")
    for name in args.runtimes:
        print(f"{name:<7} SWE-v0 gold episode (reset, apply, submit, grade):  {percentiles(episodes[name])}")
        print(f"{name:<7} `true` as SWE-v0 env.step(bash), persistent shell:  {percentiles(steps[name])}")
        print(f"{name:<7} `true` as Sandbox.run, one engine exec per command: {percentiles(execs[name])}")


if __name__ == "__main__":
    main()
