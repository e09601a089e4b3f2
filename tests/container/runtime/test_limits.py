"""Resource limits a runtime cannot enforce (`Runtime.unenforced`: rootless Podman on cgroup v1 sets none): a container
asking one is refused, saying which and why, or runs without it when its limits say so (`Limits.unenforced_limits`);
and where `runtime="podman"` looks for its engine. No engine here: tests/container/runtime/test_conformance.py runs
both on each engine."""

from __future__ import annotations

import pytest

from gymenvs.container.runtime import Limits, LimitsNotEnforced
from gymenvs.container.runtime.base import enforceable
from gymenvs.container.runtime.podman import DEFAULT_ENGINE, default_engine

NO_CGROUP = "no cgroup of its own"
ROOTLESS_V1 = dict.fromkeys(("mem_limit", "cpus", "pids_limit"), NO_CGROUP)


def test_limits_a_runtime_enforces_are_given_unchanged():
    limits = Limits(mem_limit="1g")
    assert enforceable(limits, {}, "docker") is limits


def test_a_limit_the_runtime_cannot_enforce_is_refused_naming_each_and_why_and_how_to_run_without():
    with pytest.raises(LimitsNotEnforced) as refused:
        enforceable(Limits(mem_limit="1g", cpus=2.0, pids_limit=None), ROOTLESS_V1, "podman")
    message = str(refused.value)
    assert "mem_limit='1g', cpus=2.0:" in message and "pids_limit" not in message  # none asked: nothing to refuse
    assert NO_CGROUP in message and "unenforced_limits='run_without'" in message


def test_told_to_run_without_them_only_the_limits_it_cannot_enforce_are_left_out():
    limits = Limits(mem_limit="1g", cpus=2.0, disk_limit=5 << 20, unenforced_limits="run_without")
    given = enforceable(limits, {"mem_limit": NO_CGROUP}, "podman")
    assert (given.mem_limit, given.cpus, given.pids_limit, given.disk_limit) == (None, 2.0, 512, 5 << 20)


@pytest.mark.parametrize(("environ", "uid", "engine"), [
    ({"CONTAINER_HOST": "tcp://10.0.0.5:8080", "XDG_RUNTIME_DIR": "/run/user/1000"}, 1000, "tcp://10.0.0.5:8080"),
    ({"XDG_RUNTIME_DIR": "/run/user/1000"}, 0, DEFAULT_ENGINE),
    ({"XDG_RUNTIME_DIR": "/run/user/1000"}, 1000, "unix:///run/user/1000/podman/podman.sock"),
    ({}, 1001, "unix:///run/user/1001/podman/podman.sock"),
], ids=["CONTAINER_HOST", "root", "a user", "a user without XDG_RUNTIME_DIR"])
def test_podman_without_an_engine_reaches_container_host_else_roots_service_else_the_users_own(environ, uid, engine):
    assert default_engine(environ, uid) == engine
