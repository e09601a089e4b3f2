"""Episodes per minute of gymenvs/SWEAgent-v0, and where the wall time goes.

    python examples/benchmarks/swe_agent_throughput.py [--slots 1 4 8] [--seconds 60] [--turns 10] [--warm-pool 0]
                                                       [--policy-seconds 0]

Each slot is a thread with its own env (the reference agent in the task's container, interception mode), playing
episodes back to back on the fixture tasks in turn for `--seconds` (the episode under way is finished). The policy
is scripted: `--turns` replies, the agent's bash tool looking around the repository, then the task's gold patch,
`git diff --stat`, and `submit` (so every episode should score 1); each reply takes `--policy-seconds` to
build (a sleep standing in for a model's generation; 0 by default). Prints, per slot count, the episodes per minute
and the share of the slots' time in:

- gymenvs: reset (the container, the agent's files and process; not the agent's own start-up), the steps' host
  side and channel (a step's wall time less the agent's time for that call), grading (the `submit` step: the
  agent exits, the diff is taken, the tests run in a fresh container), and cleanup (`close`);
- the agent: its start-up to its first request, and its turns (running the command, sending the next request), as
  the env records them (`info["trajectory"][i]["agent_seconds"]`);
- the policy: building each action.

It also prints the host's CPU time per episode: every process's on this machine (the engine's, the containers',
gymenvs's), busy time from /proc/stat over the run, divided by the episodes; what bounds the episodes per minute once
the slots keep every core busy.

Needs a Docker engine and the fixture images. Prints figures; nothing is asserted.
"""

from __future__ import annotations

import argparse
import collections
import os
import threading
import time

import gymnasium as gym

import gymenvs  # noqa: F401  (registers the envs)
from gymenvs.swe.tasks import load_tasks

LOOKS = ("ls", "git log --oneline -3", "git status --short", "grep -rn 'def ' --include='*.py' . | head -20",
         "find . -name '*.py' -not -path './.git/*' | head -20", "python3 -c 'import sys; print(sys.version)'",
         "head -40 \"$(git ls-files '*.py' | head -1)\"")
SUBMIT = {"name": "submit", "arguments": {}}
PARTS = ("reset", "host and channel", "grading", "cleanup", "agent start-up", "agent turns", "policy")


def bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command}}


def script(patch: str, turns: int) -> list[dict]:
    """`turns` replies: looks around, the gold patch, the diff, submit."""
    looks = [bash(LOOKS[i % len(LOOKS)]) for i in range(max(0, turns - 3))]
    apply = bash(f"cat > /tmp/gold.patch <<'GYMENVS_PATCH_END'\n{patch}GYMENVS_PATCH_END\ngit apply /tmp/gold.patch")
    return (looks + [apply, bash("git diff --stat"), SUBMIT])[-turns:]


class Slot(threading.Thread):
    """Plays episodes back to back until `stop_at`, adding up where its time went."""

    def __init__(self, index: int, tasks: list, turns: int, stop_at: float, warm_pool: int, policy_seconds: float):
        super().__init__(name=f"slot-{index}")
        self.index, self.tasks, self.turns, self.stop_at, self.warm_pool = index, tasks, turns, stop_at, warm_pool
        self.policy_seconds = policy_seconds
        self.seconds: collections.Counter[str] = collections.Counter()
        self.episodes = self.rewards = 0
        self.failed: list[str] = []

    def run(self) -> None:
        env = gym.make("gymenvs/SWEAgent-v0", warm_pool=self.warm_pool)
        try:
            episode = self.index
            while time.monotonic() < self.stop_at:
                self.play(env, self.tasks[episode % len(self.tasks)])
                episode += 1
        finally:
            started = time.monotonic()
            env.close()
            self.seconds["cleanup"] += time.monotonic() - started

    def play(self, env, task) -> None:
        started = time.monotonic()
        _, info = env.reset(options={"instance_id": task.instance_id})
        self.seconds["reset"] += time.monotonic() - started
        actions, terminated = iter(script(task.patch, self.turns)), False
        while not terminated:
            began = time.monotonic()
            action = next(actions, SUBMIT)
            time.sleep(self.policy_seconds)
            stepped = time.monotonic()
            _, reward, terminated, truncated, info = env.step(action)
            ended = time.monotonic()
            self.seconds["policy"] += stepped - began
            terminated = terminated or truncated
            self.seconds["grading" if terminated else "host and channel"] += ended - stepped
        self.count(info, reward)

    def count(self, info: dict, reward: float) -> None:
        calls = [record for record in info["trajectory"] if record["side"] is None]
        self.seconds["agent start-up"] += calls[0]["agent_seconds"]
        self.seconds["reset"] -= calls[0]["agent_seconds"]
        turns = sum(record["agent_seconds"] for record in calls[1:])
        self.seconds["agent turns"] += turns
        self.seconds["host and channel"] -= turns
        self.episodes += 1
        self.rewards += reward == 1.0
        if reward != 1.0:
            self.failed.append(f"{info.get('outcome')}/{info.get('outcome_reason')}: {info.get('error')}")


def host_busy_seconds() -> float:
    """CPU seconds this host's cores have spent busy since boot (/proc/stat: all but idle and I/O wait)."""
    with open("/proc/stat") as stat:
        ticks = [int(field) for field in stat.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def measure(slots: int, tasks: list, seconds: float, turns: int, warm_pool: int, policy_seconds: float) -> None:
    load_before, busy_before = os.getloadavg()[0], host_busy_seconds()
    started = time.monotonic()
    players = [Slot(i, tasks, turns, started + seconds, warm_pool, policy_seconds) for i in range(slots)]
    for player in players:
        player.start()
    for player in players:
        player.join()
    elapsed = time.monotonic() - started
    total = sum((player.seconds for player in players), collections.Counter())
    episodes = sum(player.episodes for player in players)
    solved = sum(player.rewards for player in players)
    spent = sum(total[part] for part in PARTS)
    gymenvs_share = sum(total[part] for part in PARTS[:4]) / spent
    print(f"{slots} slot(s): {episodes} episodes ({solved} scored 1) in {elapsed:.1f} s = "
          f"{episodes / elapsed * 60:.1f} episodes/min; load average {load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    print(f"  share of the slots' time: gymenvs {gymenvs_share:.0%} ("
          + ", ".join(f"{part} {total[part] / spent:.0%}" for part in PARTS[:4]) + "); "
          + ", ".join(f"{part} {total[part] / spent:.0%}" for part in PARTS[4:]))
    print("  seconds per episode: " + ", ".join(f"{part} {total[part] / max(episodes, 1):.3f}" for part in PARTS))
    print(f"  the host's CPU time per episode (every process, {os.cpu_count()} cores): "
          f"{(host_busy_seconds() - busy_before) / max(episodes, 1):.3f} s")
    for player in players:
        for failure in player.failed:
            print(f"  {player.name} did not score 1: {failure}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--seconds", type=float, default=60.0, help="per slot count; the episodes under way finish")
    parser.add_argument("--turns", type=int, default=10, help="replies per episode, submit included (at least 3)")
    parser.add_argument("--warm-pool", type=int, default=0, help="each env's warm pool size (0: none)")
    parser.add_argument("--policy-seconds", type=float, default=0.0, help="seconds each reply takes to build (a sleep)")
    args = parser.parse_args()
    if args.turns < 3:
        parser.error(f"--turns must be at least 3 (the patch, the diff, submit), got {args.turns}")
    tasks = list(load_tasks())
    print("gymenvs from", os.path.dirname(gymenvs.__file__), flush=True)
    for slots in args.slots:
        measure(slots, tasks, args.seconds, args.turns, args.warm_pool, args.policy_seconds)


if __name__ == "__main__":
    main()
