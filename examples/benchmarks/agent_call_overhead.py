"""The round trip an intercepted LLM call adds, measured from the env's side: the policy's reply is
handed over, the agent receives it and sends its next request, the env has it.

    python examples/benchmarks/agent_call_overhead.py [--calls 2000]

1. gymenvs/SWEAgent-v0: the agent ("pinger", it only calls) runs in the task container, with no
   network; its calls reach a listener of this process on the container's loopback, or where the runtime
   cannot make one, cross the in-container forwarder and its exec stream (the row says which).
2. OpenEnv's design: an aiohttp interception server on TCP loopback, the same agent on the host,
   replies handed over from a driver thread (as a trainer would).

Needs a Docker engine, the fixture images and aiohttp (`pip install 'gymenvs[bench]'`). Prints
median and p99 in ms, the host process's CPU time per call for (1), and the load average; nothing
is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PINGER = Path(__file__).parent / "agents" / "pinger.py"
PONG = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "pong"}, "finish_reason": "stop"}]}


def summary(name: str, seconds: list[float], cpu_seconds: float | None = None) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    cpu = f"   host CPU {cpu_seconds * 1000 / len(ms):6.3f} ms/call" if cpu_seconds is not None else ""
    return f"{name:<58} median {statistics.median(ms):6.3f} ms   p99 {p99:6.3f} ms   ({len(ms)} calls){cpu}"


def route(env: Any) -> str:
    """How the agent in `env`'s container reaches its channel (for the rows' labels)."""
    endpoint = getattr(env, "_endpoint", None)
    return "on its loopback" if endpoint is not None and endpoint.listener is not None else "forwarder over its exec stream"


def gymenvs_in_container(calls: int) -> tuple[list[float], float, str]:
    """Each call's round trip, the CPU time this process (env and channel threads) spent on all of them, and the
    calls' `route`."""
    from gymenvs.container.agent.env import AgentEnv
    from gymenvs.container.agent.specs import AgentSpec
    from gymenvs.swe.family import SWEFamily

    pinger = AgentSpec("pinger", command="exec python3 /run/gymenvs/pinger.py", files=(str(PINGER),),
                       environment={"GYMENVS_PINGS": str(calls + 1)})
    env = AgentEnv(family=SWEFamily, agent=pinger, max_turns=calls + 10)
    try:
        env.reset(seed=0)
        times = []
        cpu_started = time.process_time()
        for _ in range(calls):
            started = time.perf_counter()
            env.step("pong")
            times.append(time.perf_counter() - started)
        cpu = time.process_time() - cpu_started
        way = route(env)
    finally:
        env.close()
    return times, cpu, way


def pong(raw: dict) -> tuple[bytes, str]:
    return json.dumps(PONG).encode(), "application/json"


def aiohttp_on_loopback(calls: int, agent: Path = PINGER, environment: dict[str, str] | None = None,
                        answer: Callable[[dict], tuple[bytes, str]] = pong) -> list[float]:
    """`agent` on the host against a plain aiohttp server on TCP loopback that hands each request to a driver
    thread (this one) and sends the reply it is given: `answer` of the first request (its bytes and content type),
    built once. Each call's round trip."""
    from aiohttp import web

    requests: queue.Queue = queue.Queue()
    loop = asyncio.new_event_loop()

    async def handle(request: web.Request) -> web.Response:
        reply = loop.create_future()
        requests.put((await request.json(), reply))
        body, content_type = await reply
        return web.Response(body=body, content_type=content_type)

    app = web.Application()
    for path in ("/v1/chat/completions", "/v1/responses", "/v1/messages"):
        app.router.add_post(path, handle)
    runner = web.AppRunner(app, access_log=None)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    origin = f"http://127.0.0.1:{port}"
    process = subprocess.Popen([sys.executable, str(agent)], env={
        **os.environ, "OPENAI_BASE_URL": f"{origin}/v1", "GYMENVS_ORIGIN": origin, "GYMENVS_API_KEY": "k",
        "GYMENVS_PINGS": str(calls + 1), **(environment or {})})
    try:
        raw, reply = requests.get(timeout=30)
        answered = answer(raw)
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            loop.call_soon_threadsafe(reply.set_result, answered)
            _, reply = requests.get(timeout=30)
            times.append(time.perf_counter() - started)
        loop.call_soon_threadsafe(reply.set_result, answered)
        process.wait(30)
    finally:
        process.kill()
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    times, cpu, way = gymenvs_in_container(args.calls)
    print(summary(f"gymenvs SWEAgent-v0 (container, {way})", times, cpu))
    print(summary("aiohttp interception server on TCP loopback (host)", aiohttp_on_loopback(args.calls)))
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
