"""Time to the agent's first LLM request after `reset` (container start, agent start, first call),
for the reference agent and mini-swe-agent 2.4.6, on the fixture tasks.

    python examples/benchmarks/agent_first_request.py [--resets 5] [--warm-pool N] [--episode-seconds S]
        [--agents reference mini-swe-agent] [--instance-id ID]

`--warm-pool N` keeps N containers per image started ahead of time (0: none); `--episode-seconds`
waits that long after each timed reset (the episode, during which a pool refills; not timed).
`--instance-id` resets on that task only (one image, so one pool); else on a task drawn per seed.

Needs a Docker engine, the fixture images and mini-swe-agent's derived images
(`gymenvs swe install-agent mini-swe-agent`). Prints median, min and max; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from gymenvs.container.agent.env import AgentEnv
from gymenvs.swe.family import SWEFamily


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resets", type=int, default=5)
    parser.add_argument("--warm-pool", type=int, default=0)
    parser.add_argument("--episode-seconds", type=float, default=0.0)
    parser.add_argument("--agents", nargs="+", default=["reference", "mini-swe-agent"])
    parser.add_argument("--instance-id")
    args = parser.parse_args()
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for agent in args.agents:
        env = AgentEnv(family=SWEFamily, agent=agent, warm_pool=args.warm_pool)
        options = {"instance_id": args.instance_id} if args.instance_id else None
        times = []
        try:
            for seed in range(args.resets):
                started = time.perf_counter()
                env.reset(seed=seed, options=options)
                times.append(time.perf_counter() - started)
                time.sleep(args.episode_seconds)
        finally:
            env.close()
        print(f"{agent:<16} warm_pool={args.warm_pool} reset to first request: median {statistics.median(times):5.2f} s  "
              f"min {min(times):5.2f} s  max {max(times):5.2f} s  ({len(times)} resets)")
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
