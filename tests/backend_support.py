"""The vector backends as test parameters. Ray's are marked slow: the quick lane starts no Ray (the full suite runs them)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest


def backend_params(names: Iterable[str]) -> list:
    """`names` as pytest parameters, "ray" marked slow."""
    return [pytest.param(name, marks=pytest.mark.slow) if name == "ray" else name for name in names]
