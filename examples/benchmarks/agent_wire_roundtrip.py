"""The round trip of an intercepted LLM call in each wire format, streamed and not, measured from the
env's side: the policy's reply (one tool call) is handed over, translated into the agent's format
(server-sent events when it streams), the agent receives it and sends its next request, which the
channel translates back into the internal form, and the env has it.

    python examples/benchmarks/agent_wire_roundtrip.py [--calls 1000]

gymenvs/SWEAgent-v0 with an agent that only calls (examples/benchmarks/agents/wire_pinger.py) in the
task container, with no network: its calls cross the in-container forwarder, its exec stream and the
episode's unix socket, as in agent_call_overhead.py (Chat Completions, unstreamed, there). In the same run, after each
format, the baseline: the same agent on the host calling a plain aiohttp server on TCP loopback (OpenEnv's
design), which hands each request to a driver thread and sends the reply it is given (the same bytes
gymenvs sends for that format, built once), so the baseline translates nothing. Needs a Docker engine, the
fixture images and aiohttp (`pip install 'gymenvs[bench]'`). Prints median and p99 in ms, and the host
process's CPU time per call for gymenvs; nothing is asserted. To compare two checkouts, run each with its own
PYTHONPATH (the first line printed says which gymenvs was imported).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from agent_call_overhead import aiohttp_on_loopback, summary  # noqa: E402

PINGER = Path(__file__).parent / "agents" / "wire_pinger.py"
REPLY = {"name": "bash", "arguments": {"command": "ls"}}


def round_trips(wire: str, stream: bool, calls: int) -> tuple[list[float], float]:
    """Each call's round trip, and the CPU time this process (env and channel threads) spent on all of them."""
    from gymenvs.container.agent.env import AgentEnv
    from gymenvs.container.agent.specs import AgentSpec
    from gymenvs.swe.family import SWEFamily

    pinger = AgentSpec(
        f"wire-pinger-{wire}",
        command="exec python3 /run/gymenvs/wire_pinger.py",
        files=(str(PINGER),),
        environment={"GYMENVS_WIRE": wire, "GYMENVS_STREAM": "1" if stream else "0", "GYMENVS_PINGS": str(calls + 1)},
    )
    env = AgentEnv(family=SWEFamily, agent=pinger, max_turns=calls + 10)
    try:
        _, info = env.reset(seed=0)
        assert info["request"]["wire"] == wire
        times = []
        cpu_started = time.process_time()
        for _ in range(calls):
            started = time.perf_counter()
            env.step(REPLY)
            times.append(time.perf_counter() - started)
        cpu = time.process_time() - cpu_started
    finally:
        env.close()
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
    args = parser.parse_args()
    import gymenvs

    print("gymenvs:", gymenvs.__file__, "| load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    for wire in ("chat", "responses", "anthropic"):
        for stream in (False, True):
            kind = f"{wire:<10} {'streamed' if stream else 'whole':<9}"
            print(summary(f"{kind} gymenvs (container, forwarder over its exec stream)", *round_trips(wire, stream, args.calls)),
                  flush=True)
            baseline = aiohttp_on_loopback(args.calls, PINGER, {"GYMENVS_WIRE": wire, "GYMENVS_STREAM": "1" if stream else "0"},
                                           answer=lambda raw, wire=wire: reply_bytes(wire, raw))
            print(summary(f"{kind} aiohttp on TCP loopback (host)", baseline), flush=True)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
