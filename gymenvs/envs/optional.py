"""Optional dependencies of the env families, imported when an env first needs them."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, *, extra: str, needed_by: str) -> ModuleType:
    """`module`, or an `ImportError` that names the pip extra providing it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{needed_by} needs {module.split('.')[0]}: pip install 'gymenvs[{extra}]'") from exc
