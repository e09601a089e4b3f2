"""Vector env throughput on gymenvs/Echo-v0: ConcurrentVectorEnv against gymnasium and OpenEnv.

For each step cost (trivial, and a 10 ms sleep standing in for I/O) and each slot count, every
contender steps all its slots in lockstep for a fixed time and reports env-steps per second and
the median latency of one vector step:

- concurrent-thread, concurrent-process, concurrent-ray: `wrappers.ConcurrentVectorEnv`, default
  settings unless told otherwise: `--pin-threads` pins the thread backend's pool to one core;
  `--process-workers W` and `--ray-actors A` make W worker processes or A actors host the slots,
  each running its share on threads of its own (by default each slot has its own); Ray runs
  locally, started first, outside the timings;
- gym-sync, gym-async: gymnasium's SyncVectorEnv and AsyncVectorEnv(shared_memory=False);
- openenv: an openenv-core server (`create_app` + uvicorn on 127.0.0.1, in a subprocess) wrapping
  the same Echo env, driven by one WebSocket client (session) per slot, all stepping concurrently
  (see openenv_echo.py);
- openenv-independent: the same server and sessions, each session stepping on its own without waiting
  for the others (no lockstep: OpenEnv's fairer setting); its "median ms" is one session's step.

Every slot sends the same action each step: by default a tool call as JSON text, which is what an
LLM emits (`--action dict` sends it as a mapping, `--action text` as free text); OpenEnv's client
sends the same string as its action's message, and its server steps the same Echo env with it.
Episodes are made long enough not to end, so every step is a step. Run from the repository root:

    python examples/benchmarks/vector_throughput.py            # the full table, a few minutes
    python examples/benchmarks/vector_throughput.py --quick    # 1, 8, 64 slots, short runs
    python examples/benchmarks/vector_throughput.py --slots 64 --contenders concurrent-thread openenv
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

import gymenvs  # noqa: F401
from wrappers.vector import make_vector_env

ENV_ID = "gymenvs/Echo-v0"
TOOL_CALL = {"name": "echo", "arguments": {"message": "hello world"}}
ACTIONS = {"json": json.dumps(TOOL_CALL), "dict": TOOL_CALL, "text": "hello world"}
EPISODE_TURNS = 10**9
#: Settings of each backend, from the command line (--pin-threads, --process-workers, --ray-actors).
BACKEND_SETTINGS: dict[str, dict[str, Any]] = {"thread": {}, "process": {}, "ray": {}}
HERE = Path(__file__).resolve().parent
REPOSITORY = Path(gymenvs.__file__).resolve().parent.parent
CONTENDERS = ["concurrent-thread", "concurrent-process", "concurrent-ray", "gym-sync", "gym-async", "openenv",
              "openenv-independent"]


@dataclass
class Result:
    step_ms: float
    slots: int
    contender: str
    steps_per_s: float
    median_ms: float
    start_s: float
    vector_steps: int


# -- gymnasium-API contenders ----------------------------------------------------------------


def make_contender(name: str, slots: int, sleep_s: float) -> gym.vector.VectorEnv:
    env_kwargs: dict[str, Any] = {"step_sleep_s": sleep_s, "max_turns": EPISODE_TURNS}
    if name.startswith("concurrent-"):
        backend = name.removeprefix("concurrent-")
        return make_vector_env(ENV_ID, slots, backend=backend, **BACKEND_SETTINGS[backend], **env_kwargs)
    if name == "gym-sync":
        return gym.make_vec(ENV_ID, slots, vectorization_mode="sync", **env_kwargs)
    if name == "gym-async":
        no_shared_memory = {"shared_memory": False}  # shared memory returns stale placeholders for Text
        return gym.make_vec(ENV_ID, slots, vectorization_mode="async", vector_kwargs=no_shared_memory, **env_kwargs)
    raise ValueError(f"unknown contender {name!r}")


def summarize(name: str, slots: int, sleep_s: float, latencies: list[float], elapsed: float, start_s: float) -> Result:
    steps_per_s = len(latencies) * slots / elapsed
    return Result(sleep_s * 1e3, slots, name, steps_per_s, statistics.median(latencies) * 1e3, start_s, len(latencies))


def time_steps(step: Callable[[], object], seconds: float, min_steps: int) -> tuple[float, list[float]]:
    """Call `step` for about `seconds` (at least `min_steps` times); (elapsed s, latency of each call in s)."""
    latencies = []
    start = time.perf_counter()
    while True:
        before = time.perf_counter()
        step()
        latencies.append(time.perf_counter() - before)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds and len(latencies) >= min_steps:
            return elapsed, latencies


def run_gym_contender(name: str, slots: int, sleep_s: float, seconds: float, action: object) -> Result:
    started = time.perf_counter()
    envs = make_contender(name, slots, sleep_s)
    try:
        envs.reset(seed=0)
        start_s = time.perf_counter() - started
        actions = (action,) * slots
        for _ in range(3):
            envs.step(actions)
        elapsed, latencies = time_steps(lambda: envs.step(actions), seconds, min_steps=3)
    finally:
        envs.close()
    return summarize(name, slots, sleep_s, latencies, elapsed, start_s)


# -- OpenEnv ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def openenv_server(sleep_s: float, max_sessions: int) -> Iterator[str]:
    """An OpenEnv echo server in a uvicorn subprocess; yields its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPOSITORY), str(HERE), os.environ.get("PYTHONPATH", "")]),
        "GYMENVS_ECHO_SLEEP_S": str(sleep_s),
        "GYMENVS_ECHO_MAX_SESSIONS": str(max_sessions),
    }
    command = [sys.executable, "-m", "uvicorn", "openenv_echo:app", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--log-level", "warning"]
    # The server logs a traceback for every client that closes its session; keep them out of the table.
    log = tempfile.NamedTemporaryFile("w+", prefix="openenv-echo-", suffix=".log", delete=False)
    server = subprocess.Popen(command, cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the OpenEnv server did not start; see {log.name}") from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        os.unlink(log.name)


async def drive_openenv(url: str, slots: int, sleep_s: float, seconds: float, message: str) -> Result:
    from openenv_echo import EchoAction, EchoClient

    started = time.perf_counter()
    clients = [EchoClient(url, message_timeout_s=600) for _ in range(slots)]
    try:
        await asyncio.gather(*(client.connect() for client in clients))
        await asyncio.gather(*(client.reset(seed=0) for client in clients))
        start_s = time.perf_counter() - started
        action = EchoAction(message=message)

        async def vector_step() -> None:
            await asyncio.gather(*(client.step(action) for client in clients))

        for _ in range(3):
            await vector_step()
        latencies = []
        start = time.perf_counter()
        while True:
            before = time.perf_counter()
            await vector_step()
            latencies.append(time.perf_counter() - before)
            elapsed = time.perf_counter() - start
            if elapsed >= seconds and len(latencies) >= 3:
                break
    finally:
        await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)
    return summarize("openenv", slots, sleep_s, latencies, elapsed, start_s)


async def drive_openenv_independently(url: str, slots: int, sleep_s: float, seconds: float, message: str) -> Result:
    """OpenEnv's fairer setting: each session steps on its own, never waiting for the others (no lockstep)."""
    from openenv_echo import EchoAction, EchoClient

    started = time.perf_counter()
    clients = [EchoClient(url, message_timeout_s=600) for _ in range(slots)]
    latencies: list[float] = []
    try:
        await asyncio.gather(*(client.connect() for client in clients))
        await asyncio.gather(*(client.reset(seed=0) for client in clients))
        start_s = time.perf_counter() - started
        action = EchoAction(message=message)
        start = time.perf_counter()

        async def session(client: EchoClient) -> None:
            while time.perf_counter() - start < seconds:
                before = time.perf_counter()
                await client.step(action)
                latencies.append(time.perf_counter() - before)

        await asyncio.gather(*(session(client) for client in clients))
        elapsed = time.perf_counter() - start
    finally:
        await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)
    steps_per_s = len(latencies) / elapsed
    return Result(sleep_s * 1e3, slots, "openenv-independent", steps_per_s, statistics.median(latencies) * 1e3, start_s,
                  len(latencies) // slots)


# -- the table -------------------------------------------------------------------------------


def print_row(result: Result) -> None:
    ideal = f"{100 * result.steps_per_s / (result.slots / (result.step_ms / 1e3)):5.0f}%" if result.step_ms else ""
    print(
        f"{result.step_ms:>7g} {result.slots:>6} {result.contender:<19} {result.steps_per_s:>12,.0f} "
        f"{result.median_ms:>11.3f} {ideal:>8} {result.start_s:>8.2f}",
        flush=True,
    )


def print_targets(results: list[Result]) -> None:
    def find(step_ms: float, slots: int, contender: str) -> Result | None:
        return next((r for r in results if (r.step_ms, r.slots, r.contender) == (step_ms, slots, contender)), None)

    thread = find(0, 64, "concurrent-thread")
    for peer in ("openenv", "openenv-independent"):
        openenv = find(0, 64, peer)
        if thread and openenv:
            ratio = thread.steps_per_s / openenv.steps_per_s
            print(f"trivial step, 64 slots: concurrent-thread / {peer} = {ratio:.1f}x (target >= 50x)")
    targets = {("concurrent-thread", 64): 85, ("concurrent-thread", 256): 80, ("concurrent-ray", 64): 60}
    for contender in ("concurrent-thread", "concurrent-process", "concurrent-ray"):
        for slots in (64, 256):
            slow = find(10, slots, contender)
            if slow:
                share = 100 * slow.steps_per_s / (slots / 0.01)
                target = f" (target >= {targets[contender, slots]}%)" if (contender, slots) in targets else ""
                print(f"10 ms step, {slots} slots: {contender} = {share:.0f}% of the ideal {slots * 100:,} steps/s{target}")
    for slots in sorted({r.slots for r in results}):
        ray, process = find(0, slots, "concurrent-ray"), find(0, slots, "concurrent-process")
        if ray and process:
            overhead = lambda r: 1e6 / r.steps_per_s  # noqa: E731  µs of wall time per env-step
            print(
                f"trivial step, {slots} slots: per env-step ray {overhead(ray):.0f} µs, process {overhead(process):.0f} µs "
                f"({overhead(ray) / overhead(process):.1f}x)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, nargs="+", default=[1, 8, 64, 256])
    parser.add_argument("--sleep-ms", type=float, nargs="+", default=[0, 10], help="per-step sleep of the env")
    parser.add_argument("--seconds", type=float, default=1.5, help="time spent stepping each configuration")
    parser.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=CONTENDERS)
    parser.add_argument("--action", choices=ACTIONS, default="json", help="what each slot sends (default: a JSON tool call)")
    parser.add_argument("--pin-threads", action="store_true", help="concurrent-thread with pin_threads=True")
    parser.add_argument("--process-workers", type=int, help="worker processes hosting the slots (default: one per slot)")
    parser.add_argument("--ray-actors", type=int, help="Ray actors hosting the slots (default: one per slot)")
    parser.add_argument("--quick", action="store_true", help="1, 8 and 64 slots, 0.5 s each")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args()
    if args.quick:
        args.slots, args.seconds = [n for n in args.slots if n <= 64], 0.5

    action = ACTIONS[args.action]
    BACKEND_SETTINGS["thread"] = {"pin_threads": True} if args.pin_threads else {}
    BACKEND_SETTINGS["process"] = {"max_workers": args.process_workers}
    BACKEND_SETTINGS["ray"] = {"max_workers": args.ray_actors}
    print(f"{ENV_ID}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {args.seconds} s per configuration")
    print(f"backend settings: {BACKEND_SETTINGS}")
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"action: {action!r}; load average at start: {load}")
    if "concurrent-ray" in args.contenders:
        import ray

        started = time.perf_counter()
        ray.init(include_dashboard=False, log_to_driver=False)
        print(f"local Ray started in {time.perf_counter() - started:.1f} s (not counted below)")
    header = ("step ms", "slots", "contender", "env-steps/s", "median ms", "% ideal", "start s")
    print("{:>7} {:>6} {:<19} {:>12} {:>11} {:>8} {:>8}".format(*header))
    results = []
    for sleep_ms in args.sleep_ms:
        sleep_s = sleep_ms / 1e3
        for slots in args.slots:
            for name in args.contenders:
                if name.startswith("openenv"):
                    continue
                results.append(run_gym_contender(name, slots, sleep_s, args.seconds, action))
                print_row(results[-1])
        drivers = {"openenv": drive_openenv, "openenv-independent": drive_openenv_independently}
        for name in [name for name in args.contenders if name in drivers]:
            with openenv_server(sleep_s, max_sessions=max(args.slots)) as url:
                for slots in args.slots:
                    message = action if isinstance(action, str) else json.dumps(action)
                    results.append(asyncio.run(drivers[name](url, slots, sleep_s, args.seconds, message)))
                    print_row(results[-1])
    print()
    print(f"load average at end: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print_targets(results)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))


if __name__ == "__main__":
    main()
