"""Vectorized envs: many isolated instances in threads or subprocesses behind one gymnasium API."""

from gymenvs._moved import alias_moved_modules
from wrappers.vector.make import make_vector_env
from wrappers.vector.vector_env import ConcurrentVectorEnv

__all__ = ["ConcurrentVectorEnv", "make_vector_env"]

# One release of the old paths: pickled factories of the process and Ray backends may name them.
alias_moved_modules(
    {
        f"wrappers.vector.{name}": f"wrappers.vector.backends.{name}"
        for name in ("threads", "dedicated", "processes", "ray_actors", "hosts")
    }
)
