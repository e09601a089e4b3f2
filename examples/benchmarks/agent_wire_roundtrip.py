"""The round trip of an intercepted LLM call in each wire format, streamed and not, measured from the
env's side: the policy's reply (one tool call) is handed over, translated into the agent's format
(server-sent events when it streams), the agent receives it and sends its next request, which the
channel translates back into the internal form, and the env has it.

    python examples/benchmarks/agent_wire_roundtrip.py [--calls 1000]

gymenvs/SWEAgent-v0 with an agent that only calls (examples/benchmarks/agents/wire_pinger.py) in the
task container, with no network: its calls cross the in-container forwarder and the episode's unix
socket, as in agent_call_overhead.py (Chat Completions, unstreamed, there). Needs a Docker engine and the
fixture images. Prints median and p99 in ms, and the host process's CPU time per call; nothing is
asserted. Target: at most 1 ms median.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from agent_call_overhead import summary  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    for wire in ("chat", "responses", "anthropic"):
        for stream in (False, True):
            name = f"{wire:<10} {'streamed' if stream else 'whole':<9} (container, forwarder, unix socket)"
            print(summary(name, *round_trips(wire, stream, args.calls)), flush=True)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
