"""Time to the agent's first LLM request after `reset` (container start, agent start, first call),
for the reference agent and mini-swe-agent 2.4.6, on the fixture tasks.

    python examples/benchmarks/agent_first_request.py [--resets 5]

Needs a Docker engine, the fixture images and mini-swe-agent's derived images
(`gymenvs swe install-agent mini-swe-agent`). Prints median, min and max; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from gymenvs.swe.agents.env import SWEAgentEnv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resets", type=int, default=5)
    args = parser.parse_args()
    for agent in ("reference", "mini-swe-agent"):
        env = SWEAgentEnv(agent=agent)
        times = []
        try:
            for seed in range(args.resets):
                started = time.perf_counter()
                env.reset(seed=seed)
                times.append(time.perf_counter() - started)
        finally:
            env.close()
        print(f"{agent:<16} reset to first request: median {statistics.median(times):5.2f} s  "
              f"min {min(times):5.2f} s  max {max(times):5.2f} s  ({len(times)} resets)")
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
