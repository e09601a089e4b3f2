"""Env ids of envs that a user's own module registers: `module:EnvId` ids, `--import`, and worker processes.

`find_spec("pkg.envs:Counting-v0")` imports `pkg.envs` (which registers `Counting-v0`) and returns the
spec, as `gymnasium.make` does with such an id; an unknown id is a `ValueError` with the close matches.

A vector env's worker process or Ray actor starts with only gymnasium's and gymenvs' ids registered, and
`sys.path` may not reach the user's module there (a Ray actor started before it was added, a forkserver).
`worker_registrations()` takes every other id registered in this process, with the folders their modules
were imported from; the worker `install()`s them before it loads its env factories, so a factory that
makes such an env by id (or a spec naming the user's class) works under every start method and backend.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pickle
import re
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec


def split_env_id(env_id: str) -> tuple[str | None, str]:
    """`("pkg.envs", "Counting-v0")` for `"pkg.envs:Counting-v0"`, `(None, env_id)` for an id without a module."""
    module, sep, name = env_id.partition(":")
    return (module, name) if sep else (None, env_id)


def import_env_modules(modules: Iterable[str]) -> None:
    """Import modules that register envs; one that cannot be found is a `ValueError` naming it."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            raise ValueError(f"cannot import {module!r} to register its envs: {exc} (is its folder on sys.path?)") from None


def find_spec(env_id: str | EnvSpec) -> EnvSpec:
    """The spec of `env_id`, importing its module first for a `module:EnvId` id; `ValueError` when it is not registered."""
    if isinstance(env_id, EnvSpec):
        return env_id
    if not isinstance(env_id, str):
        raise TypeError(f"env_id={env_id!r}: expected an env id (str) or an EnvSpec")
    module, name = split_env_id(env_id)
    if module is not None:
        import_env_modules([module])
    spec = gym.registry.get(name)
    if spec is None:
        raise ValueError(unknown_id_message(name, module))
    return spec


def unknown_id_message(env_id: str, module: str | None = None) -> str:
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
    hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
    if module is not None:
        return f"env id {env_id!r} is not registered by importing {module!r}{hint}"
    if env_id.startswith("gymenvs/"):
        gymenvs_ids = [spec.id for spec in gym.registry.values() if _ships_with_gymenvs(spec)]
        return f"env id {env_id!r} is not registered{hint}; gymenvs envs are {gymenvs_ids}"
    return (
        f"env id {env_id!r} is not registered{hint}; import the module that registers it first, "
        f"or name it in the id as 'module:{env_id}' (gymenvs' CLI: --import MODULE)"
    )


def entry_point_module(spec: EnvSpec) -> str | None:
    """The module the spec's entry point lives in."""
    entry_point = spec.entry_point
    if isinstance(entry_point, str):
        return entry_point.partition(":")[0]
    return getattr(entry_point, "__module__", None)


def user_env_ids() -> list[str]:
    """The ids registered in this process that neither gymnasium nor gymenvs ships: a user's own envs."""
    return [
        spec.id
        for spec in gym.registry.values()
        if not _ships_with_gymenvs(spec) and (entry_point_module(spec) or "").partition(".")[0] != "gymnasium"
    ]


@dataclass(frozen=True)
class WorkerRegistrations:
    """The ids a worker must register that `import gymenvs` does not, and where their modules are."""

    #: Folders the specs' modules were imported from, appended to the worker's `sys.path` when missing.
    search_path: tuple[str, ...]
    #: The specs, cloudpickled, so they are only unpickled once `search_path` is in place.
    specs: bytes

    def install(self) -> None:
        """Make the folders importable and register every id not registered here yet."""
        for folder in self.search_path:
            if folder not in sys.path:
                sys.path.append(folder)
        specs: list[EnvSpec] = pickle.loads(self.specs)
        missing = [spec for spec in specs if spec.id not in gym.registry]
        for spec in missing:
            gym.registry[spec.id] = spec
        if missing:  # the user's module registers its ids again when a factory imports it: that is expected
            pattern = "|".join(re.escape(spec.id) for spec in missing)
            warnings.filterwarnings("ignore", message=rf".*Overriding environment ({pattern}) already in registry")


def worker_registrations() -> WorkerRegistrations:
    """Every id registered in this process except gymenvs' own, for a worker to `install`."""
    import cloudpickle

    specs = [_portable(spec) for spec in gym.registry.values() if not _ships_with_gymenvs(spec)]
    folders = {_import_root(module) for spec in specs if (module := entry_point_module(spec))}
    return WorkerRegistrations(tuple(sorted(folder for folder in folders if folder)), cloudpickle.dumps(specs))


def _ships_with_gymenvs(spec: EnvSpec) -> bool:
    return spec.namespace == "gymenvs" and isinstance(spec.entry_point, str) and spec.entry_point.startswith("gymenvs.")


def _portable(spec: EnvSpec) -> EnvSpec:
    """The spec with a class entry point named by its module instead, so that unpickling it imports nothing."""
    entry_point = spec.entry_point
    module, qualname = getattr(entry_point, "__module__", None), getattr(entry_point, "__qualname__", "")
    if callable(entry_point) and module not in (None, "__main__") and "<locals>" not in qualname:
        return replace(spec, entry_point=f"{module}:{qualname}")
    return spec


def _import_root(module: str) -> str | None:
    """The `sys.path` folder `module`'s top-level package or module is imported from (None when not from a folder)."""
    top = module.partition(".")[0]
    if top in sys.builtin_module_names or top == "__main__":
        return None
    loaded: Any = sys.modules.get(top)
    try:
        found = loaded.__spec__ if loaded is not None else importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if found is None:
        return None
    if found.submodule_search_locations:  # a package: the folder holding its folder
        return str(Path(next(iter(found.submodule_search_locations))).parent)
    if found.origin and found.has_location:
        return str(Path(found.origin).parent)
    return None
