"""Vectorized envs: many isolated instances in threads or subprocesses behind one gymnasium API."""

from wrappers.vector.make import make_vector_env
from wrappers.vector.vector_env import ConcurrentVectorEnv

__all__ = ["ConcurrentVectorEnv", "make_vector_env"]
