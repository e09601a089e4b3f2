"""The coding-agent CLIs in SWEAgent-v0: what installing each costs, how fast it makes its first call,
and how its traffic looks to a trainer.

    python examples/benchmarks/agent_clis.py [--agents claude-code codex opencode pi] [--resets 5]
        [--episodes 20] [--turns 10] [--install] [--instance-id ID]

Per agent:
- `--install`: the time of `gymenvs swe install-agent` into one fixture image, twice over: with an
  empty npm cache (the tarballs downloaded) and with the tarballs cached but no installed tree (what
  a second machine set-up pays), each followed by the image build (its derived image removed first,
  so that no build cache is used); and the size the derived image adds to the task image;
- the time from `reset` to the first main-turn request (median of `--resets`; with `--warm-pool N`, from a
  warm pool of N containers, 3 s between resets for it to refill; the episodes below take theirs from it too), and
  how much of it was the agent's own (from its start, or from its task when the pool started it ahead: the first
  call's `agent_seconds`) and the env's before it;
- over `--episodes` scripted episodes of `--turns` shell calls each (then a text reply, which ends
  every one of these CLIs' runs): the share of main-turn requests that extend the previous one plus
  its reply (appended as tokens by the TRL bridge) against those that rewrote the history, the
  side calls per episode, and the median time the agent took per turn (from a reply to its next
  request: running the command, `info["trajectory"][i]["agent_seconds"]`).

Needs a Docker engine, the fixture images, npm on the host (for `--install`) and the agents' derived
images (`gymenvs swe install-agent NAME`). Prints figures; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import docker

import gymenvs
from gymenvs.container.agent.env import AgentEnv
from gymenvs.container.agent.install import default_npm_cache, install_agent
from gymenvs.container.agent.specs import agent_spec, derived_image
from gymenvs.container.runtime import Runtime, shared_runtime
from gymenvs.swe.family import SWEFamily
from gymenvs.swe.images import image_for
from gymenvs.swe.tasks import FIXTURES, load_tasks

#: Each CLI's own shell tool: its name and the argument holding the command.
SHELL_TOOLS = {"claude-code": ("Bash", "command"), "codex": ("exec_command", "cmd"), "opencode": ("bash", "command"),
               "pi": ("bash", "command")}


def shell(agent: str, command: str) -> dict:
    name, argument = SHELL_TOOLS[agent]
    extra = {"description": "Run a command"} if name.lower() == "bash" and agent != "pi" else {}
    return {"name": name, "arguments": {argument: command, **extra}}


def measure_install(runtime: Runtime, agent: str, image: str) -> None:
    """Install timings through the runtime; the image sizes read with a plain docker client, from outside."""
    client = docker.from_env()
    spec = agent_spec(agent)
    added = []
    for label, keep_tarballs in (("tarballs downloaded", False), ("tarballs cached", True)):
        with tempfile.TemporaryDirectory(prefix="gymenvs-clis-bench-") as cache:
            if keep_tarballs and (default_npm_cache() / "tarballs").exists():
                shutil.copytree(default_npm_cache() / "tarballs", Path(cache) / "tarballs")
            if runtime.image_exists(derived_image(image, spec)):
                runtime.remove_image(derived_image(image, spec))
            started = time.perf_counter()
            install_agent(runtime, spec, [image], cache=Path(cache), progress=False)
            seconds = time.perf_counter() - started
        size = client.images.get(derived_image(image, spec)).attrs["Size"] - client.images.get(image).attrs["Size"]
        added.append(size)
        print(f"{agent:<12} install ({label}): {seconds:6.1f} s, adds {size / 1e6:6.0f} MB to {image}")


def measure_first_request(agent: str, instance_id: str, resets: int, warm_pool: int) -> None:
    env = AgentEnv(family=SWEFamily, agent=agent, instance_ids=[instance_id], warm_pool=warm_pool)
    times, own = [], []
    try:
        for seed in range(resets):
            if warm_pool:
                time.sleep(3)  # the episode, while the pool refills
            started = time.perf_counter()
            env.reset(seed=seed)
            times.append(time.perf_counter() - started)
            env.step(shell(agent, "true"))  # the first request is recorded as it is answered
            own.append(agent_start_to_first_request(env.trajectory))
    finally:
        env.close()
    pool = f", warm pool of {warm_pool}" if warm_pool else ""
    print(f"{agent:<12} reset to first main-turn request: median {statistics.median(times):5.2f} s  "
          f"min {min(times):5.2f} s  max {max(times):5.2f} s  ({len(times)} resets{pool})")
    print(f"{'':<12}   of which the agent's own, from its start (or its task, from the pool) to that request: median "
          f"{statistics.median(own):5.2f} s; the env's before it (the container, the agent's files, its start): "
          f"median {statistics.median(t - o for t, o in zip(times, own)):5.2f} s")


def agent_start_to_first_request(trajectory: list[dict]) -> float:
    """Seconds from the agent's start to its first main-turn request, its side calls before it included."""
    seconds = 0.0
    for record in trajectory:
        seconds += record["agent_seconds"]
        if record["side"] is None:
            return seconds
        seconds += record["policy_seconds"]
    raise ValueError("no main-turn request was recorded")


def measure_episodes(agent: str, instance_id: str, episodes: int, turns: int, warm_pool: int) -> None:
    env = AgentEnv(family=SWEFamily, agent=agent, instance_ids=[instance_id], max_turns=turns + 5, warm_pool=warm_pool)
    appended = rewritten = side_calls = ended_ok = 0
    turn_seconds: list[float] = []
    try:
        for seed in range(episodes):
            env.reset(seed=seed)
            for turn in range(turns):
                _, _, terminated, truncated, info = env.step(shell(agent, f"echo turn-{turn}"))
                if terminated or truncated:
                    break
                rewritten += bool(info["request"]["history_rewritten"])
                appended += not info["request"]["history_rewritten"]
            else:
                _, _, terminated, truncated, info = env.step("done")
                rewritten += bool(info.get("request", {}).get("history_rewritten"))
            ended_ok += bool(terminated and not truncated)
            side_calls += info["side_calls"]
            # The agent's own time per turn: running the command and sending its next request (not its start-up).
            turn_seconds += [record["agent_seconds"] for record in info["trajectory"][1:] if record["side"] is None]
    finally:
        env.close()
    total = max(appended + rewritten, 1)
    print(f"{agent:<12} {episodes} episodes x {turns} turns: {appended}/{appended + rewritten} requests appended "
          f"({100 * appended / total:.1f} %), {rewritten} rewritten ({100 * rewritten / total:.1f} per 100 turns); "
          f"side calls per episode {side_calls / episodes:.2f}; {ended_ok}/{episodes} ended by the agent; the agent's "
          f"turn: median {statistics.median(turn_seconds or [0.0]):.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", nargs="+", default=sorted(SHELL_TOOLS), choices=sorted(SHELL_TOOLS))
    parser.add_argument("--resets", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--install", action="store_true", help="also time the installs (rebuilds the derived images)")
    parser.add_argument("--instance-id", default="gymenvs-fixtures__textkit-1")
    parser.add_argument("--warm-pool", type=int, default=0,
                        help="run the resets (3 s between them for the pool to refill) and the episodes with a warm pool "
                             "of this size")
    args = parser.parse_args()
    task = next(task for task in load_tasks(FIXTURES) if task.instance_id == args.instance_id)
    print("gymenvs:", gymenvs.__file__, " load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    runtime = shared_runtime()
    for agent in args.agents:
        if args.install:
            measure_install(runtime, agent, image_for(task))
        install_agent(runtime, agent_spec(agent), [image_for(task)], progress=False)
        if args.resets:
            measure_first_request(agent, args.instance_id, args.resets, args.warm_pool)
        if args.episodes:
            measure_episodes(agent, args.instance_id, args.episodes, args.turns, args.warm_pool)
        print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)


if __name__ == "__main__":
    main()
