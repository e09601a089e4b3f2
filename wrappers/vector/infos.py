"""Batching per-slot info dicts into gymnasium's dict-of-arrays convention.

For each key, an array over the slots plus a boolean mask `_key` saying which slots have it:
`bool`, `int`, `float` and numpy scalars give typed arrays, numpy arrays are stacked, anything
else (text, lists, ...) gives an object array; nested dicts are batched the same way. This is what
`gymnasium.vector.VectorEnv._add_info` produces, built in one pass over the slots that have infos.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np


def batch_infos(infos: Iterable[tuple[int, dict[str, Any]]], num_envs: int) -> dict[str, Any]:
    """`infos` is `(slot index, info)` pairs; slots that are absent have every mask entry False."""
    batched: dict[str, Any] = {}
    for index, info in infos:
        if info:
            _add(batched, info, index, num_envs)
    return batched


def _add(batched: dict[str, Any], info: dict[str, Any], index: int, num_envs: int) -> None:
    for key, value in info.items():
        if isinstance(value, dict):
            _add(batched.setdefault(key, {}), value, index, num_envs)
        else:
            array = batched.get(key)
            if array is None:
                array = batched[key] = _empty_batch(value, num_envs)
            try:
                array[index] = value
            except (TypeError, ValueError):  # another type than the first slot's (an int here, None there)
                array = batched[key] = array.astype(object)
                array[index] = value
        mask = batched.get(f"_{key}")
        if mask is None:
            mask = batched[f"_{key}"] = np.zeros(num_envs, dtype=np.bool_)
        mask[index] = True


def _empty_batch(value: Any, num_envs: int) -> np.ndarray:
    if type(value) in (bool, int, float) or isinstance(value, np.number | np.bool_):
        return np.zeros(num_envs, dtype=type(value))
    if isinstance(value, np.ndarray):
        return np.zeros((num_envs, *value.shape), dtype=value.dtype)
    return np.full(num_envs, None, dtype=object)
