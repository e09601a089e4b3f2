"""The backends moved to `wrappers.vector.backends`; their old paths keep working for one release."""

from __future__ import annotations

import importlib
import pickle
import sys

import pytest

import wrappers.vector  # noqa: F401  registers the old paths

MOVED = ["threads", "dedicated", "processes", "ray_actors", "hosts"]


@pytest.mark.parametrize("name", MOVED)
def test_an_old_backend_path_imports_the_moved_module_itself_and_warns(name, monkeypatch):
    new = importlib.import_module(f"wrappers.vector.backends.{name}")
    monkeypatch.delitem(sys.modules, f"wrappers.vector.{name}", raising=False)
    with pytest.warns(DeprecationWarning, match=f"wrappers.vector.{name} moved to wrappers.vector.backends.{name}"):
        old = importlib.import_module(f"wrappers.vector.{name}")
    assert old is new


def test_a_pickle_that_names_an_old_path_loads_the_moved_object(monkeypatch):
    """What a factory pickled by the previous release holds: a reference by module path and name."""
    from wrappers.vector.backends.ray_actors import release_idle_actors

    monkeypatch.delitem(sys.modules, "wrappers.vector.ray_actors", raising=False)
    with pytest.warns(DeprecationWarning):
        loaded = pickle.loads(b"cwrappers.vector.ray_actors\nrelease_idle_actors\n.")
    assert loaded is release_idle_actors
