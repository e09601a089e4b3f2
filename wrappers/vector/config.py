"""The settings of a `ConcurrentVectorEnv`, checked once by pydantic at construction."""

from __future__ import annotations

import os
from typing import Annotated, Literal

import pydantic
from gymnasium.vector import AutoresetMode
from pydantic import Field, StrictBool, StrictInt

#: Environment variable giving `max_workers` when the constructor leaves it at None.
MAX_WORKERS_ENV_VAR = "GYMENVS_MAX_WORKERS"

PositiveInt = Annotated[StrictInt, Field(gt=0)]
PositiveSeconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_POSITIVE_INT_FROM_TEXT = pydantic.TypeAdapter(Annotated[int, Field(gt=0, strict=False)])


class VectorConfig(pydantic.BaseModel):
    """See `ConcurrentVectorEnv` for what each setting means."""

    model_config = pydantic.ConfigDict(strict=True, frozen=True, extra="forbid")

    backend: Literal["thread", "process"] = "thread"
    max_workers: PositiveInt | None = None
    step_timeout_s: PositiveSeconds | None = None
    # Lax, so that gymnasium's value strings ("NextStep", "SameStep", "Disabled") are accepted too.
    autoreset_mode: Annotated[AutoresetMode, Field(strict=False)] = AutoresetMode.NEXT_STEP
    restart_on_error: StrictBool = True
    start_method: Literal["forkserver", "spawn", "fork"] | None = None
    pin_threads: StrictBool = True

    def workers_for(self, num_envs: int) -> int:
        """How many threads or processes to run: `max_workers`, else $GYMENVS_MAX_WORKERS, else one per slot."""
        chosen = self.max_workers if self.max_workers is not None else max_workers_from_environment()
        return min(chosen, num_envs) if chosen is not None else num_envs


def make_config(**settings: object) -> VectorConfig:
    """A `VectorConfig`; a bad value is a `ValueError` naming the setting, the value and what is allowed."""
    try:
        return VectorConfig(**settings)
    except pydantic.ValidationError as exc:
        raise ValueError(f"invalid ConcurrentVectorEnv setting: {describe(exc)}") from None


def max_workers_from_environment() -> int | None:
    raw = os.environ.get(MAX_WORKERS_ENV_VAR, "").strip()
    if not raw:
        return None
    try:
        return _POSITIVE_INT_FROM_TEXT.validate_python(raw)
    except pydantic.ValidationError:
        raise ValueError(f"{MAX_WORKERS_ENV_VAR}={raw!r}: expected a positive integer (or leave it unset)") from None


def describe(exc: pydantic.ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        name = ".".join(str(part) for part in error["loc"]) or "value"
        parts.append(f"{name}={error['input']!r}: {error['msg']}")
    return "; ".join(parts)
