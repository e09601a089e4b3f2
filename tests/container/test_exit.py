"""How a program using the container envs ends: one that forgets `close()` exits at once and leaves nothing running;
no env installs a signal handler; a SIGTERM is an exit (status 143, cleanup run) where the program asks for it
(`gymenvs.exit_on_sigterm`, which the `gymenvs` command uses), and nowhere else. Each program runs in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from gymenvs.container.runtime.owners import LABEL_PID

ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENT = {**os.environ, "PYTHONPATH": str(ROOT)}
#: Seconds a program may take to exit once its work is done, or once it is sent SIGTERM.
EXIT_WITHIN = 30


def containers_of(client, pid: int) -> list:
    """The containers a process owns (labelled with its pid), running or not."""
    return client.containers.list(all=True, filters={"label": f"{LABEL_PID}={pid}"}, ignore_removed=True)


def directories_of(pid: int) -> list[Path]:
    """The host directories a process owns in the temp folder (`gymenvs.container.reaper.owned_directory`)."""
    return list(Path(tempfile.gettempdir()).glob(f"gymenvs-*-{pid}-*"))


def wait_for(condition, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s"
        time.sleep(0.2)


@pytest.fixture
def run_program(docker_client, tmp_path):
    """Start a Python program (`code` and its arguments) in a subprocess; afterwards, kill it if it still runs and
    remove what it left (so that a failing test leaves nothing either)."""
    started: list[subprocess.Popen] = []

    def run(code: str, *args: str) -> subprocess.Popen:
        path = tmp_path / f"stderr-{len(started)}.txt"
        with path.open("w") as stderr:
            process = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=stderr,
                                       text=True, cwd=ROOT, env=ENVIRONMENT)
        process.stderr_path = path
        started.append(process)
        return process

    yield run
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(30)
        for container in containers_of(docker_client, process.pid):
            container.remove(force=True, v=True)
        for directory in directories_of(process.pid):
            shutil.rmtree(directory, ignore_errors=True)


def stderr_of(process: subprocess.Popen) -> str:
    return Path(process.stderr_path).read_text()[-3000:]


# -- a program that forgets close() --------------------------------------------------------------------

FORGETFUL = textwrap.dedent("""
    import json, sys
    import gymnasium as gym
    import gymenvs

    env = gym.make(sys.argv[1], **json.loads(sys.argv[2]))
    env.reset(seed=0)
    print(env.unwrapped.state()["container"], flush=True)
    # returns without env.close()
""")


@pytest.mark.docker
@pytest.mark.parametrize(("env_id", "kwargs"), [
    ("gymenvs/TerminalAgent-v0", {}),
    ("gymenvs/SWEAgent-v0", {}),
    ("gymenvs/SWE-v0", {"warm_pool": 1}),
], ids=["TerminalAgent-v0", "SWEAgent-v0", "SWE-v0-warm_pool"])
def test_a_program_that_forgets_close_exits_at_once_and_leaves_nothing(run_program, docker_client, swe_images,
                                                                       terminal_images, env_id, kwargs):
    program = run_program(FORGETFUL, env_id, json.dumps(kwargs))
    container = program.stdout.readline().strip()
    assert container, stderr_of(program)  # the episode started: the agent waits on its first call, or the shell runs
    try:
        code = program.wait(EXIT_WITHIN)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{env_id}: the program did not exit within {EXIT_WITHIN} s of returning without close()")
    assert code == 0, stderr_of(program)
    assert containers_of(docker_client, program.pid) == [] and directories_of(program.pid) == []


# -- signals ---------------------------------------------------------------------------------------------

HANDLERS = textwrap.dedent("""
    import json, signal
    import gymnasium as gym
    import gymenvs

    def handlers():
        return {name: repr(signal.getsignal(getattr(signal, name))) for name in ("SIGTERM", "SIGINT")}

    seen = {"before": handlers()}
    for env_id in ("gymenvs/SWE-v0", "gymenvs/TerminalAgent-v0"):
        env = gym.make(env_id)
        seen[f"{env_id} built"] = handlers()
        env.reset(seed=0)
        seen[f"{env_id} reset"] = handlers()
        env.close()
    print(json.dumps(seen))
""")


@pytest.mark.docker
def test_building_and_resetting_an_env_installs_no_signal_handler(run_program, swe_images, terminal_images):
    program = run_program(HANDLERS)
    output, _ = program.communicate(timeout=300)
    assert program.returncode == 0, stderr_of(program)
    seen = json.loads(output)
    before = seen.pop("before")
    assert before["SIGTERM"] == repr(signal.SIG_DFL)
    assert seen == dict.fromkeys(seen, before) and len(seen) == 4


@pytest.mark.docker
@pytest.mark.slow
def test_gymenvs_eval_sent_sigterm_mid_episode_exits_143_and_leaves_no_container(docker_client, swe_images, tmp_path):
    # (SWE-v0 has no scripted policy: random tool calls play its episodes)
    with (tmp_path / "stderr.txt").open("w") as stderr:
        command = subprocess.Popen([sys.executable, "-m", "gymenvs.cli", "eval", "gymenvs/SWE-v0", "-n", "20", "--policy",
                                    "random", "--no-progress"], stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT,
                                   env=ENVIRONMENT)
    try:
        wait_for(lambda: containers_of(docker_client, command.pid) or command.poll() is not None, 120)
        assert command.poll() is None, (tmp_path / "stderr.txt").read_text()[-3000:]  # an episode runs
        command.send_signal(signal.SIGTERM)
        try:
            code = command.wait(EXIT_WITHIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"gymenvs eval did not exit within {EXIT_WITHIN} s of SIGTERM")
        assert code == 143, (tmp_path / "stderr.txt").read_text()[-3000:]
        assert containers_of(docker_client, command.pid) == []
    finally:
        if command.poll() is None:
            command.kill()
            command.wait(30)
        for container in containers_of(docker_client, command.pid):
            container.remove(force=True, v=True)


EXIT_ON_SIGTERM = textwrap.dedent("""
    import time
    import gymnasium as gym
    import gymenvs

    with gymenvs.exit_on_sigterm(), gym.make("gymenvs/SWE-v0") as env:
        env.reset(seed=0)
        print(env.unwrapped.state()["container"], flush=True)
        time.sleep(600)
""")


@pytest.mark.docker
def test_exit_on_sigterm_turns_sigterm_into_exit_143_and_the_env_is_cleaned_up(run_program, docker_client, swe_images):
    program = run_program(EXIT_ON_SIGTERM)
    container = program.stdout.readline().strip()
    assert container, stderr_of(program)
    assert docker_client.containers.get(container).status == "running"
    program.send_signal(signal.SIGTERM)
    try:
        code = program.wait(EXIT_WITHIN)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the program did not exit within {EXIT_WITHIN} s of SIGTERM")
    assert code == 143, stderr_of(program)  # an exit, not a death by the signal (-15)
    assert containers_of(docker_client, program.pid) == []


#: No engine: the handler while the block is open, after it, and beside a handler of the program's own.
HANDLER_SWAP = textwrap.dedent("""
    import os, signal, time
    import gymenvs

    def deliver_sigterm():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)  # the handler runs before this ends
        return "not interrupted"

    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    with gymenvs.exit_on_sigterm():
        try:
            ended = deliver_sigterm()
        except SystemExit as exit:
            ended = exit.code
    assert ended == 143, ended
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "the previous handler is back after the block"

    received = []
    def own(signum, frame):
        received.append(signum)
    signal.signal(signal.SIGTERM, own)
    with gymenvs.exit_on_sigterm():
        assert signal.getsignal(signal.SIGTERM) is own, "a handler of the program's own is left alone"
        deliver_sigterm()
    assert received == [signal.SIGTERM] and signal.getsignal(signal.SIGTERM) is own
    print("ok")
""")


@pytest.mark.slow  # two Python processes, one stopped by SIGTERM: about 2 s
def test_exit_on_sigterm_restores_the_previous_handler_and_leaves_a_programs_own_alone():
    result = subprocess.run([sys.executable, "-c", HANDLER_SWAP], capture_output=True, text=True, timeout=120, cwd=ROOT,
                            env=ENVIRONMENT)
    assert (result.returncode, result.stdout) == (0, "ok\n"), result.stderr
