"""How container episodes scale on one machine: what one running episode costs the host process, and reset latency
and step throughput at 8 to 64 concurrent containers of a light task, on each runtime.

    python examples/benchmarks/scale.py [--slots 8 16 32 64] [--steps 20] [--runtimes docker podman]

The light task is SWE-v0 on the first fixture task (textkit); a step is `true` through its `bash` tool (the episode's
persistent shell). For each runtime and each number of slots N: N envs reset at once (one thread each, as a thread
vector env resets them), then each plays `--steps` steps at once; then all close. Reset latency is each slot's own
reset; steps per second is all slots' steps over the wall time of that phase, and the slowest step is
printed beside it. The host-side cost is the difference
in this process's threads, open file descriptors and resident memory while N episodes run, per episode, and the
engine API requests per reset, per step and per close (counted on the runtime's client). Prints figures with the
load average; nothing is asserted. Needs the engines and the fixture images (.ci/setup).
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import gymnasium as gym

import gymenvs  # noqa: F401  (registers gymenvs/SWE-v0)
from gymenvs.container.runtime import RUNTIMES, shared_runtime
from gymenvs.swe.tasks import FIXTURES, load_tasks

STEP = {"name": "bash", "arguments": {"command": "true"}}


class EngineRequests:
    """Counts the HTTP requests the runtime's client sends its engine (a response hook on its session)."""

    def __init__(self, runtime_name: str):
        self._hooks = shared_runtime(runtime_name).client.api.hooks["response"]
        self._hooks.append(self._count)
        self.count = 0
        self._lock = threading.Lock()

    def _count(self, response, *args, **kwargs):
        with self._lock:
            self.count += 1
        return response

    def close(self) -> None:
        self._hooks.remove(self._count)


@dataclass
class HostState:
    threads: int
    descriptors: int
    rss_mib: float

    @classmethod
    def now(cls) -> HostState:
        with open("/proc/self/statm") as statm:
            resident_pages = int(statm.read().split()[1])
        return cls(threading.active_count(), len(os.listdir("/proc/self/fd")),
                   resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20)


def engine_side_mib(runtime: str) -> float:
    """The resident memory of the engine's per-container processes on this host (Docker: containerd-shim; Podman:
    conmon), in MiB: they are part of what a node pays per container."""
    monitor = "conmon" if runtime == "podman" else "containerd-shim"
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as comm, open(f"/proc/{pid}/statm") as statm:
                if comm.read().startswith(monitor):
                    total += int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            continue
    return total / 2**20


def container_mib(runtime: str, container_id: str) -> float:
    """A running container's own memory use as the engine reports it (its cgroup), in MiB."""
    stats = shared_runtime(runtime).client.api.stats(container_id, stream=False)
    return stats["memory_stats"].get("usage", 0) / 2**20


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def host_cost(runtime: str, instance_id: str, slots: int, steps: int) -> None:
    """What `slots` running episodes cost this process, per episode, and the engine requests per phase."""
    envs = [gym.make("gymenvs/SWE-v0", runtime=runtime, max_turns=1_000_000) for _ in range(slots)]
    before, engine_before = HostState.now(), engine_side_mib(runtime)
    requests = EngineRequests(runtime)
    for env in envs:
        env.reset(options={"instance_id": instance_id})
    per_reset, requests.count = requests.count / slots, 0
    running, engine_running = HostState.now(), engine_side_mib(runtime)
    requests.count, own = 0, container_mib(runtime, envs[0].unwrapped.episode_sandbox.id)
    for env in envs:
        for _ in range(steps):
            env.step(STEP)
    per_step, requests.count = requests.count / (slots * steps), 0
    for env in envs:
        env.close()
    per_close = requests.count / slots
    requests.close()
    print(f"{runtime:<7} host cost per running episode ({slots} episodes): "
          f"{(running.threads - before.threads) / slots:.1f} threads, "
          f"{(running.descriptors - before.descriptors) / slots:.1f} file descriptors, "
          f"{(running.rss_mib - before.rss_mib) / slots:.2f} MiB resident; engine requests: "
          f"{per_reset:.1f} per reset, {per_step:.2f} per step, {per_close:.1f} per close (no grading); engine side: "
          f"{(engine_running - engine_before) / slots:.1f} MiB of container monitors per container, "
          f"{own:.1f} MiB in the container's own cgroup")


def concurrent_round(runtime: str, instance_id: str, slots: int, steps: int) -> None:
    envs = [gym.make("gymenvs/SWE-v0", runtime=runtime, max_turns=1_000_000) for _ in range(slots)]
    with ThreadPoolExecutor(max_workers=slots) as pool:
        resets = list(pool.map(lambda env: timed(lambda: env.reset(options={"instance_id": instance_id})), envs))
        started = time.perf_counter()
        step_times = [t for times in pool.map(lambda env: [timed(lambda: env.step(STEP)) for _ in range(steps)], envs)
                      for t in times]
        step_wall = time.perf_counter() - started
        close_wall = timed(lambda: list(pool.map(lambda env: env.close(), envs)))
    load = os.getloadavg()[0]
    print(f"{runtime:<7} {slots:>3} slots: reset p50 {statistics.median(resets):6.2f} s  "
          f"p99 {percentile(resets, 0.99):6.2f} s  | {slots * steps / step_wall:7.0f} steps/s "
          f"({steps} steps each, slowest {max(step_times) * 1000:.0f} ms) | close all {close_wall:5.2f} s "
          f"| load (1 min) {load:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--steps", type=int, default=20, help="steps per slot in the throughput phase")
    parser.add_argument("--runtimes", nargs="+", choices=tuple(RUNTIMES), default=list(RUNTIMES))
    args = parser.parse_args()
    instance_id = load_tasks(FIXTURES)[0].instance_id
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    for runtime in args.runtimes:
        concurrent_round(runtime, instance_id, 2, 2)  # warm up: the client's connections, the image's first start
        host_cost(runtime, instance_id, 8, args.steps)
    for slots in args.slots:
        for runtime in args.runtimes:
            concurrent_round(runtime, instance_id, slots, args.steps)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    leaks = Counter(threading.enumerate()[i].name.split("-")[0] for i in range(threading.active_count()))
    print(f"threads left in this process: {dict(leaks)}")


if __name__ == "__main__":
    main()
