"""How long a program that forgets `close()` takes to end, and what it leaves behind.

    python examples/benchmarks/exit_without_close.py [--env gymenvs/TerminalAgent-v0] [--runs 3] [--limit 60]

Each run starts a Python program (on the gymenvs this script imports: set PYTHONPATH to measure another
checkout) that makes the env, resets it and returns without closing it, and prints
the seconds from its reset to its exit (the program is killed at `--limit` seconds: "hung"), then the
containers labelled with its pid and the host directories of its pid that are still there once it is gone.
Needs a Docker engine and the fixture images (`gymenvs swe build-images`).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAM = """
import sys, time
import gymnasium as gym
import gymenvs  # noqa: F401

env = gym.make(sys.argv[1])
env.reset(seed=0)
print(time.monotonic(), flush=True)
"""


def one_run(env_id: str, limit: float) -> tuple[float | None, int, int]:
    """(seconds from reset to exit, or None if it was still running at `limit`; containers left; directories left)."""
    import docker

    try:
        from gymenvs.container.runtime.owners import LABEL_PID
    except ImportError:  # a checkout from before the container platform (issue 26), for the "before" figure
        from gymenvs.swe.sandbox import LABEL_PID  # type: ignore[no-redef]

    import gymenvs

    checkout = Path(gymenvs.__file__).resolve().parents[1]  # the program runs the gymenvs this script imports
    process = subprocess.Popen([sys.executable, "-c", PROGRAM, env_id], stdout=subprocess.PIPE, text=True, cwd=checkout)
    assert process.stdout is not None
    reset_at = float(process.stdout.readline())
    try:
        process.wait(timeout=limit)
        seconds: float | None = time.monotonic() - reset_at
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        seconds = None
    containers = docker.from_env().containers.list(all=True, filters={"label": f"{LABEL_PID}={process.pid}"})
    directories = list(Path(tempfile.gettempdir()).glob(f"gymenvs-*-{process.pid}-*"))
    return seconds, len(containers), len(directories)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="gymenvs/TerminalAgent-v0")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--limit", type=float, default=60.0, help="seconds after which a program that has not ended is killed")
    args = parser.parse_args()
    runs = [one_run(args.env, args.limit) for _ in range(args.runs)]
    for seconds, containers, directories in runs:
        ended = f"{seconds:.2f} s after its reset" if seconds is not None else f"hung: killed after {args.limit:g} s"
        print(f"{args.env}: exited {ended}; left {containers} container(s), {directories} directory(ies)")
    ended = [seconds for seconds, _, _ in runs if seconds is not None]
    if ended:
        print(f"median {statistics.median(ended):.2f} s over {len(ended)} of {len(runs)} runs that ended")


if __name__ == "__main__":
    main()
