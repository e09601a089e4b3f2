"""`bench()`: how fast an env runs under a policy, in one env or in a vector env of several.

`gymenvs bench` is this module on the command line. It plays `episodes` episodes (or `steps` steps)
and times every `step` call: one env's step, or one step of the vector env over all its slots. The
wall time runs from the first reset to the last step (building the env is not timed); the policy's
own time counts in it, not in the step latencies. With `episodes`, a vector env stops at the step
in which the count is reached, so a few more may have ended. Episode i of one env uses
seed `seed + i`; a vector env resets slot k with seed `seed + k` and then autoresets (no seed).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from gymenvs.eval.evaluate import summary_table
from gymenvs.eval.policies.base import Conversation, Policy

BACKENDS = ("thread", "process", "ray")


@dataclass(frozen=True)
class BenchSummary:
    """What `bench()` returns and `gymenvs bench` prints. Latencies are of one `step` call, in seconds."""

    env_id: str
    policy: str
    num_envs: int | None  # None: one env, made with gymnasium.make
    backend: str | None
    episodes: int
    steps: int
    wall_time_s: float
    step_latencies_s: tuple[float, ...]

    def table(self) -> str:
        latencies_ms = [1000 * latency for latency in self.step_latencies_s] or [0.0]
        mean_ms, p99_ms = statistics.fmean(latencies_ms), float(np.percentile(latencies_ms, 99))
        what = "one env" if self.num_envs is None else f"vector env, {self.num_envs} slots on backend={self.backend!r}"
        rows = [
            ("env", f"{self.env_id} ({what})"),
            ("policy", self.policy),
            ("episodes", str(self.episodes)),
            ("steps", str(self.steps)),
            ("steps/s", f"{self.steps / self.wall_time_s:.1f}" if self.wall_time_s else "inf"),
            ("episodes/s", f"{self.episodes / self.wall_time_s:.2f}" if self.wall_time_s else "inf"),
            ("step latency", f"mean {mean_ms:.3f} ms, p99 {p99_ms:.3f} ms ({len(self.step_latencies_s)} step calls)"),
            ("wall time", f"{self.wall_time_s:.2f} s"),
        ]
        return summary_table(rows)


def bench(
    env_id: str,
    policy: Policy,
    *,
    episodes: int | None = None,
    steps: int | None = None,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    num_envs: int | None = None,
    backend: str = "thread",
) -> BenchSummary:
    """Play `policy` on `env_id` until `episodes` episodes have ended or `steps` steps were taken (give one).

    Args:
        env_kwargs: keyword arguments for the env.
        num_envs: None plays one env from `gymnasium.make`; a number plays a vector env of that many
            slots from `gymnasium.make_vec` on `backend` ("thread", "process" or "ray").
    """
    if (episodes is None) == (steps is None):
        raise ValueError(f"episodes={episodes}, steps={steps}: give one of them")
    for name, value in (("episodes", episodes), ("steps", steps), ("num_envs", num_envs)):
        if value is not None and (type(value) is not int or value < 1):
            raise ValueError(f"{name}={value!r}: expected a whole number of at least 1")
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: expected one of {', '.join(BACKENDS)}")
    limit = _Limit(episodes, steps)
    if num_envs is None:
        latencies = _bench_one(env_id, env_kwargs or {}, policy, seed, limit)
    else:
        latencies = _bench_vector(env_id, env_kwargs or {}, policy, seed, limit, num_envs, backend)
    return BenchSummary(env_id, policy.name, num_envs, backend if num_envs is not None else None,
                        limit.episodes, limit.steps, limit.stopped - limit.started, tuple(latencies))


@dataclass
class _Limit:
    """Counts episodes and steps, and says when the bench is done."""

    max_episodes: int | None
    max_steps: int | None
    episodes: int = 0
    steps: int = 0
    started: float = 0.0  # the wall clock counts from the first reset (building the env is not timed) to the last step
    stopped: float = 0.0

    @property
    def reached(self) -> bool:
        if self.max_episodes is not None:
            return self.episodes >= self.max_episodes
        return self.steps >= (self.max_steps or 0)


def _timed(step: Callable[[Any], Any], actions: Any, latencies: list[float]) -> Any:
    start = time.perf_counter()
    result = step(actions)
    latencies.append(time.perf_counter() - start)
    return result


def _bench_one(env_id: str, env_kwargs: dict[str, Any], policy: Policy, seed: int, limit: _Limit) -> list[float]:
    latencies: list[float] = []
    env = gym.make(env_id, **env_kwargs)
    limit.started = time.perf_counter()
    try:
        while not limit.reached:
            observation, info = env.reset(seed=seed + limit.episodes)
            episode = Conversation(policy.new_episode(), list(info.get("tools", [])), observation)
            ended = False
            while not ended and not limit.reached:
                action = episode.act()
                observation, _, terminated, truncated, _ = _timed(env.step, action, latencies)
                episode.observe(action, observation)
                limit.steps += 1
                ended = terminated or truncated
            limit.episodes += ended
        limit.stopped = time.perf_counter()
    finally:
        env.close()
    return latencies


def _bench_vector(
    env_id: str, env_kwargs: dict[str, Any], policy: Policy, seed: int, limit: _Limit, num_envs: int, backend: str
) -> list[float]:
    latencies: list[float] = []
    from gymenvs.registry import make_vec

    envs = make_vec(env_id, num_envs, backend=backend, autoreset_mode="SameStep", **env_kwargs)
    limit.started = time.perf_counter()
    try:
        observations, infos = envs.reset(seed=seed)  # slot k: seed + k
        tools = [list(slot_tools) for slot_tools in infos.get("tools", [[]] * num_envs)]
        episodes = [Conversation(policy.new_episode(), tools[slot], observations[slot]) for slot in range(num_envs)]
        while not limit.reached:
            actions = [episode.act() for episode in episodes]
            observations, _, terminated, truncated, _ = _timed(envs.step, actions, latencies)
            limit.steps += num_envs
            for slot, episode in enumerate(episodes):
                if terminated[slot] or truncated[slot]:  # same-step autoreset: the observation starts the next episode
                    limit.episodes += 1
                    episodes[slot] = Conversation(policy.new_episode(), tools[slot], observations[slot])
                else:
                    episode.observe(actions[slot], observations[slot])
        limit.stopped = time.perf_counter()
    finally:
        envs.close()
    return latencies

