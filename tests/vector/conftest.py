"""Fixtures of the vector env tests: the backend parameter (the session's local Ray, `ray_session`, is in tests/conftest.py).

Helpers that worker processes and Ray actors unpickle live in vector_support.py, which imports no pytest.
"""

from __future__ import annotations

import pytest
from backend_support import backend_params

from .vector_support import BACKENDS


@pytest.fixture(params=backend_params(BACKENDS))
def backend(request) -> str:
    """Each backend in turn; "ray" starts the session's local Ray first (slow: the quick lane starts no Ray)."""
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return request.param
