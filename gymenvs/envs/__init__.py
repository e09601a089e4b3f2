"""The built-in environments, one module each. Registration lives in `gymenvs.registry`."""
