"""What grading costs beyond the tests' own time, for Terminal (Harbor) tasks and SWE tasks.

    python examples/benchmarks/grading_overhead.py [--runs 5] [--kinds terminal swe] [--timeline] [--pause 0]
        [--tasks NAME ...]

- terminal: each fixture task with an oracle that always passes (not `broken-oracle` or `flaky-test`), run
  `--runs` times as `gymenvs tasks validate` runs them (`gymenvs.terminal.validate.run_episode`: the oracle in the
  task's container, then grading). Grading is the snapshot, the grading container, any services started again,
  test.sh and reading the reward (`VerifierResult.seconds`); the tests' time is test.sh's run
  (`VerifierResult.test_seconds`).
- swe: each SWE fixture task in gymenvs/SWE-v0, `--runs` episodes of the gold patch then, `--pause` seconds later
  (a policy's turn; the grading container starts during the episode), `submit`. Grading is the `submit` step's
  whole wall time (what the caller waits: the agent's changes read and copied in, the test patch, the tests,
  and whatever of the grading container's start the episode did not cover), the tests' time
  `info["report"]["test_seconds"]`; the report's own `seconds` (from the grading container ready) is shown beside.

Prints per task the median grading seconds, test seconds and their difference (the overhead), and the median
overhead over all runs. `--timeline` also prints, for the last run of each kind, every engine call it made (the
Docker sandbox's and runtime's methods, timed in this process): when it began and how long it took. A SWE run's
calls are those of its `submit` step (the grading); a Terminal run's are its whole episode (the container's start
and the oracle, then the grading). Needs a Docker engine, the project's base image and the fixture images. Prints
figures; nothing is asserted.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections.abc import Callable

import gymnasium as gym

import gymenvs  # noqa: F401  (registers the envs)
from gymenvs.container.runtime import shared_runtime
from gymenvs.swe.tasks import load_tasks
from gymenvs.terminal.task import TerminalTask
from gymenvs.terminal.tasks import fixtures_path
from gymenvs.terminal.validate import run_episode

UNRELIABLE_ORACLES = ("broken-oracle", "flaky-test")
ENGINE_CALLS = {"DockerSandbox": ("run", "open_exec", "put_archive", "changed_paths", "fetch", "read_archive", "stat",
                                  "pause", "stop", "commit", "ensure_running", "remove"),
                "DockerRuntime": ("start", "create_volume", "remove_volume", "remove_image")}
calls: list[tuple[float, float, str]] = []  # (began, seconds, name) of each engine call, while recording


def record_engine_calls() -> None:
    """Time every engine call of this process from now on (the benchmark's own classes, wrapped here only)."""
    from gymenvs.container.runtime.docker.runtime import DockerRuntime
    from gymenvs.container.runtime.docker.sandbox import DockerSandbox

    for cls in (DockerSandbox, DockerRuntime):
        for name in ENGINE_CALLS[cls.__name__]:
            setattr(cls, name, timed(getattr(cls, name), f"{cls.__name__}.{name}"))


def timed(method: Callable, name: str) -> Callable:
    @functools.wraps(method)
    def call(*args, **kwargs):
        began = time.monotonic()
        try:
            return method(*args, **kwargs)
        finally:
            calls.append((began, time.monotonic() - began, name))
    return call


def print_timeline(kind: str, since: float) -> None:
    scope = "its submit step" if kind == "swe" else "its episode: start, oracle, grading"
    print(f"{kind}: the last run's engine calls ({scope}; began at s, took s):")
    for began, seconds, name in sorted(call for call in calls if call[0] >= since):
        print(f"  {began - since:6.3f} {seconds:6.3f} {name}")


def line(label: str, grading: list[float], tests: list[float], rewards: list[float], extra: str = "") -> str:
    overheads = [g - t for g, t in zip(grading, tests)]
    return (f"{label:<34} rewards {' '.join(f'{r:g}' for r in rewards)}; median s: grading "
            f"{statistics.median(grading):.3f}, tests {statistics.median(tests):.3f}, overhead "
            f"{statistics.median(overheads):.3f}{extra}")


def terminal(runs: int, names: list[str] | None = None) -> list[float]:
    runtime = shared_runtime()
    overheads = []
    folders = sorted(path for path in fixtures_path().iterdir() if path.name not in UNRELIABLE_ORACLES)
    for folder in [path for path in folders if names is None or path.name in names]:
        task = TerminalTask.from_dir(folder)
        run_episode(runtime, task, oracle=True)  # the task image built, and the engine warm
        results = []
        for _ in range(runs):
            calls.clear()
            results.append(run_episode(runtime, task, oracle=True))
        grading, tests = [r.seconds for r in results], [r.test_seconds for r in results]
        overheads += [g - t for g, t in zip(grading, tests)]
        print(line(f"terminal {task.name}", grading, tests, [r.reward or 0.0 for r in results]), flush=True)
    return overheads


def swe(runs: int, pause: float) -> list[float]:
    env = gym.make("gymenvs/SWE-v0")
    overheads = []
    try:
        for task in load_tasks():
            apply = f"cat > /tmp/gold.patch <<'GYMENVS_PATCH_END'\n{task.patch}GYMENVS_PATCH_END\ngit apply /tmp/gold.patch"
            reports, tests, steps, rewards = [], [], [], []
            for _ in range(runs + 1):  # the first warms the image up
                env.reset(options={"instance_id": task.instance_id})
                env.step({"name": "bash", "arguments": {"command": apply}})
                time.sleep(pause)
                calls.clear()
                started = time.monotonic()
                _, reward, _, _, info = env.step({"name": "submit", "arguments": {}})
                steps.append(time.monotonic() - started)
                reports.append(info["report"]["seconds"])
                tests.append(info["report"]["test_seconds"])
                rewards.append(reward)
            reports, tests, steps, rewards = reports[1:], tests[1:], steps[1:], rewards[1:]
            overheads += [g - t for g, t in zip(steps, tests)]
            print(line(f"swe {task.instance_id}", steps, tests, rewards,
                       f"; the report's seconds {statistics.median(reports):.3f}"), flush=True)
    finally:
        env.close()
    return overheads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--kinds", nargs="+", choices=["terminal", "swe"], default=["terminal", "swe"])
    parser.add_argument("--timeline", action="store_true", help="print the last run's engine calls, per kind")
    parser.add_argument("--pause", type=float, default=0.0, help="swe: seconds between the agent's last step and submit")
    parser.add_argument("--tasks", nargs="+", metavar="NAME", help="terminal: only these fixture tasks (folder names)")
    args = parser.parse_args()
    if args.timeline:
        record_engine_calls()
    print("gymenvs from", os.path.dirname(gymenvs.__file__), "; load average:",
          " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    for kind in args.kinds:
        overheads = terminal(args.runs, args.tasks) if kind == "terminal" else swe(args.runs, args.pause)
        print(f"{kind}: median grading overhead {statistics.median(overheads):.3f} s over {len(overheads)} runs "
              f"(max {max(overheads):.3f})", flush=True)
        if args.timeline and calls:
            print_timeline(kind, min(began for began, _, _ in calls))
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
