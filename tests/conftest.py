"""Fixtures shared by every test folder: the real Docker engine (as the runtime gymenvs uses, and as a plain
client that observes and attacks from outside) and the fixture images of both task families."""

from __future__ import annotations

import gc
import os

import pytest

if "PYTEST_XDIST_WORKER" in os.environ:
    # Under `-n 2` each worker's torch would start a thread per core: four busy threads on two cores, whose
    # spin-waits cost more than they gain (tests/trl/rollout/test_model_families.py on two workers, under other
    # load: 52 s of CPU with the default, 31 s with one thread each). Set before collection imports torch.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def runtime():
    """The process's Docker runtime, as the envs use it; the tests that need one skip, saying why, when no engine answers."""
    from gymenvs.container.runtime import SandboxError, shared_runtime

    try:
        return shared_runtime("docker")
    except SandboxError as exc:
        pytest.skip(f"no Docker engine can run here: {exc}")


@pytest.fixture(scope="session")
def docker_client(runtime):
    """A plain docker SDK client of the same engine: what a test uses to look at, or break, containers from outside."""
    import docker

    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture(scope="session")
def swe_images(runtime):
    """The base and fixture images (built if missing: about a minute for the base, offline from apt's mirror)."""
    from gymenvs.container.images import BASE_IMAGE, build_base_image
    from gymenvs.swe.images import build_fixture_images

    build_base_image(runtime, tag=BASE_IMAGE, progress=False)
    build_fixture_images(runtime, base=BASE_IMAGE, progress=False)
    return BASE_IMAGE


@pytest.fixture
def make_env(swe_images):
    """Build SWE-v0 envs for a test (a command may run 20 s) and close them all afterwards."""
    from env_support import envs_made

    with envs_made("gymenvs/SWE-v0", command_timeout_s=20.0) as make:
        yield make


@pytest.fixture(scope="session")
def ray_session():
    """One small local Ray for the whole session, shared by every test folder (it takes seconds to start)."""
    from vector.vector_support import local_ray  # as tests/vector imports it (pytest puts tests/ on sys.path)

    with local_ray():
        yield


@pytest.fixture(scope="session")
def pushed_registry(swe_images, docker_client):
    """A local registry holding the SWE base and fixture images, pushed by `swe build-images --push` once for the
    session: the registry test and the Ray cluster test share it (each push of the base image takes about 20 s).
    At the end the push's names (`registry/...`) are removed from the first engine; the images stay."""
    from cluster_support import local_registry, push_swe_images

    with local_registry() as registry:
        try:
            yield push_swe_images(registry)
        finally:
            for name in (tag for image in docker_client.images.list() for tag in image.tags):
                if name.startswith(f"{registry}/"):
                    docker_client.images.remove(name)


@pytest.fixture(scope="session")
def terminal_images(runtime, swe_images):
    """The images of the Harbor fixture tasks (gymenvs/terminal/fixtures), built on the base image; their names."""
    from gymenvs.terminal.images import ensure_task_image
    from gymenvs.terminal.tasks import load_terminal_tasks

    return {task.name: ensure_task_image(runtime, task) for task in load_terminal_tasks()}


@pytest.fixture(scope="session")
def _tiny():
    """The tiny offline model and tokenizer, built once per session (training its tokenizer takes ~10 s):
    tests/trl and tests/test_user_env.py share it. Copy the model before training it."""
    from wrappers.trl.extras.tiny_model import tiny_model

    return tiny_model(seed=0)


# -- the quick lane -------------------------------------------------------------------------------
# `pytest -m "not docker and not slow"` runs no engine: a test that asks for the engine's fixtures is a docker
# test whether or not its module says so.

ENGINE_FIXTURES = frozenset({"runtime", "docker_client", "swe_images", "terminal_images", "make_env"})


def pytest_collection_modifyitems(items):
    for item in items:
        if ENGINE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.docker)


# -- the engine's tests on two workers ------------------------------------------------------------
# `pytest -m docker -n 2 --dist loadfile` keeps each file on one worker (its module fixtures, its images), and the tests
# look only at what their own process made: another worker shares the engine. The files below share what is not
# anyone's own (the second engine's socket and bridge, by fixed name), so they run on one worker, one after the other.

SHARED_WORKER = frozenset({"tests/container/test_registry.py", "tests/vector/test_ray_cluster.py"})


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LoadFileSharing(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "the second engine" if scope in SHARED_WORKER else scope

    return LoadFileSharing(config, log)


# -- the garbage collector ----------------------------------------------------------------------
# Collection imports torch, transformers, TRL and the SDKs: millions of objects, all alive to the end, no garbage.
# Full collections while they are made are pure cost, and every later one walks them again: accelerate calls
# `gc.collect()` at the end of each `Trainer.train`, about 0.25 s apiece once collection is done. So collection
# runs with the collector off, and what it built is frozen (left out of every later collection).


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    gc.disable()
    try:
        return (yield)
    finally:
        gc.freeze()
        gc.enable()


# -- the linters run beside the tests -------------------------------------------------------------

_LINTERS = pytest.StashKey[dict]()


def pytest_collection_finish(session):
    """Start ruff and mypy as soon as the tests are collected, if tests/test_lint.py is among them. Under xdist every
    worker collects every test: only the first starts them (two mypy runs would share one cache), and the lint tests
    read their results from files, on whichever worker they run (`lint_support`)."""
    first_worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0"
    if first_worker and any(item.path.name == "test_lint.py" for item in session.items):
        from lint_support import start_linters

        session.config.stash[_LINTERS] = start_linters()


def pytest_unconfigure(config):
    """Under xdist, let the linters finish: another worker's lint tests may still wait for them. Else stop them."""
    for process in config.stash.get(_LINTERS, {}).values():
        if "PYTEST_XDIST_WORKER" in os.environ:
            process.wait()
        else:
            from lint_support import stop

            stop(process)


# -- in CI, a skip is a failure ---------------------------------------------------------------
# `.ci/setup` installs every extra that pyproject.toml's `all` names and starts the Docker engine, so a
# test that skips there has lost a dependency it should have: CI must go red, not silently shrink.
# Only skips whose reason names a part no CI machine has (a GPU) are allowed.

ALLOWED_SKIP_REASONS = ("needs a GPU",)


def _skip_is_allowed(report) -> bool:
    reason = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)
    return any(allowed in reason for allowed in ALLOWED_SKIP_REASONS)


def _fail_skips_in_ci(report) -> None:
    if os.environ.get("CI") and report.skipped and not _skip_is_allowed(report) and not hasattr(report, "wasxfail"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where every extra is installed and the engine runs: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_skips_in_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_skips_in_ci(outcome.get_result())


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test leaves `os.environ` as it found it: TRL's vLLM colocate set-up writes RANK, WORLD_SIZE and
    MASTER_PORT there, and a training subprocess of a later test would then try to join that rendezvous."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)
