"""SWE-v0 reset latency with and without the warm pool, at several slots resetting in parallel.

    python examples/benchmarks/swe_reset.py [--resets 50] [--slots 8] [--episode-seconds 5]

Each slot is one `gymnasium.make("gymenvs/SWE-v0")` in its own thread, as in a thread-backed
vector env. A slot resets, runs one command, then waits `--episode-seconds` (the time an agent's
episode takes, during which the pool refills), and resets again, until `--resets` resets were
timed in all. One untimed reset per slot comes first (and, with the pool, the pool is full before
the clock starts). Prints the median and the 99th percentile of the time `reset` took; nothing is
asserted. Needs a Docker engine and the fixture images (`gymenvs swe build-images`).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym

import gymenvs  # noqa: F401  (registers gymenvs/SWE-v0)
from gymenvs.swe.tasks import FIXTURES, load_tasks

COMMAND = {"name": "bash", "arguments": {"command": "true"}}


def measure(slots: int, resets: int, warm_pool: int, episode_seconds: float, instance_id: str) -> tuple[list[float], int, int]:
    """Reset times in seconds, the distinct containers the timed episodes ran in, and their failed commands."""
    envs = [gym.make("gymenvs/SWE-v0", warm_pool=warm_pool) for _ in range(slots)]
    options = {"instance_id": instance_id}
    try:
        with ThreadPoolExecutor(slots) as threads:
            list(threads.map(lambda env: env.reset(options=options), envs))
        for pool in envs[0].unwrapped._pools:  # start timing with a full pool
            while pool.ready() < pool.size:
                time.sleep(0.1)
        times: list[float] = []
        containers: set[str] = set()
        failures = []
        lock = threading.Lock()

        def slot(env) -> None:
            while True:
                with lock:
                    if len(times) >= resets:
                        return
                    times.append(0.0)
                    index = len(times) - 1
                time.sleep(episode_seconds)
                started = time.perf_counter()
                env.reset(options=options)
                times[index] = time.perf_counter() - started
                containers.add(env.unwrapped.state()["container"])
                if not env.step(COMMAND)[0].endswith("[exit code: 0]"):
                    failures.append(index)

        with ThreadPoolExecutor(slots) as threads:
            list(threads.map(slot, envs))
        return times, len(containers), len(failures)
    finally:
        for env in envs:
            env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resets", type=int, default=50, help="resets timed per configuration")
    parser.add_argument("--slots", type=int, default=8, help="envs resetting in parallel")
    parser.add_argument("--episode-seconds", type=float, default=5.0, help="seconds between a slot's resets")
    args = parser.parse_args()
    instance_id = load_tasks(FIXTURES)[0].instance_id
    print(f"{args.resets} resets at {args.slots} slots, {args.episode_seconds:g} s per episode, task {instance_id}\n")
    print(f"{'configuration':<32} {'median ms':>10} {'p99 ms':>10} {'max ms':>10} {'containers':>11} {'failed':>7}")
    for label, pool in (("no pool (docker run per reset)", 0), (f"warm pool of {args.slots}", args.slots)):
        times, containers, failed = measure(args.slots, args.resets, pool, args.episode_seconds, instance_id)
        p99 = statistics.quantiles(times, n=100, method="inclusive")[98]
        print(f"{label:<32} {statistics.median(times) * 1000:>10.1f} {p99 * 1000:>10.1f} {max(times) * 1000:>10.1f}"
              f" {containers:>11} {failed:>7}")
    print("\ncontainers: distinct containers the timed episodes ran in (one each); failed: episodes whose command failed")


if __name__ == "__main__":
    main()
