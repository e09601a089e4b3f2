"""Where the tests find each engine: the rootless Podman service that .ci/setup starts as an ordinary user."""

from __future__ import annotations

import pwd

import pytest

#: The ordinary user .ci/setup runs rootless Podman as (its API service on /run/user/UID/podman/podman.sock).
ROOTLESS_USER = "gymenvs-rootless"


def rootless_engine() -> str:
    """The URL of `ROOTLESS_USER`'s Podman API service (a skip, saying why, where there is no such user)."""
    try:
        uid = pwd.getpwnam(ROOTLESS_USER).pw_uid
    except KeyError:
        pytest.skip(f"no user {ROOTLESS_USER!r}: .ci/setup makes it and starts its rootless Podman service")
    return f"unix:///run/user/{uid}/podman/podman.sock"
