"""The round trip of an intercepted LLM call in each wire format, streamed and not, measured from the
env's side: the policy's reply (one tool call) is handed over, translated into the agent's format
(server-sent events when it streams), the agent receives it and sends its next request, which the
channel translates back into the internal form, and the env has it.

    python examples/benchmarks/agent_wire_roundtrip.py [--calls 1000] [--history-kb 0]

Three rows per format, each the same agent (examples/benchmarks/agents/wire_pinger.py, one keep-alive
connection, stdlib only), whose every request is a first turn's, or with `--history-kb N` carries about N KB of
earlier turns as a later turn's does:

1. gymenvs/SWEAgent-v0 with the agent in the task container, with no network: its calls reach a listener of
   this process on the container's loopback (or, where the runtime cannot make one, cross the in-container
   forwarder, its exec stream and the channel's bridge; the row says which), and each is an `env.step`. The episode's
   first step starts its grading container in the background (`TaskFamily.grade_ahead`), which loads the
   engine for about a second: the calls made while that runs are reported on a line of their own, and the
   row's figures are the `--calls` calls after it.
2. The gymenvs channel with the agent on the host, on the channel's unix socket (an agent on this host uses
   it): the same HTTP parsing and translation both ways as (1), answered from a driver thread (this one), with
   no container, relay or env step. The like-for-like comparison with (3).
3. The baseline, OpenEnv's design: the agent on the host calling a plain aiohttp server on TCP loopback,
   which hands each request to a driver thread and sends the reply it is given (the same bytes gymenvs sends
   for that format, built once), so it translates nothing.

Needs a Docker engine, the fixture images and aiohttp (`pip install 'gymenvs[bench]'`). Prints median and p99
in ms, and this process's CPU time per call for (1) and (2) (its env, bridge and channel threads, or its driver
and channel threads); nothing is asserted. To compare two checkouts, run each with its own PYTHONPATH (the
first line printed says which gymenvs was imported).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from agent_call_overhead import aiohttp_on_loopback, route, summary  # noqa: E402

PINGER = Path(__file__).parent / "agents" / "wire_pinger.py"
REPLY = {"name": "bash", "arguments": {"command": "ls"}}


def pinger_environment(wire: str, stream: bool, history_kb: int) -> dict[str, str]:
    """The pinger's settings: its wire format, whether it streams, and the KB of history its requests carry."""
    return {"GYMENVS_WIRE": wire, "GYMENVS_STREAM": "1" if stream else "0", "GYMENVS_HISTORY_KB": str(history_kb)}


def round_trips(wire: str, stream: bool, calls: int, history_kb: int = 0) -> tuple[list[float], float, list[float], str]:
    """Each of `calls` round trips once the grading container has started, the CPU time this process spent on them,
    the round trips made while it started (from the first step), and the calls' `route`."""
    from gymenvs.container.agent.env import AgentEnv
    from gymenvs.container.agent.specs import AgentSpec
    from gymenvs.swe.family import SWEFamily

    pinger = AgentSpec(
        f"wire-pinger-{wire}",
        command="exec python3 /run/gymenvs/wire_pinger.py",
        files=(str(PINGER),),
        environment={**pinger_environment(wire, stream, history_kb), "GYMENVS_PINGS": str(_ENOUGH)},
    )
    env = AgentEnv(family=SWEFamily, agent=pinger, max_turns=_ENOUGH)
    try:
        _, info = env.reset(seed=0)
        assert info["request"]["wire"] == wire
        starting: list[float] = []
        while not starting or _grading_container_starting():
            starting.append(_timed_step(env))
        cpu_started = time.process_time()
        times = [_timed_step(env) for _ in range(calls)]
        cpu = time.process_time() - cpu_started
        way = route(env)
    finally:
        env.close()
    return times, cpu, starting, way


_ENOUGH = 1_000_000  # the agent's calls and the env's turns: the env is closed after the calls measured


def _timed_step(env: Any) -> float:
    started = time.perf_counter()
    env.step(REPLY)
    return time.perf_counter() - started


def _grading_container_starting() -> bool:
    """Whether the env's background start of the grading container (`ContainerEnv.step`) still runs."""
    return any(thread.name == "gymenvs-grading-ahead" for thread in threading.enumerate())


def channel_on_host(wire: str, stream: bool, calls: int, history_kb: int = 0) -> tuple[list[float], float]:
    """The agent on the host calling a gymenvs channel on its unix socket; this thread answers each call, translated
    into the agent's format as the env does. Each call's round trip, and this process's CPU time on them all."""
    from gymenvs.container.agent.channel import AgentRequest, LLMChannel
    from gymenvs.container.agent.wire import reply_from_action, respond

    channel = LLMChannel(model_name="m")
    process = subprocess.Popen([sys.executable, str(PINGER)], env={
        **os.environ, "GYMENVS_SOCKET": str(channel.socket_path), "GYMENVS_API_KEY": channel.token,
        **pinger_environment(wire, stream, history_kb), "GYMENVS_PINGS": str(calls + 1)})

    def next_call() -> Any:
        event = channel.next_event(30)
        assert isinstance(event, AgentRequest), event
        return event.call

    def answer(call: Any) -> None:
        payload, _ = respond(call.wire, call.body, call.raw or {}, reply_from_action(REPLY), "m", channel.conversations)
        call.answer(200, payload)

    try:
        call, times = next_call(), []
        cpu_started = time.process_time()
        for _ in range(calls):
            started = time.perf_counter()
            answer(call)
            call = next_call()
            times.append(time.perf_counter() - started)
        cpu = time.process_time() - cpu_started
        answer(call)
        process.wait(30)
    finally:
        process.kill()
        channel.close()
    return times, cpu


def reply_bytes(wire: str, raw: dict) -> tuple[bytes, str]:
    """What gymenvs answers `raw` (a request in `wire`'s format) with `REPLY`, as bytes and content type."""
    from gymenvs.container.agent.wire import anthropic, chat, responses
    from gymenvs.container.agent.wire.common import reply_from_action

    module = {"chat": chat, "responses": responses, "anthropic": anthropic}[wire]
    payload = module.response(reply_from_action(REPLY), module.request(raw), "m", raw)
    if raw.get("stream"):
        return module.stream(payload, raw), "text/event-stream"
    return json.dumps(payload).encode(), "application/json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--history-kb", type=int, default=0, help="KB of earlier turns in each request (default 0)")
    args = parser.parse_args()
    import gymenvs

    print("gymenvs:", gymenvs.__file__, "| load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    for wire in ("chat", "responses", "anthropic"):
        for stream in (False, True):
            kind = f"{wire:<10} {'streamed' if stream else 'whole':<9}"
            times, cpu, starting, way = round_trips(wire, stream, args.calls, args.history_kb)
            print(summary(f"{kind} gymenvs (container, {way})", times, cpu), flush=True)
            print(summary(f"{kind}   (the same, while its grading container started)", starting), flush=True)
            on_host = channel_on_host(wire, stream, args.calls, args.history_kb)
            print(summary(f"{kind} gymenvs channel on its unix socket (host)", *on_host), flush=True)
            baseline = aiohttp_on_loopback(args.calls, PINGER, pinger_environment(wire, stream, args.history_kb),
                                           answer=lambda raw, wire=wire: reply_bytes(wire, raw))
            print(summary(f"{kind} aiohttp on TCP loopback (host)", baseline), flush=True)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
