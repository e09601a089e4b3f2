"""What wraps gymenvs environments for their consumers: vectorisation and the TRL bridge."""

from wrappers.vector import ConcurrentVectorEnv

__all__ = ["ConcurrentVectorEnv"]
