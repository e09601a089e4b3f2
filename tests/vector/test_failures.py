"""ConcurrentVectorEnv under failure: exceptions, dead workers, timeouts. Other slots never notice.

A failed slot is truncated with `info["error"]` and an infra ending (`info["outcome"] == "infra"`),
rebuilt from its factory, and usable at once; a late reply is dropped, never handed to a later step.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from wrappers import ConcurrentVectorEnv

from .vector_support import faulty_echo_vector, our_processes, our_threads

pytestmark = pytest.mark.timeout(120)

def faulty_vector(backend: str, num_envs: int = 3, **settings) -> ConcurrentVectorEnv:
    return faulty_echo_vector(backend, num_envs, max_turns=100, **settings)


def instance_ids(envs: ConcurrentVectorEnv) -> list[str]:
    return [who["instance_id"] for who in envs.call("whoami")]


def assert_untouched(before: tuple[dict, ...], after: tuple[dict, ...], slots: list[int], steps: int) -> None:
    """The slots kept their episode and env instance, and advanced by `steps` steps."""
    for i in slots:
        assert after[i]["instance_id"] == before[i]["instance_id"]
        assert after[i]["episode_id"] == before[i]["episode_id"]
        assert after[i]["step_count"] == before[i]["step_count"] + steps


def assert_infra_ending(infos: dict, slot: int, reason: str, num_envs: int = 3) -> None:
    """Only `slot` reports an ending, and it says the infrastructure ended it, for `reason`."""
    assert infos["_outcome"].tolist() == [i == slot for i in range(num_envs)]
    assert (infos["outcome"][slot], infos["outcome_reason"][slot]) == ("infra", reason)
    assert infos["outcome_detail"][slot] == infos["error"][slot]


# -- exceptions ----------------------------------------------------------------------------


def test_an_exception_truncates_that_slot_and_rebuilds_it(backend):
    with faulty_vector(backend) as envs:
        envs.reset(seed=0)
        envs.step(["a", "b", "c"])
        ids, before = instance_ids(envs), envs.state()
        observations, rewards, terminated, truncated, infos = envs.step(["x", "raise now", "z"])
        assert truncated.tolist() == [False, True, False] and not terminated.any()
        assert rewards.tolist() == [1.0, 0.0, 1.0]
        assert infos["_error"].tolist() == [False, True, False]
        assert "RuntimeError" in infos["error"][1] and "boom now" in infos["error"][1]
        assert_infra_ending(infos, 1, "env_exception")
        assert observations[0] == "x" and observations[2] == "z" and "boom now" in observations[1]
        assert_untouched(before, envs.state(), [0, 2], steps=1)
        new_ids = instance_ids(envs)
        assert new_ids[1] != ids[1] and [new_ids[0], new_ids[2]] == [ids[0], ids[2]]

        observations, rewards, _, truncated, infos = envs.step(["x", "ignored", "z"])  # next-step autoreset
        assert observations[1] == "ready" and rewards[1] == 0.0 and not truncated.any()
        observations, *_ = envs.step(["x", "works again", "z"])
        assert observations[1] == "works again"


def test_without_restart_on_error_the_env_is_kept(backend):
    with faulty_vector(backend, restart_on_error=False) as envs:
        envs.reset()
        ids = instance_ids(envs)
        _, _, _, truncated, infos = envs.step(["a", "raise", "c"])
        assert truncated[1] and "RuntimeError" in infos["error"][1]
        assert instance_ids(envs) == ids
        observations, *_ = envs.step(["a", "b", "c"])
        assert observations[1] == "ready"


def test_an_exception_in_reset_reports_and_recovers(backend):
    with faulty_vector(backend) as envs:
        envs.reset()
        observations, infos = envs.reset(options={"fail": True, "reset_mask": np.array([False, True, False])})
        assert infos["_error"].tolist() == [False, True, False] and "reset failed on purpose" in infos["error"][1]
        observations, rewards, _, truncated, _ = envs.step(["a", "b", "c"])  # slot 1 is reset first
        assert observations == ("a", "ready", "c") and not truncated.any()


# -- dead worker processes -----------------------------------------------------------------


@pytest.mark.parametrize(("action", "expected"), [("exit 7", "exited with code 7"), ("kill", "SIGKILL")])
def test_a_worker_that_dies_mid_step_only_costs_its_slot(action, expected):
    with faulty_vector("process") as envs:
        envs.reset()
        envs.step(["a", "b", "c"])
        pids = [who["pid"] for who in envs.call("whoami")]
        before = envs.state()
        observations, rewards, _, truncated, infos = envs.step(["a", action, "c"])
        assert truncated.tolist() == [False, True, False]
        assert expected in infos["error"][1] and infos["_error"].tolist() == [False, True, False]
        assert_infra_ending(infos, 1, "slot_crashed")
        assert observations[0] == "a" and observations[2] == "c"
        assert_untouched(before, envs.state(), [0, 2], steps=1)
        new_pids = [who["pid"] for who in envs.call("whoami")]
        assert new_pids[1] != pids[1] and [new_pids[0], new_pids[2]] == [pids[0], pids[2]]
        envs.step(["a", "b", "c"])  # autoreset of slot 1
        observations, *_ = envs.step(["a", "alive", "c"])
        assert observations == ("a", "alive", "c")


def test_a_worker_killed_while_idle_truncates_its_slot_at_the_next_step():
    with faulty_vector("process") as envs:
        envs.reset()
        envs.step(["a", "b", "c"])
        before = envs.state()
        victim = envs.call("whoami")[2]["pid"]
        os.kill(victim, signal.SIGKILL)
        time.sleep(0.2)
        observations, _, _, truncated, infos = envs.step(["a", "b", "c"])
        assert truncated.tolist() == [False, False, True]
        assert "SIGKILL" in infos["error"][2]
        assert_untouched(before, envs.state(), [0, 1], steps=1)


def test_a_dead_worker_hosting_several_slots_costs_only_those_slots():
    with faulty_vector("process", num_envs=4, max_workers=2) as envs:  # worker 0: slots 0, 2; worker 1: slots 1, 3
        envs.reset()
        before = envs.state()
        observations, _, _, truncated, infos = envs.step(["a", "b", "kill", "d"])
        assert truncated.tolist() == [True, False, True, False]
        assert "SIGKILL" in infos["error"][0] and "SIGKILL" in infos["error"][2]
        assert observations[1] == "b" and observations[3] == "d"
        assert_untouched(before, envs.state(), [1, 3], steps=1)


# -- timeouts ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_slow_step_is_truncated_and_its_late_reply_never_reaches_a_later_step(backend):
    with faulty_vector(backend, step_timeout_s=0.4) as envs:
        envs.reset()
        before = envs.state()
        started = time.monotonic()
        observations, rewards, _, truncated, infos = envs.step(["a", "sleep 3", "c"])
        assert time.monotonic() - started < 2.5  # it did not wait for the slow step (0.4 s, with room for a loaded machine)
        assert truncated.tolist() == [False, True, False] and rewards.tolist() == [1.0, 0.0, 1.0]
        assert "step_timeout_s=0.4" in infos["error"][1]
        assert_infra_ending(infos, 1, "step_timeout")
        assert observations[0] == "a" and observations[2] == "c"
        assert_untouched(before, envs.state(), [0, 2], steps=1)

        seen = []
        deadline = started + 3.3  # past the moment the slow step answers
        round_ = 0
        while time.monotonic() < deadline:
            actions = [f"a{round_}", f"b{round_}", f"c{round_}"]
            observations, _, _, truncated, _ = envs.step(actions)
            seen.append(observations)
            assert not truncated.any()
            assert observations[0] == actions[0] and observations[2] == actions[2]
            assert observations[1] in (actions[1], "ready")  # the first of these steps autoresets slot 1
            round_ += 1
            time.sleep(0.05)
        assert all("slept" not in observation for step in seen for observation in step)
        assert_untouched(before, envs.state(), [0, 2], steps=1 + round_)


def test_timeouts_leave_no_thread_behind_after_close():
    envs = faulty_vector("thread", step_timeout_s=0.2)
    envs.reset()
    envs.step(["sleep 0.6", "b", "sleep 0.6"])
    envs.close()  # waits for the two abandoned steps to finish, which then close their envs
    assert not our_threads()


def test_close_leaves_no_process_even_after_restarts():
    envs = faulty_vector("process", step_timeout_s=0.3)
    envs.reset()
    envs.step(["sleep 5", "kill", "c"])
    workers = our_processes()
    assert len(workers) == 3
    envs.close()
    assert not our_processes()
    assert all(worker.exitcode is not None for worker in workers)


@pytest.mark.slow  # waits out a timeout or a subprocess: the quick lane leaves it to the full suite
def test_a_hung_call_raises_and_rebuilds_the_slot(backend):
    with faulty_vector(backend, step_timeout_s=0.5) as envs:
        envs.reset()
        ids = instance_ids(envs)
        with pytest.raises(RuntimeError, match="step_timeout_s=0.5") as raised:
            envs.call("say", "sleep 1.2")
        assert "slot 0" in "".join(raised.value.__notes__)
        time.sleep(0.9)
        assert all(new != old for new, old in zip(instance_ids(envs), ids))
        observations, *_ = envs.step(["a", "b", "c"])  # every slot lost its episode: autoreset
        assert observations == ("ready",) * 3


def test_an_action_that_cannot_reach_a_worker_process_fails_only_its_slot():
    with faulty_vector("process") as envs:
        envs.reset()
        unpicklable = threading.Lock()
        observations, _, _, truncated, infos = envs.step(["a", unpicklable, "c"])
        assert truncated.tolist() == [False, True, False] and "could not be sent" in infos["error"][1]
        assert observations[0] == "a" and observations[2] == "c"
        envs.step(["a", "b", "c"])
        assert envs.step(["a", "b", "c"])[0] == ("a", "b", "c")


def test_same_step_autoreset_resets_a_failed_slot_at_once(backend):
    with faulty_vector(backend, autoreset_mode="SameStep") as envs:
        envs.reset()
        observations, _, _, truncated, infos = envs.step(["a", "raise", "c"])
        assert truncated.tolist() == [False, True, False]
        assert observations[1] == "ready" and "boom" in infos["final_obs"][1] and "boom" in infos["error"][1]
        assert infos["final_info"]["error"][1] == infos["final_obs"][1]
        assert_infra_ending(infos["final_info"], 1, "env_exception")
        assert envs.step(["a", "b", "c"])[0] == ("a", "b", "c")


def test_an_env_calling_sys_exit_is_an_error_not_a_dead_worker(backend):
    with faulty_vector(backend, step_timeout_s=5) as envs:  # with a deadline, every step runs in the pool
        envs.reset()
        _, _, _, truncated, infos = envs.step(["a", "sysexit", "c"])
        assert truncated.tolist() == [False, True, False] and "SystemExit" in infos["error"][1]
        envs.step(["a", "b", "c"])
        assert envs.step(["a", "b", "c"])[0] == ("a", "b", "c")


@pytest.mark.parametrize(("action", "named"), [("interrupt", "KeyboardInterrupt"), ("cancel", "CancelledError")])
def test_an_env_raising_keyboard_interrupt_or_cancelled_error_fails_only_its_slot(backend, action, named):
    """With no deadline too: a pool thread of the thread backend used to die of it, and the step wait forever."""
    with faulty_vector(backend) as envs:
        envs.reset()
        _, _, _, truncated, infos = envs.step(["sleep 0.3", action, "c"])  # slot 1 runs on a pool thread
        assert truncated.tolist() == [False, True, False] and named in infos["error"][1]
        envs.step(["a", "b", "c"])
        assert envs.step(["a", "b", "c"])[0] == ("a", "b", "c")


def test_an_exception_that_cannot_be_unpickled_fails_only_its_slot(backend):
    """It pickles in the worker but not back: the process backend used to raise for every slot."""
    with faulty_vector(backend) as envs:
        envs.reset()
        _, _, _, truncated, infos = envs.step(["a", "unpicklable", "c"])
        assert truncated.tolist() == [False, True, False] and "UnpicklableError in step" in infos["error"][1]
        assert_infra_ending(infos, 1, "env_exception")  # its exception was dropped on the way back, not its reason
        envs.step(["a", "b", "c"])
        assert envs.step(["a", "b", "c"])[0] == ("a", "b", "c")


@pytest.fixture
def ctrl_c_raises():
    """Python's own SIGINT handler: a shell starts background jobs with SIGINT ignored, and then
    Python never installs it, so Ctrl-C would not raise KeyboardInterrupt."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.slow  # waits out a timeout or a subprocess: the quick lane leaves it to the full suite
def test_ctrl_c_during_a_step_leaves_the_vector_env_usable(backend, ctrl_c_raises):
    with faulty_vector(backend) as envs:
        envs.reset()
        main = threading.get_ident()
        threading.Timer(0.2, signal.pthread_kill, (main, signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            envs.step(["sleep 0.6", "sleep 0.6", "c"])
        time.sleep(0.6)  # let the interrupted steps finish: their replies must not surface below
        observations, _, _, truncated, infos = envs.step(["a", "b", "c"])
        assert truncated.all() and all("interrupted by KeyboardInterrupt" in error for error in infos["error"])
        assert envs.step(["a", "b", "c"])[0] == ("ready",) * 3  # autoreset
        assert envs.step(["a", "b", "c"])[0] == ("a", "b", "c")


def test_an_env_raising_keyboard_interrupt_on_the_callers_thread_stops_the_step_there():
    """Without a deadline the thread backend steps a settled slot on the caller's (main) thread, past `Slot.run`:
    a KeyboardInterrupt raised there still reaches the caller as Ctrl-C, and the interrupted slots are truncated
    at the next step."""
    with faulty_vector("thread") as envs:
        envs.reset()
        envs.step(["a", "b", "c"])  # every slot settled: the next step takes the hot path
        with pytest.raises(KeyboardInterrupt):
            envs.step(["a", "interrupt", "c"])
        _, _, _, truncated, infos = envs.step(["a", "b", "c"])
        assert truncated.all() and "interrupted by KeyboardInterrupt" in infos["error"][1]
        envs.step(["a", "b", "c"])  # autoreset
        assert envs.step(["a", "b", "c"])[0] == ("a", "b", "c")
