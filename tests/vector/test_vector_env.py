"""ConcurrentVectorEnv: the gymnasium vector API, seeding, partial steps, autoreset, configuration.

Every behaviour is checked on the three backends (thread, process, and ray on one local Ray
shared by the whole session). Failures (exceptions, dead workers, timeouts) are in
test_failures.py, the many-episode stress test in test_stress.py.
"""

from __future__ import annotations

import functools
import gc
import os
import re
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from backend_support import backend_params
from gymnasium.error import ResetNeeded
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import PassiveEnvChecker

import gymenvs  # noqa: F401
from wrappers import ConcurrentVectorEnv
from wrappers.vector import make_vector_env
from wrappers.vector.slot import settled_step

from .vector_support import FaultyEcho, faulty_echo_vector, our_processes, our_threads

pytestmark = pytest.mark.timeout(120)

def echo_vector(backend: str, num_envs: int = 4, **settings) -> ConcurrentVectorEnv:
    return faulty_echo_vector(backend, num_envs, max_turns=3, **settings)


def wordle_secrets(vector_env: ConcurrentVectorEnv) -> list[str]:
    return [state["secret"] for state in vector_env.state()]


def single_wordle_secret(seed: int | None, **options) -> str:
    env = gym.make("gymenvs/Wordle-v0")
    env.reset(seed=seed, options=options or None)
    return env.unwrapped.state()["secret"]



# -- construction and registration ---------------------------------------------------------


def test_make_vec_builds_it_with_the_backend_and_env_kwargs(backend):
    with gym.make_vec("gymenvs/Wordle-v0", num_envs=3, backend=backend, max_guesses=2) as envs:
        assert isinstance(envs, ConcurrentVectorEnv)
        assert envs.config.backend == backend
        assert envs.num_envs == 3
        assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        assert envs.get_attr("max_guesses") == (2, 2, 2)
        assert envs.single_observation_space == gym.make("gymenvs/Wordle-v0").observation_space
        assert len(envs.observation_space) == 3
        observations, infos = envs.reset(seed=0)
        assert all(isinstance(observation, str) and "5-letter word" in observation for observation in observations)
        assert infos["_tools"].all() and infos["tools"][0][0]["function"]["name"] == "guess"


def test_make_vec_takes_a_container_envs_family_options_and_its_own():
    """SWE-v0's keywords are its family's options and its own, as `gym.make` takes them (building touches no engine)."""
    with gym.make_vec("gymenvs/SWE-v0", num_envs=2, instance_ids=["gymenvs-fixtures__romans-1"], warm_pool=1) as envs:
        assert [family.options.instance_ids for family in envs.get_attr("family")] == [("gymenvs-fixtures__romans-1",)] * 2
        assert [config.warm_pool for config in envs.get_attr("config")] == [1, 1]


def test_make_vector_env_checks_num_envs_and_passes_make_keywords_on():
    with pytest.raises(ValueError, match="num_envs=0"):
        make_vector_env("gymenvs/Echo-v0", 0)
    with make_vector_env("gymenvs/Echo-v0", 2, max_episode_steps=2) as envs:  # gymnasium's TimeLimit
        envs.reset()
        envs.step(["a", "b"])
        _, _, _, truncated, _ = envs.step(["a", "b"])
        assert truncated.all()


def test_every_gymenvs_env_has_it_as_vector_entry_point():
    for env_id in gymenvs.list_envs():
        assert gym.spec(env_id).vector_entry_point == f"wrappers.vector.registered:{env_id}"


def test_each_slot_is_its_own_instance(backend):
    with echo_vector(backend) as envs:
        ids = [who["instance_id"] for who in envs.call("whoami")]
        assert len(set(ids)) == 4
        pids = {who["pid"] for who in envs.call("whoami")}
        assert len(pids) == (1 if backend == "thread" else 4)


def test_process_backend_builds_factories_plain_pickle_cannot_handle():
    label = "closure"

    def factory():  # a local closure: plain pickle refuses it, cloudpickle does not
        env = FaultyEcho()
        env.label = label
        return env

    with ConcurrentVectorEnv([factory, lambda: FaultyEcho()], backend="process") as envs:
        assert [who["label"] for who in envs.call("whoami")] == ["closure", "default"]


@pytest.mark.slow
def test_spawned_workers_see_gymenvs_registrations():
    with ConcurrentVectorEnv([lambda: gym.make("gymenvs/Catch-v0")], backend="process", start_method="spawn") as envs:
        observations, _ = envs.reset(seed=1)
        assert "paddle" in observations[0]


# -- observations, rewards, infos ----------------------------------------------------------


def test_observations_are_the_envs_strings_not_placeholders(backend):
    """Gymnasium's AsyncVectorEnv with shared memory hands back stale '000...' placeholders for Text."""
    messages = ["héllo wörld", "日本語のテキスト", "emoji 🙂 and\nnewlines\ttabs", ""]
    with gym.make_vec("gymenvs/Echo-v0", num_envs=4, backend=backend) as envs:
        observations, _ = envs.reset(seed=0)
        assert isinstance(observations, tuple) and all("echo" in observation for observation in observations)
        for round_ in range(3):
            actions = tuple(f"{message} #{round_}" for message in messages)
            observations, rewards, terminated, truncated, infos = envs.step(actions)
            assert observations == actions
            assert rewards.dtype == np.float64 and np.all(rewards == 1.0)
            assert terminated.dtype == np.bool_ and truncated.dtype == np.bool_


def test_infos_follow_gymnasiums_dict_of_arrays_convention(backend):
    with gym.make_vec("gymenvs/Wordle-v0", num_envs=3, backend=backend) as envs:
        envs.reset(seed=0)
        _, _, _, _, infos = envs.step(["crane", "xyzzy", "slate"])
        assert infos["_greens"].tolist() == [True, False, True]
        assert infos["greens"].dtype == np.float64
        assert infos["_error"].tolist() == [False, True, False]
        assert infos["error"].dtype == object and "xyzzy" in infos["error"][1]

        sync = gym.make_vec("gymenvs/Wordle-v0", num_envs=3, vectorization_mode="sync")
        sync.reset(seed=0)
        _, _, _, _, sync_infos = sync.step(("crane", "xyzzy", "slate"))
        assert sorted(infos) == sorted(sync_infos)
        for key in infos:
            assert infos[key].dtype == sync_infos[key].dtype
            assert infos[key].tolist() == sync_infos[key].tolist()


# -- seeding -------------------------------------------------------------------------------


def test_int_seed_gives_slot_i_seed_plus_i(backend):
    with gym.make_vec("gymenvs/Wordle-v0", num_envs=4, backend=backend) as envs:
        envs.reset(seed=100)
        assert wordle_secrets(envs) == [single_wordle_secret(100 + i) for i in range(4)]
        envs.reset(seed=[7, None, 9, 7])
        secrets = wordle_secrets(envs)
        assert secrets[0] == secrets[3] == single_wordle_secret(7)
        assert secrets[2] == single_wordle_secret(9)


def test_group_size_gives_each_group_one_seed(backend):
    with gym.make_vec("gymenvs/Wordle-v0", num_envs=6, backend=backend) as envs:
        envs.reset(seed=11, options={"group_size": 3})
        assert wordle_secrets(envs) == [single_wordle_secret(11)] * 3 + [single_wordle_secret(12)] * 3
        envs.reset(options={"group_size": 2})  # no seed: each group still shares one (random) start
        secrets = wordle_secrets(envs)
        assert secrets[0] == secrets[1] and secrets[2] == secrets[3] and secrets[4] == secrets[5]


def test_other_reset_options_reach_every_env(backend):
    with gym.make_vec("gymenvs/Wordle-v0", num_envs=4, backend=backend) as envs:
        envs.reset(seed=0, options={"group_size": 2, "secret": "crane"})
        assert wordle_secrets(envs) == ["crane"] * 4
        _, rewards, terminated, _, _ = envs.step(["crane"] * 4)
        assert rewards.tolist() == [1.0] * 4 and terminated.all()


def test_reset_mask_resets_only_those_slots(backend):
    with gym.make_vec("gymenvs/Wordle-v0", num_envs=4, backend=backend) as envs:
        envs.reset(seed=0)
        observations, *_ = envs.step(["crane"] * 4)
        before = envs.state()
        mask = np.array([False, True, False, True])
        after_reset, infos = envs.reset(seed=50, options={"reset_mask": mask})
        after = envs.state()
        for i in (0, 2):
            assert after[i] == before[i] and after_reset[i] == observations[i]
        for i in (1, 3):
            assert after[i]["episode_id"] != before[i]["episode_id"] and after[i]["step_count"] == 0
            assert after[i]["secret"] == single_wordle_secret(50 + i)
        assert infos["_tools"].tolist() == mask.tolist()


# -- partial steps and autoreset -----------------------------------------------------------


def test_none_action_leaves_a_slot_untouched(backend):
    with echo_vector(backend) as envs:
        envs.reset(seed=0)
        envs.step(["a", "b", "c", "d"])
        before = envs.state()
        observations, rewards, terminated, truncated, infos = envs.step(["x", None, "y", None])
        assert observations == ("x", "b", "y", "d")
        assert rewards.tolist() == [1.0, 0.0, 1.0, 0.0]
        assert not terminated.any() and not truncated.any()
        after = envs.state()
        assert [state["step_count"] for state in after] == [2, 1, 2, 1]
        assert after[1] == before[1] and after[3] == before[3]
        assert all(not mask[[1, 3]].any() for key, mask in infos.items() if key.startswith("_"))


def test_next_step_autoreset(backend):
    with echo_vector(backend, num_envs=2, autoreset_mode="NextStep") as envs:
        envs.reset(seed=0)
        for _ in range(2):
            envs.step(["a", "b"])
        observations, rewards, _, truncated, infos = envs.step(["c", None])  # slot 0 reaches max_turns=3
        assert truncated.tolist() == [True, False] and infos["truncated_reason"][0] == "turn_limit"
        observations, rewards, terminated, truncated, infos = envs.step(["ignored", "d"])
        assert observations[0] == "ready"  # slot 0 was reset; its action was ignored
        assert observations[1].startswith("d\nTurn limit reached")
        assert rewards.tolist() == [0.0, 1.0] and not terminated.any() and truncated.tolist() == [False, True]
        assert infos["_tools"].tolist() == [True, False]
        assert [state["step_count"] for state in envs.state()] == [0, 3]


def test_same_step_autoreset(backend):
    with echo_vector(backend, num_envs=2, autoreset_mode=AutoresetMode.SAME_STEP) as envs:
        envs.reset(seed=0)
        for _ in range(2):
            envs.step(["a", "b"])
        observations, rewards, terminated, truncated, infos = envs.step(["c", None])
        assert observations == ("ready", "b")
        assert rewards.tolist() == [1.0, 0.0] and truncated.tolist() == [True, False]
        assert infos["_final_obs"].tolist() == [True, False]
        assert infos["final_obs"][0].startswith("c\nTurn limit reached")
        assert infos["final_info"]["truncated_reason"][0] == "turn_limit"
        assert infos["_tools"][0]  # the reset's info
        assert [state["step_count"] for state in envs.state()] == [0, 2]


def test_disabled_autoreset_refuses_to_step_ended_slots(backend):
    with echo_vector(backend, num_envs=2, autoreset_mode="Disabled") as envs:
        envs.reset(seed=0)
        for _ in range(3):
            _, _, _, truncated, _ = envs.step(["a", "b"])
        assert truncated.all()
        with pytest.raises(ResetNeeded, match=r"slots \[0, 1\]"):
            envs.step(["a", "b"])
        envs.step([None, None])  # skipping ended slots is fine
        envs.reset(options={"reset_mask": np.array([True, False])})
        observations, *_ = envs.step(["again", None])
        assert observations[0] == "again"


def test_step_before_reset_and_wrong_action_count_raise(backend):
    with echo_vector(backend, num_envs=2) as envs:
        with pytest.raises(ResetNeeded):
            envs.step(["a", "b"])
        envs.reset()
        with pytest.raises(ValueError, match="3 actions for 2 slots"):
            envs.step(["a", "b", "c"])


# -- call, get_attr, set_attr, state -------------------------------------------------------


def test_call_get_attr_set_attr_and_state(backend):
    with echo_vector(backend, num_envs=3) as envs:
        envs.reset(seed=0)
        schemas = envs.call("tool_schemas")
        assert len(schemas) == 3 and schemas[0][0]["function"]["name"] == "say"
        assert envs.get_attr("max_turns") == (3, 3, 3)
        envs.set_attr("max_turns", [1, 2, 3])
        assert envs.get_attr("max_turns") == (1, 2, 3)
        envs.set_attr("label", "same for all")
        assert {who["label"] for who in envs.call("whoami")} == {"same for all"}
        _, _, _, truncated, _ = envs.step(["a", "b", "c"])
        assert truncated.tolist() == [True, False, False]
        states = envs.state()
        assert [state["step_count"] for state in states] == [1, 1, 1]
        assert all(state["episode_id"] for state in states)
        with pytest.raises(AttributeError, match="no_such_thing") as raised:
            envs.get_attr("no_such_thing")
        assert "slot 0" in "".join(raised.value.__notes__)
        with pytest.raises(ValueError, match="2 values for 3 slots"):
            envs.set_attr("label", ["a", "b"])


# -- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"max_workers": 0}, "max_workers=0"),
        ({"max_workers": 2.5}, "max_workers=2.5"),
        ({"backend": "gpu"}, "backend='gpu'"),
        ({"step_timeout_s": -1}, "step_timeout_s=-1"),
        ({"autoreset_mode": "Sometimes"}, "autoreset_mode='Sometimes'"),
        ({"restart_on_error": "yes"}, "restart_on_error='yes'"),
        ({"start_method": "vfork"}, "start_method='vfork'"),
    ],
)
def test_bad_settings_are_value_errors_naming_the_value(settings, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(".", r"\.")):
        ConcurrentVectorEnv([FaultyEcho], **settings)
    assert not our_threads() and not our_processes()


@pytest.mark.parametrize(("backend", "own"), [("thread", "dedicated_threads, pin_threads"), ("process", "start_method")])
def test_a_misspelt_setting_names_the_close_match_and_every_accepted_setting(backend, own):
    shared = "autoreset_mode, backend, max_workers, restart_on_error, step_timeout_s"
    with pytest.raises(ValueError, match=re.escape(
            f"max_worker=2: not a setting of this backend (did you mean 'max_workers'?). Accepted: {shared}, "
            f"and backend={backend!r}'s own: {own}")):
        ConcurrentVectorEnv([FaultyEcho], backend=backend, max_worker=2)


def test_max_workers_from_the_environment(monkeypatch):
    monkeypatch.setenv("GYMENVS_MAX_WORKERS", "abc")
    with pytest.raises(ValueError, match="GYMENVS_MAX_WORKERS='abc'"):
        ConcurrentVectorEnv([FaultyEcho])
    monkeypatch.setenv("GYMENVS_MAX_WORKERS", "2")
    with ConcurrentVectorEnv([FaultyEcho] * 4, backend="process") as envs:
        assert len({who["pid"] for who in envs.call("whoami")}) == 2
        envs.reset()
        assert envs.step(["a", "b", "c", "d"])[0] == ("a", "b", "c", "d")


def test_bad_reset_options_and_seeds_are_value_errors(backend):
    with echo_vector(backend, num_envs=4) as envs:
        with pytest.raises(ValueError, match=r"group_size'\]=3"):
            envs.reset(seed=0, options={"group_size": 3})
        with pytest.raises(ValueError, match="reset_mask"):
            envs.reset(options={"reset_mask": np.array([True, False])})
        with pytest.raises(ValueError, match="seed=-1"):
            envs.reset(seed=-1)
        with pytest.raises(ValueError, match="one non-negative int"):
            envs.reset(seed=[1, 2])


def test_autoreset_mode_strings_are_accepted():
    for mode in AutoresetMode:
        value = mode.value  # "NextStep", "SameStep", "Disabled"
        with ConcurrentVectorEnv([FaultyEcho], autoreset_mode=value) as envs:
            assert envs.autoreset_mode == mode and envs.metadata["autoreset_mode"] == mode


def test_a_factory_error_is_raised_at_construction_and_leaves_nothing_behind(backend):
    def bad_factory():
        return gym.make("gymenvs/Catch-v0", rows=1)

    with pytest.raises(ValueError, match="rows") as raised:
        ConcurrentVectorEnv([FaultyEcho, bad_factory], backend=backend)
    assert "slot 1" in "".join(raised.value.__notes__)
    assert not our_threads() and not our_processes()


# -- closing -------------------------------------------------------------------------------


def test_close_is_idempotent_and_leaves_no_thread_or_process(backend):
    envs = echo_vector(backend, num_envs=4)
    envs.reset()
    envs.step(["a"] * 4)
    workers = our_processes()
    assert len(our_threads()) >= 4 if backend == "thread" else len(workers) == (4 if backend == "process" else 0)
    envs.close()
    envs.close()
    assert envs.closed
    assert not our_threads() and not our_processes()
    assert all(worker.exitcode is not None for worker in workers)
    with pytest.raises(gym.error.ClosedEnvironmentError):
        envs.step(["a"] * 4)
    with pytest.raises(gym.error.ClosedEnvironmentError):
        envs.reset()


def test_close_gives_the_backend_timeout_s_and_takes_no_other_keyword(monkeypatch):
    envs = echo_vector("thread", num_envs=2)
    given = []
    backend_close = envs._backend.close

    def recording_close(timeout_s):
        given.append(timeout_s)
        backend_close(timeout_s)

    monkeypatch.setattr(envs._backend, "close", recording_close)
    for wrong in ("timeout", "timeout_seconds"):
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{wrong}'"):
            envs.close(**{wrong: 1.0})
        assert not envs.closed
    envs.close(timeout_s=7.0)
    assert envs.closed and given == [7.0] and not our_threads()


def test_close_closes_every_env():
    envs = [FaultyEcho() for _ in range(3)]
    with ConcurrentVectorEnv([lambda env=env: env for env in envs], backend="thread"):
        pass
    assert all(env.closed for env in envs)


def test_a_vector_env_nobody_closed_is_closed_when_collected(backend):
    envs = echo_vector(backend, num_envs=2)
    envs.reset()
    del envs
    gc.collect()
    assert not our_threads() and not our_processes()


class CountsConcurrentSteps(FaultyEcho):
    """Records, in a dict shared by every instance (thread backend only), how many steps overlap."""

    def __init__(self, shared: dict):
        super().__init__()
        self.shared = shared

    def step(self, action):
        with self.shared["lock"]:
            self.shared["active"] += 1
            self.shared["most"] = max(self.shared["most"], self.shared["active"])
        try:
            return super().step("sleep 0.25")
        finally:
            with self.shared["lock"]:
                self.shared["active"] -= 1


@pytest.mark.parametrize(("settings", "most"), [({}, 8), ({"max_workers": 3, "step_timeout_s": 10}, 3)])
def test_blocking_steps_overlap_up_to_max_workers(settings, most):
    shared = {"lock": threading.Lock(), "active": 0, "most": 0}
    with ConcurrentVectorEnv([lambda: CountsConcurrentSteps(shared)] * 8, **settings) as envs:
        envs.reset()
        envs.step(["go"] * 8)
    assert shared["most"] == most


@pytest.mark.parametrize("backend", backend_params(["process", "ray"]), indirect=True)  # the backends with several slots a host
def test_a_host_with_several_slots_steps_them_concurrently(backend):
    with echo_vector(backend, num_envs=4, max_workers=2) as envs:
        envs.reset(seed=0)
        assert len({who["pid"] for who in envs.call("whoami")}) == 2
        observations, *_ = envs.step(["sleep 1"] * 4)
        assert observations == ("slept 1",) * 4
        sleeps_by_host: dict[int, list[tuple[float, float]]] = {}
        for who in envs.call("whoami"):
            sleeps_by_host.setdefault(who["pid"], []).append(who["last_sleep"])
        for sleeps in sleeps_by_host.values():  # the two slots of a host slept at once, not one after another
            assert max(start for start, _ in sleeps) < min(end for _, end in sleeps)


SCRIPT = """
import pathlib, sys
with open(sys.argv[1], "a") as runs:  # every execution of this script's top level leaves a line
    runs.write(__name__ + "\\n")
if __name__ == "__main__":
    from wrappers.vector import make_vector_env
    with make_vector_env("gymenvs/Echo-v0", 3, backend="process", start_method=sys.argv[2]) as envs:
        envs.reset()
        assert envs.step(["a", "b", "c"])[0] == ("a", "b", "c")
"""


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_workers_do_not_run_the_main_script_again(tmp_path, start_method):
    """multiprocessing would import the parent's main script in each worker: a trainer's torch import each time."""
    script, runs = tmp_path / "train.py", tmp_path / "runs.txt"
    script.write_text(SCRIPT)
    repository = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([repository, os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, str(script), str(runs), start_method], env=env, check=True, timeout=120)
    assert runs.read_text().splitlines() == ["__main__"]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs Linux and 2+ cores")
@pytest.mark.parametrize("pin_threads", [True, False])
def test_thread_backend_pins_its_pool_threads_to_one_core_only(pin_threads):
    allowed = os.sched_getaffinity(0)
    with echo_vector("thread", num_envs=3, pin_threads=pin_threads) as vector_env:
        vector_env.reset(seed=0)
        pool = [os.sched_getaffinity(thread.native_id) for thread in our_threads()]
        assert pool and all(cores == ({max(allowed)} if pin_threads else allowed) for cores in pool)
        assert os.sched_getaffinity(0) == allowed  # the caller's thread is left alone


def test_pinning_is_off_by_default():
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    with echo_vector("thread", num_envs=3) as vector_env:
        assert vector_env.backend_settings.pin_threads is False
        vector_env.reset(seed=0)
        if allowed is not None:
            assert all(os.sched_getaffinity(thread.native_id) == allowed for thread in our_threads())


# -- dedicated threads -----------------------------------------------------------------------


class RecordsItsThreads(FaultyEcho):
    """Appends (what, thread id) to a list shared with the test, for construction, reset, step and close."""

    def __init__(self, log: list):
        self.log = log
        log.append(("init", threading.get_ident()))
        super().__init__()

    def reset(self, *, seed=None, options=None):
        self.log.append(("reset", threading.get_ident()))
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self.log.append(("step", threading.get_ident()))
        return super().step(action)

    def close(self):
        self.log.append(("close", threading.get_ident()))
        super().close()


@pytest.mark.parametrize("step_timeout_s", [None, 5.0])
def test_dedicated_threads_drive_each_env_from_one_thread_for_its_whole_life(step_timeout_s):
    logs = [[] for _ in range(4)]
    factories = [functools.partial(RecordsItsThreads, log) for log in logs]
    with ConcurrentVectorEnv(factories, dedicated_threads=True, step_timeout_s=step_timeout_s) as envs:
        envs.reset(seed=0)
        for _ in range(5):
            envs.step(["a", "sleep 0.01", "b", "c"])
        envs.reset(seed=1)
    for log in logs:
        assert [what for what, _ in log][:2] == ["init", "reset"] and log[-1][0] == "close"
        assert len({thread for _, thread in log}) == 1
    assert len({log[0][1] for log in logs}) == 4 and threading.get_ident() not in {log[0][1] for log in logs}
    assert not our_threads()


@pytest.mark.slow  # waits out a timeout or a subprocess: the quick lane leaves it to the full suite
def test_a_slot_with_a_dedicated_thread_that_times_out_gets_a_new_thread_and_env():
    logs = [[] for _ in range(2)]
    factories = [functools.partial(RecordsItsThreads, log) for log in logs]
    with ConcurrentVectorEnv(factories, dedicated_threads=True, step_timeout_s=0.3) as envs:
        envs.reset(seed=0)
        _, _, _, truncated, infos = envs.step(["a", "sleep 1"])
        assert truncated.tolist() == [False, True] and "timed out" in infos["error"][1]
        assert envs.step(["b", "c"])[0] == ("b", "ready")
        time.sleep(1)  # the old env, once its step returns, is closed on its own thread
    first_thread = logs[1][0][1]
    old = [entry for entry in logs[1] if entry[1] == first_thread]
    assert [what for what, _ in old] == ["init", "reset", "step", "close"]
    new = [entry for entry in logs[1] if entry[1] != first_thread]
    assert [what for what, _ in new] == ["init", "reset", "close"] and len({thread for _, thread in new}) == 1


# -- defects of gymnasium's own paths, and exit ---------------------------------------------


def test_an_unclosed_vector_env_lets_the_interpreter_exit_at_once():
    """It used to wait 30 s at exit for pool threads that the interpreter had already frozen."""
    script = (
        "import time, atexit; atexit.register(lambda: print(time.monotonic(), flush=True)); "  # runs last of the exit hooks
        "import gymnasium as gym, gymenvs; e = gym.make_vec('gymenvs/Wordle-v0', num_envs=2); e.reset(seed=0)"
    )
    repository = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([repository, os.environ.get("PYTHONPATH", "")])}
    child = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    exited = time.monotonic()
    assert child.returncode == 0, child.stderr
    assert exited - float(child.stdout.split()[-1]) < 1.0 and "timed out" not in child.stderr


def test_async_vectorization_refuses_shared_memory_for_text_and_says_what_works():
    with pytest.raises(ValueError, match="shared memory.*make_vec\\(id, num_envs=N\\).*shared_memory': False"):
        gym.make_vec("gymenvs/Echo-v0", num_envs=2, vectorization_mode="async")
    envs = gym.make_vec("gymenvs/Echo-v0", num_envs=2, vectorization_mode="async", vector_kwargs={"shared_memory": False})
    try:
        envs.reset(seed=0)
        assert envs.step(("hi", "there"))[0] == ("hi", "there")
    finally:
        envs.close()


SHOUTING = functools.partial(gym.wrappers.TransformObservation, func=str.upper, observation_space=None)


def test_gymnasium_refuses_wrappers_and_vector_kwargs_with_a_vector_entry_point():
    """Why `gymenvs.make_vec` exists: gymnasium checks this before it calls the entry point."""
    with pytest.raises(gym.error.Error, match="wrappers"):
        gym.make_vec("gymenvs/Echo-v0", num_envs=2, wrappers=[gym.wrappers.RecordEpisodeStatistics])
    with pytest.raises(gym.error.Error, match="only through kwargs"):
        gym.make_vec("gymenvs/Echo-v0", num_envs=2, vector_kwargs={"backend": "process"})


def test_make_vec_applies_wrappers_to_every_slot_of_an_env_with_a_vector_entry_point():
    with gymenvs.make_vec("gymenvs/Echo-v0", 2, wrappers=[SHOUTING], backend="process") as envs:
        assert isinstance(envs, ConcurrentVectorEnv)
        envs.reset(seed=0)
        assert envs.step(["hi", "there"])[0] == ("HI", "THERE")


@pytest.fixture
def echo_without_vector_entry_point():
    gym.register("test/PlainEcho-v0", entry_point="gymenvs.envs.echo:EchoEnv")
    yield "test/PlainEcho-v0"
    del gym.registry["test/PlainEcho-v0"]


def test_make_vec_applies_wrappers_to_an_env_without_a_vector_entry_point(echo_without_vector_entry_point):
    with closing(gymenvs.make_vec(echo_without_vector_entry_point, 2, wrappers=[SHOUTING])) as envs:  # gymnasium's SyncVectorEnv
        envs.reset(seed=0)
        assert tuple(envs.step(("hi", "there"))[0]) == ("HI", "THERE")
    with make_vector_env(echo_without_vector_entry_point, 2, wrappers=[SHOUTING]) as envs:
        envs.reset(seed=0)
        assert envs.step(["hi", "there"])[0] == ("HI", "THERE")


def test_make_vec_with_wrappers_refuses_vector_kwargs_and_leaves_other_modes_to_gymnasium():
    with pytest.raises(ValueError, match="vector_kwargs=.*plain keywords"):
        gymenvs.make_vec("gymenvs/Echo-v0", 2, wrappers=[SHOUTING], vector_kwargs={"backend": "process"})
    with closing(gymenvs.make_vec("gymenvs/Echo-v0", 2, vectorization_mode="sync", wrappers=[SHOUTING])) as envs:
        assert isinstance(envs, gym.vector.SyncVectorEnv)
        envs.reset(seed=0)
        assert tuple(envs.step(("hi", "there"))[0]) == ("HI", "THERE")


class Shout(FaultyEcho):
    def _parse_text(self, text):
        return super()._parse_text(text.upper())


def test_a_user_registered_env_gets_the_concurrent_vector_env_through_one_helper():
    gym.register("testing/Shout-v0", entry_point=Shout, vector_entry_point=gymenvs.vector_entry_point("testing/Shout-v0"))
    try:
        with gym.make_vec("testing/Shout-v0", num_envs=2, backend="process") as envs:
            assert isinstance(envs, ConcurrentVectorEnv)
            envs.reset(seed=0)
            assert envs.step(["hi", "there"])[0] == ("HI", "THERE")
    finally:
        del gym.registry["testing/Shout-v0"]


THREAD_AFFINE_LOG: list = []


class ThreadAffineRecorder(RecordsItsThreads):
    """A thread-affine env (like MiniWoB's browser) that logs which thread touches which instance."""

    thread_affine = True

    def __init__(self):
        super().__init__(THREAD_AFFINE_LOG)

    def step(self, action):
        THREAD_AFFINE_LOG.append(("step-of", id(self), threading.get_ident()))
        return super().step(action)


def test_make_vec_gives_a_thread_affine_env_a_dedicated_thread_per_slot():
    env_id = "gymenvs-tests/ThreadAffine-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=ThreadAffineRecorder, vector_entry_point=gymenvs.vector_entry_point(env_id))
    THREAD_AFFINE_LOG.clear()
    with gym.make_vec(env_id, num_envs=3) as envs:
        assert envs.backend_settings.dedicated_threads
        envs.reset(seed=0)
        for _ in range(6):
            envs.step(["a", "b", "c"])
    threads_of = {}
    for entry in THREAD_AFFINE_LOG:
        if entry[0] == "step-of":
            threads_of.setdefault(entry[1], set()).add(entry[2])
    assert len(threads_of) == 3 and all(len(threads) == 1 for threads in threads_of.values())
    with gym.make_vec(env_id, num_envs=2, dedicated_threads=False) as envs:  # the caller decides
        assert not envs.backend_settings.dedicated_threads


def test_miniwob_is_marked_thread_affine():
    from gymenvs.envs.miniwob import MiniWoBEnv

    assert MiniWoBEnv.thread_affine and not gymenvs.TextEnv.thread_affine


# -- the step past gymnasium.make's wrappers ---------------------------------------------


class CountingChecker(PassiveEnvChecker):
    """A subclass of a wrapper the slot may skip: being a subclass, it is kept, and sees every step."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.steps = 0

    def step(self, action):
        self.steps += 1
        return super().step(action)


def test_a_slot_steps_past_make_s_wrappers_only_once_their_checks_are_done():
    env = gym.make("gymenvs/Echo-v0")
    assert settled_step(env) == env.step  # no reset yet: OrderEnforcing must still refuse a step
    env.reset(seed=0)
    checker = env.env
    assert type(checker) is PassiveEnvChecker and settled_step(env) == checker.step  # its first step is checked
    env.step("hello")
    assert settled_step(env) == env.unwrapped.step
    assert settled_step(CountingChecker(env.unwrapped)).__self__ is not env.unwrapped


def test_a_wrapper_of_the_caller_sees_every_step_of_a_slot():
    with make_vector_env("gymenvs/Echo-v0", 2, wrappers=[CountingChecker], max_turns=100) as envs:
        envs.reset(seed=0)
        for _ in range(4):
            envs.step(["hello", "world"])
        assert envs.get_attr("steps") == (4, 4)
