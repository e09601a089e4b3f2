"""A minimal stand-in for `wrappers.vector.ConcurrentVectorEnv` (issue 3), used until it lands.

Thread backend only. It follows the agreed contract as far as the rollout needs it: per-slot seeds,
partial steps (`None` = leave the slot alone), and a crashed or timed-out slot truncated with
`info["error"]` and rebuilt from its factory. Delete this module when the real one is merged.
"""

from __future__ import annotations

import concurrent.futures as futures
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np


class ConcurrentVectorEnv:
    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        backend: str = "thread",
        max_workers: int | None = None,
        step_timeout_s: float | None = None,
        autoreset_mode: Any = None,
        restart_on_error: bool = True,
    ):
        if backend != "thread":
            raise ValueError(f"backend={backend!r}: the stand-in only has the thread backend")
        self._env_fns = list(env_fns)
        self.num_envs = len(self._env_fns)
        self.envs = [fn() for fn in self._env_fns]
        self._step_timeout_s = step_timeout_s
        self._pool = futures.ThreadPoolExecutor(max_workers or self.num_envs)
        self._observations = [""] * self.num_envs

    def reset(
        self, *, seed: int | Sequence[int] | None = None, options: dict | None = None
    ) -> tuple[tuple[str, ...], dict]:
        seeds = (
            list(seed)
            if isinstance(seed, Sequence)
            else [None if seed is None else seed + i for i in range(self.num_envs)]
        )
        pending = [self._pool.submit(env.reset, seed=s) for env, s in zip(self.envs, seeds)]
        infos: list[dict] = []
        for i, future in enumerate(pending):
            if future.exception() is None:
                self._observations[i], info = future.result()
            else:
                self._observations[i], info = repr(future.exception()), {"error": repr(future.exception())}
                self.envs[i] = self._env_fns[i]()
            infos.append(info)
        return tuple(self._observations), _merge_infos(infos)

    def step(self, actions: Sequence[Any]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict]:
        n = self.num_envs
        rewards, terminated, truncated = np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        infos: list[dict] = [{} for _ in range(n)]
        pending = {
            i: self._pool.submit(self.envs[i].step, action) for i, action in enumerate(actions) if action is not None
        }
        done, _ = futures.wait(pending.values(), timeout=self._step_timeout_s)
        for i, future in pending.items():
            if future in done and future.exception() is None:
                self._observations[i], rewards[i], terminated[i], truncated[i], infos[i] = future.result()
                continue
            error = repr(future.exception()) if future in done else f"step timed out after {self._step_timeout_s} s"
            truncated[i], infos[i] = True, {"error": error}
            self.envs[i] = self._env_fns[i]()
        return tuple(self._observations), rewards, terminated, truncated, _merge_infos(infos)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for env in self.envs:
            env.close()
        self.envs = []


def _merge_infos(infos: list[dict]) -> dict[str, np.ndarray]:
    merged: dict[str, np.ndarray] = {}
    for key in {key for info in infos for key in info}:
        values = np.empty(len(infos), dtype=object)
        values[:] = [info.get(key) for info in infos]
        merged[key] = values
        merged[f"_{key}"] = np.array([key in info for info in infos])
    return merged
