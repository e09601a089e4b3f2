"""What plain Python threads can do at best: the floor under the thread backend's figures.

No gymenvs code runs here. Every slot is a bare thread that sleeps for the step time when it is
woken, as an env that waits on I/O would; a round ends when every thread has woken up again.
Whatever a thread-based vector env adds (parsing actions, building observations) comes on top:
so a thread backend cannot beat these figures on the same machine and Python.

Two figures are printed:

- the cost of handing the GIL from one thread to another: two threads pass a lock back and
  forth, free to run on any core, then both pinned to one core (Linux only);
- lockstep rounds of N sleeping threads, as % of the ideal (one round per step time). Each thread
  wakes the next before it sleeps (a chain: the cheapest wake-up order found), so the threads'
  starts are spread over N GIL hand-offs; a round cannot end before the last start plus the sleep.
  Run with the threads free, then pinned to one core.

    python examples/benchmarks/thread_floor.py
    python examples/benchmarks/thread_floor.py --slots 64 256 1024 --sleep-ms 10 100
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

PINNING = hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > 1


def pin_to(core: int | None) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})  # pid 0: this thread only


def handoff_us(rounds: int, core: int | None) -> float:
    """Microseconds per GIL hand-off: half of a lock ping-pong round trip between two threads."""
    ping, pong = threading.Lock(), threading.Lock()
    ping.acquire()
    pong.acquire()

    def partner() -> None:
        pin_to(core)
        for _ in range(rounds):
            ping.acquire()
            pong.release()

    thread = threading.Thread(target=partner)
    thread.start()
    own_cores = os.sched_getaffinity(0) if core is not None else None
    pin_to(core)
    started = time.perf_counter()
    for _ in range(rounds):
        ping.release()
        pong.acquire()
    elapsed = time.perf_counter() - started
    thread.join()
    if own_cores is not None:
        os.sched_setaffinity(0, own_cores)
    return elapsed / rounds / 2 * 1e6


class Lockstep:
    """N daemon threads that sleep `sleep_s` each round; each wakes the next one before sleeping."""

    def __init__(self, slots: int, sleep_s: float, core: int | None):
        self.sleep_s = sleep_s
        self.gates = [threading.Lock() for _ in range(slots)]
        for gate in self.gates:
            gate.acquire()
        self.round_over = threading.Lock()
        self.round_over.acquire()
        self.awake = 0
        self.count_lock = threading.Lock()
        for index in range(slots):
            threading.Thread(target=self._serve, args=(index, core), daemon=True).start()

    def _serve(self, index: int, core: int | None) -> None:
        pin_to(core)
        gate = self.gates[index]
        following = self.gates[index + 1] if index + 1 < len(self.gates) else None
        while True:
            gate.acquire()
            if following is not None:
                following.release()
            time.sleep(self.sleep_s)
            with self.count_lock:
                self.awake += 1
                if self.awake == len(self.gates):
                    self.round_over.release()

    def round(self) -> float:
        started = time.perf_counter()
        self.awake = 0
        self.gates[0].release()
        self.round_over.acquire()
        return time.perf_counter() - started


def lockstep_share(slots: int, sleep_s: float, seconds: float, core: int | None) -> tuple[float, float]:
    """(% of the ideal rounds per second, median ms per round) over about `seconds`."""
    lockstep = Lockstep(slots, sleep_s, core)
    for _ in range(3):
        lockstep.round()
    durations = []
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        durations.append(lockstep.round())
    elapsed = time.perf_counter() - started
    return 100 * sleep_s * len(durations) / elapsed, statistics.median(durations) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--sleep-ms", type=float, nargs="+", default=[10])
    parser.add_argument("--seconds", type=float, default=3.0, help="time spent on each configuration")
    args = parser.parse_args()

    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}; load average at start: {load}")
    last_core = max(os.sched_getaffinity(0)) if PINNING else None
    placements = {"free": None, "one core": last_core} if PINNING else {"free": None}
    for name, core in placements.items():
        print(f"GIL hand-off, threads {name}: {handoff_us(20_000, core):.1f} µs")
    print(f"{'step ms':>7} {'slots':>6} {'threads':<9} {'% ideal':>8} {'median ms':>10}")
    for sleep_ms in args.sleep_ms:
        for slots in args.slots:
            for name, core in placements.items():
                share, median_ms = lockstep_share(slots, sleep_ms / 1e3, args.seconds, core)
                print(f"{sleep_ms:>7g} {slots:>6} {name:<9} {share:>7.0f}% {median_ms:>10.2f}", flush=True)
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"load average at end: {load}")


if __name__ == "__main__":
    main()
