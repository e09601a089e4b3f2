"""The `gymenvs` command, run as a person would: in a subprocess, typing on stdin."""

import signal
import subprocess
import sys
import time

import gymenvs


def gymenvs_cli(*args, stdin=""):
    return subprocess.run([sys.executable, "-m", "gymenvs.cli", *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_list_shows_every_env_with_a_description():
    result = gymenvs_cli("list")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == gymenvs.list_envs()
    assert all(len(line.split()) > 3 for line in lines)


def test_play_a_game_of_catch_to_the_end():
    moves = "up\n" + "stay\n" * 3
    # ball above the paddle
    result = gymenvs_cli("play", "gymenvs/Catch-v0", "--seed", "0", "-k", "rows=4", "-k", "columns=2", stdin=moves)
    assert result.returncode == 0, result.stderr
    assert "tool move(direction)" in result.stdout
    assert "Invalid action: expected one of left, stay, right; got 'up'" in result.stdout
    assert "Caught the ball! +1" in result.stdout and "Episode over (terminated); return 1." in result.stdout


def test_play_shows_state_and_takes_json_tool_calls():
    stdin = ':state\n{"name": "guess", "arguments": {"word": "crane"}}\n:quit\n'
    result = gymenvs_cli("play", "gymenvs/Wordle-v0", "--seed", "0", stdin=stdin)
    assert result.returncode == 0
    assert '"step_count": 0' in result.stdout and "C R A N E" in result.stdout


def test_play_reports_bad_ids_and_bad_arguments():
    assert "env id 'gymenvs/Nope-v0' is not registered" in gymenvs_cli("play", "gymenvs/Nope-v0").stderr
    bad = gymenvs_cli("play", "gymenvs/Catch-v0", "-k", "rows=1")
    assert bad.returncode == 2 and "rows" in bad.stderr and "greater than or equal to 2" in bad.stderr


def test_ctrl_c_stops_an_eval_without_starting_the_remaining_episodes():
    # 200,000 Wordle episodes take minutes; Ctrl-C must end the run within seconds, as a shell expects.
    # Sent at any moment (the old thread pool hung at exit when it landed inside the pool's locks).
    for delay in (1.0, 2.5, 4.0):
        process = subprocess.Popen([sys.executable, "-m", "gymenvs.cli", "eval", "gymenvs/Wordle-v0", "-n", "200000",
                                    "--workers", "2", "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
        assert process.returncode == 130, stderr
        assert "Traceback" not in stderr


SLEEPY_POLICY = """
import os, time

def act(messages, tools):
    with open("started", "a") as file:
        file.write("episode\\n")
    time.sleep(300)
    return "crane"
"""


def test_the_first_ctrl_c_lets_running_episodes_finish_and_a_second_quits_at_once(tmp_path):
    (tmp_path / "sleepy.py").write_text(SLEEPY_POLICY)
    process = subprocess.Popen([sys.executable, "-m", "gymenvs.cli", "eval", "gymenvs/Wordle-v0", "-n", "10", "--workers", "2",
                                "--policy", "sleepy:act", "--no-progress"], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    started = tmp_path / "started"
    try:
        deadline = time.monotonic() + 60
        while not (started.exists() and len(started.read_text().splitlines()) == 2) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(started.read_text().splitlines()) == 2  # one running episode per worker
        process.send_signal(signal.SIGINT)
        line = ""
        while "[stopping: the running episodes finish" not in line:  # (after any warning printed before it)
            line = process.stderr.readline()
            assert line, "the command ended at the first Ctrl-C"
        time.sleep(1)
        assert process.poll() is None  # still waiting for the two running episodes
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130 and "[interrupted]" in stderr and "Traceback" not in stderr, stderr
    assert len(started.read_text().splitlines()) == 2  # no episode started after the first Ctrl-C
