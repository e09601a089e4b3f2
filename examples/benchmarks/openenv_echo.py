"""An OpenEnv echo server and client doing the same work as `gymenvs/Echo-v0`, for benchmarks.

The server side is an OpenEnv `Environment` that forwards each call to a gymenvs `EchoEnv`, so both
sides of a comparison run the same environment code; only the transport differs (FastAPI +
WebSocket, one server thread per session, in OpenEnv's case). Run the server with

    GYMENVS_ECHO_SLEEP_S=0.01 python -m uvicorn openenv_echo:app --host 127.0.0.1 --port 8765

(from this folder) and drive it with `EchoClient(base_url)`, one client per session.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import gymnasium as gym
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server import Action, Environment, Observation, State, create_app

import gymenvs  # noqa: F401  (registers gymenvs/Echo-v0)

SLEEP_ENV_VAR = "GYMENVS_ECHO_SLEEP_S"
MAX_SESSIONS_ENV_VAR = "GYMENVS_ECHO_MAX_SESSIONS"


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    echoed: str = ""


class OpenEnvEcho(Environment[EchoAction, EchoObservation, State]):
    """OpenEnv's view of gymenvs' EchoEnv: one gymenvs instance per session."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, step_sleep_s: float = 0.0):
        super().__init__()
        self._env = gym.make("gymenvs/Echo-v0", step_sleep_s=step_sleep_s, max_turns=10**9)
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
        observation, _ = self._env.reset(seed=seed)
        self._state = State(episode_id=episode_id, step_count=0)
        return EchoObservation(echoed=observation)

    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:
        observation, reward, terminated, truncated, _ = self._env.step(action.message)
        self._state.step_count += 1
        return EchoObservation(echoed=observation, reward=reward, done=terminated or truncated)

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        self._env.close()


class EchoClient(EnvClient[EchoAction, EchoObservation, State]):
    def _step_payload(self, action: EchoAction) -> dict[str, Any]:
        return {"message": action.message}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[EchoObservation]:
        observation = EchoObservation(**payload.get("observation", {}))
        return StepResult(observation=observation, reward=payload.get("reward"), done=bool(payload.get("done")))

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)


def _make_app():
    step_sleep_s = float(os.environ.get(SLEEP_ENV_VAR, "0"))
    max_sessions = int(os.environ.get(MAX_SESSIONS_ENV_VAR, "512"))
    factory = functools.partial(OpenEnvEcho, step_sleep_s)
    return create_app(factory, EchoAction, EchoObservation, env_name="echo", max_concurrent_envs=max_sessions)


app = _make_app()
