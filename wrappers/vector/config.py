"""The settings of a `ConcurrentVectorEnv`, checked once by pydantic at construction."""

from __future__ import annotations

import os
from typing import Annotated, Any

import pydantic
from gymnasium.vector import AutoresetMode
from pydantic import Field, StrictBool, StrictInt

from gymenvs.core.errors import ConfigError, did_you_mean, short_repr
from wrappers.vector.backend import Backend, backends

#: Environment variable giving `max_workers` when the constructor leaves it at None.
MAX_WORKERS_ENV_VAR = "GYMENVS_MAX_WORKERS"

PositiveInt = Annotated[StrictInt, Field(gt=0)]
PositiveSeconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_POSITIVE_INT_FROM_TEXT = pydantic.TypeAdapter(Annotated[int, Field(gt=0, strict=False)])


class VectorConfig(pydantic.BaseModel):
    """The settings every backend shares; see `ConcurrentVectorEnv` for what each means."""

    model_config = pydantic.ConfigDict(strict=True, frozen=True, extra="forbid")

    backend: str = "thread"
    max_workers: PositiveInt | None = None
    step_timeout_s: PositiveSeconds | None = None
    # Lax, so that gymnasium's value strings ("NextStep", "SameStep", "Disabled") are accepted too.
    autoreset_mode: Annotated[AutoresetMode, Field(strict=False)] = AutoresetMode.NEXT_STEP
    restart_on_error: StrictBool = True

    @pydantic.field_validator("backend")
    @classmethod
    def _known_backend(cls, name: str) -> str:
        if name not in backends():
            raise ValueError(f"expected one of {sorted(backends())}")
        return name

    def workers_for(self, num_envs: int) -> int:
        """How many threads, processes or actors to run: `max_workers`, else $GYMENVS_MAX_WORKERS, else one per slot."""
        chosen = self.max_workers if self.max_workers is not None else max_workers_from_environment()
        return min(chosen, num_envs) if chosen is not None else num_envs

    @property
    def backend_class(self) -> type[Backend]:
        return backends()[self.backend]


def make_config(**settings: Any) -> tuple[VectorConfig, pydantic.BaseModel]:
    """The shared settings and the chosen backend's own; a bad or unknown setting is a `ValueError`
    naming it, its value and what is allowed."""
    shared = {name: settings.pop(name) for name in VectorConfig.model_fields if name in settings}
    try:
        config = VectorConfig(**shared)
    except pydantic.ValidationError as exc:
        raise ConfigError(f"invalid ConcurrentVectorEnv setting: {describe(exc)}") from None
    model = config.backend_class.Settings
    try:
        return config, model(**settings)
    except pydantic.ValidationError as exc:
        own = ", ".join(sorted(model.model_fields)) or "none"
        raise ConfigError(
            f"invalid ConcurrentVectorEnv setting for backend={config.backend!r}: {describe(exc)}. Accepted: "
            f"{', '.join(sorted(VectorConfig.model_fields))}, and backend={config.backend!r}'s own: {own}"
        ) from None


def setting_names(backend: str) -> set[str]:
    """Every keyword that configures a vector env with this backend (the shared ones and its own)."""
    own = backends()[backend].Settings.model_fields if backend in backends() else {}
    return set(VectorConfig.model_fields) | set(own)


def _all_setting_names() -> set[str]:
    return set().union(*(setting_names(backend) for backend in backends()))


def max_workers_from_environment() -> int | None:
    raw = os.environ.get(MAX_WORKERS_ENV_VAR, "").strip()
    if not raw:
        return None
    try:
        return _POSITIVE_INT_FROM_TEXT.validate_python(raw)
    except pydantic.ValidationError:
        raise ConfigError(f"{MAX_WORKERS_ENV_VAR}={raw!r}: expected a positive integer (or leave it unset)") from None


def describe(exc: pydantic.ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        name = ".".join(str(part) for part in error["loc"]) or "value"
        if error["type"] == "extra_forbidden":
            owners = [backend for backend, model in backends().items() if name in model.Settings.model_fields]
            belongs = f" but of backend={owners[0]!r}" if owners else did_you_mean(name, _all_setting_names())
            parts.append(f"{name}={short_repr(error['input'])}: not a setting of this backend{belongs}")
        else:
            parts.append(f"{name}={error['input']!r}: {error['msg']}")
    return "; ".join(parts)
