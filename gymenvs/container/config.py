"""The options of a container env that are not its task family's: the containers, the shell, the warm pool.

A container env's keyword arguments are split between its family (`TaskFamily.Options`: which tasks,
and what the family grades by) and its own config (`ContainerConfig`, or `AgentConfig` for the agent
envs): `split_options` does it, and an option neither knows is one `ConfigError` naming both lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError

from gymenvs.core.errors import ConfigError, config_error

if TYPE_CHECKING:
    from gymenvs.container.family import TaskFamily

#: A registry's address: a host (name or IPv4), an optional port, an optional path prefix.
REGISTRY_PATTERN = r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[a-z0-9._-]+)*$"
#: The size syntax of every size option: a number of bytes with an optional unit ("512m", "10g").
Size = Annotated[str, Field(pattern=r"^[0-9]+[bkmgBKMG]?$")]


class ContainerConfig(BaseModel):
    """What every container env takes besides its family's options. A bad value is a `ConfigError` (a
    `ValueError`) naming the option, the value and what is allowed; so is an unknown option."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, use_attribute_docstrings=True)

    pull: bool = False
    """Pull a missing image from its registry (default: no; a missing image fails at reset, saying how to
    build or pull it)."""
    registry: Annotated[str, Field(pattern=REGISTRY_PATTERN)] | None = None
    """A registry holding gymenvs' images ("host:port", or "host:port/prefix"), where a missing image is pulled
    from (as `registry/name`) and tagged under its own name, before `pull` is considered: how a cluster node gets
    the images another machine built and pushed (`--push REGISTRY` of the build commands; docs/cluster.md)."""
    pids_limit: PositiveInt = 512
    """Processes allowed in each container."""
    unenforced_limits: Literal["refuse", "run_without"] = "refuse"
    """What to do when the runtime cannot enforce a resource limit (memory, cpus, pids: rootless Podman on cgroup v1
    sets none, `Runtime.unenforced`): "refuse" (the first reset raises `LimitsNotEnforced`, saying which and why)
    or "run_without" them (`info["runtime"]["unenforced"]` says which the containers did not get)."""
    output_limit: Annotated[int, Field(ge=256, le=1 << 20)] = 10_000
    """Bytes of a command's output shown to the agent (its head and tail)."""
    warm_pool: Annotated[int, Field(ge=0, le=256)] = 0
    """Containers kept started ahead of time per image (0: none), so that `reset` does not wait for the
    engine; each serves one episode only. An agent env's have each their own channel directory (see
    docs/swe-warm-pool.md)."""
    command_timeout_s: PositiveFloat = 60.0
    """Seconds one bash command may run before it is stopped."""


def split_options(owner: str, options: Mapping[str, Any], family_options: Iterable[str],
                  config_class: type[ContainerConfig], named: Iterable[str] = ()) -> tuple[dict[str, Any], ContainerConfig]:
    """`options` split into the family's (by name) and the env's validated config; `ConfigError` naming an
    option neither takes, with both lists and the `named` arguments the constructor takes itself."""
    family_names = frozenset(family_options)
    ours = {name: value for name, value in options.items() if name not in family_names}
    try:
        config = config_class(**ours)
    except ValidationError as exc:
        raise config_error(owner, exc, family_names | frozenset(config_class.model_fields) | frozenset(named)) from None
    return {name: value for name, value in options.items() if name in family_names}, config


def check_no_family_options(owner: str, options: Mapping[str, Any], family: TaskFamily) -> None:
    """`ConfigError` for options of a family given beside a family object that already holds its own."""
    clashing = sorted(set(options) & family.option_names())
    if clashing:
        raise ConfigError(f"{owner} got {', '.join(clashing)} beside family={family!r}: give the family's options to "
                          f"the family ({type(family).__name__}({clashing[0]}=...)), or name the family by its class")
