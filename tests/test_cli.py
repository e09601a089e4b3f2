"""The `gymenvs` command, run as a person would: in a subprocess, typing on stdin."""

import subprocess
import sys

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
    import signal
    import time

    # 200,000 Wordle episodes take minutes; Ctrl-C must end the run within seconds, as a shell expects.
    process = subprocess.Popen([sys.executable, "-m", "gymenvs.cli", "eval", "gymenvs/Wordle-v0", "-n", "200000",
                                "--workers", "2", "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(4)  # past start-up: the episodes are running
    process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
