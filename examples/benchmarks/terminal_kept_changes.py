"""What keeping the agent's changed files (`keep_changes=True`) adds to grading a Terminal episode, and their size.

    python examples/benchmarks/terminal_kept_changes.py [--runs 5]

Each one-step fixture whose oracle always scores 1, `--runs` episodes of gymenvs/Terminal-v0 with
`keep_changes=True` and `--runs` without, taken in turn (the oracle through bash, then `submit`). Grading is
`info["report"]["seconds"]` (the snapshot, the grading container, test.sh, reading the reward, and with
`keep_changes` the engine's list of changes and the tar of the changed files). Prints per task the median grading
seconds each way and the median of the paired differences, the kept changes' size (compressed, as the report holds
it before base64, and the tar before compression) and how many paths the engine listed; then the median extra over
all runs, and the load average before and after. Needs a Docker engine, the project's base image and the fixture
images. Prints figures; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics

import gymnasium as gym

import gymenvs  # noqa: F401  (registers the envs)
from gymenvs.terminal.tasks import fixtures_path

TASKS = ("configure-service", "csv-report", "edit-config", "fix-build", "record-in-sidecar", "serve-status")


def oracle_report(env: gym.Env, name: str) -> dict:
    """One episode of the task `name`: its oracle through bash, then submit; its grading report."""
    env.reset(options={"task": f"gymenvs/{name}"})
    env.step({"name": "bash", "arguments": {"command": (fixtures_path() / name / "solution" / "solve.sh").read_text()}})
    *_, info = env.step({"name": "submit", "arguments": {}})
    return info["report"]


def measure(name: str, runs: int, keeping: gym.Env, plain: gym.Env) -> list[float]:
    """Print the task's line; the extra seconds of each pair of runs."""
    oracle_report(keeping, name)  # warm: the task image built, the engine's caches filled
    kept, without = [], []
    for _ in range(runs):
        kept.append(oracle_report(keeping, name))
        without.append(oracle_report(plain, name))
    extra = [k["seconds"] - w["seconds"] for k, w in zip(kept, without)]
    changes = kept[-1]["changes"]
    rewards = " ".join(f"{report['reward']:g}" for report in kept + without)
    print(f"{name:<18} rewards {rewards}; median grading s: kept {statistics.median(r['seconds'] for r in kept):.3f}, "
          f"not {statistics.median(r['seconds'] for r in without):.3f}, extra {statistics.median(extra):.3f}; "
          f"kept {changes['bytes']} bytes ({changes['tar_bytes']} tar), {changes['paths']} paths"
          + (f"; not kept: {changes['not_kept']}" if changes["not_kept"] else ""), flush=True)
    return extra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    keeping = gym.make("gymenvs/Terminal-v0", keep_changes=True, command_timeout_s=60.0)
    plain = gym.make("gymenvs/Terminal-v0", command_timeout_s=60.0)
    try:
        extra = [seconds for name in TASKS for seconds in measure(name, args.runs, keeping, plain)]
    finally:
        keeping.close()
        plain.close()
    print(f"median extra grading time keeping the changes: {statistics.median(extra):.3f} s over {len(extra)} pairs "
          f"(min {min(extra):.3f}, max {max(extra):.3f})")
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
