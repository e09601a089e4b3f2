"""The `gymenvs` command, run as a person would: in a subprocess, typing on stdin."""

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from keyboard_support import ctrl_c_as_in_a_terminal

import gymenvs

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "user_env" / "guess_number"


def gymenvs_cli(*args, stdin="", cwd=None):
    return subprocess.run([sys.executable, "-m", "gymenvs.cli", *args], input=stdin, capture_output=True, text=True, timeout=60,
                          cwd=cwd)


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


@pytest.mark.slow
def test_ctrl_c_stops_an_eval_without_starting_the_remaining_episodes():
    # 200,000 Wordle episodes take minutes; Ctrl-C must end the run within seconds, as a shell expects.
    # Sent at any moment once the episodes run (the old thread pool hung at exit when it landed inside its locks).
    for delay in (0.0, 1.0, 2.5):
        process = subprocess.Popen([sys.executable, "-m", "gymenvs.cli", "eval", "gymenvs/Wordle-v0", "-n", "200000",
                                    "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   preexec_fn=ctrl_c_as_in_a_terminal)
        try:
            shown = ""
            while "gymenvs/Wordle-v0:" not in shown:  # the progress bar: past start-up, the episodes run
                character = process.stderr.read(1)
                assert character, "the eval ended before its progress bar"
                shown += character
            time.sleep(delay)
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
        assert process.returncode == 130, shown + stderr
        assert "Traceback" not in stderr


SLEEPY_POLICY = """
import os, time

def act(messages, tools):
    with open("started", "a") as file:
        file.write("episode\\n")
    time.sleep(300)
    return "crane"
"""


@pytest.mark.slow  # waits out a timeout or a subprocess: the quick lane leaves it to the full suite
def test_the_first_ctrl_c_lets_running_episodes_finish_and_a_second_quits_at_once(tmp_path):
    (tmp_path / "sleepy.py").write_text(SLEEPY_POLICY)
    process = subprocess.Popen([sys.executable, "-m", "gymenvs.cli", "eval", "gymenvs/Wordle-v0", "-n", "10", "--workers", "2",
                                "--policy", "sleepy:act", "--no-progress"], cwd=tmp_path, stderr=subprocess.PIPE, text=True,
                               preexec_fn=ctrl_c_as_in_a_terminal)
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


def bench_table(result):
    """The rows of `gymenvs bench`'s table, by name."""
    assert result.returncode == 0, result.stderr
    return dict(re.split(r"\s{2,}", line, maxsplit=1) for line in result.stdout.splitlines())


@pytest.mark.slow  # three `gymenvs bench` processes: about 2 s
def test_bench_times_a_built_in_env_with_its_scripted_player_in_one_env_and_in_a_vector_env():
    one = bench_table(gymenvs_cli("bench", "gymenvs/Wordle-v0", "-n", "5"))
    assert one["env"] == "gymenvs/Wordle-v0 (one env)" and one["policy"] == "scripted" and one["episodes"] == "5"
    assert 5 <= int(one["steps"]) <= 30 and float(one["steps/s"]) > 0
    assert re.fullmatch(rf"mean [\d.]+ ms, p99 [\d.]+ ms \({one['steps']} step calls\)", one["step latency"])
    vector = bench_table(gymenvs_cli("bench", "gymenvs/Catch-v0", "--steps", "40", "--num-envs", "4", "--backend", "thread",
                                     "-k", "rows=4"))
    assert vector["env"] == "gymenvs/Catch-v0 (vector env, 4 slots on backend='thread')"
    assert vector["steps"] == "40" and int(vector["episodes"]) >= 10  # rows=4: an episode lasts 3 steps
    assert "(10 step calls)" in vector["step latency"]  # one call steps all 4 slots
    random = bench_table(gymenvs_cli("bench", "gymenvs/Sudoku-v0", "--policy", "random", "--steps", "20"))
    assert random["policy"] == "random" and random["steps"] == "20"


@pytest.mark.slow  # two `gymenvs bench` processes, one with a process vector env: about 2 s
def test_bench_runs_a_users_env_by_import_and_by_module_id_with_the_users_policy(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "guess_number")
    policy = ("--policy", "guess_number.policy:bisect")
    by_import = bench_table(gymenvs_cli("bench", "guess_number/GuessNumber-v0", "--import", "guess_number", *policy, "-n", "4",
                                        cwd=tmp_path))
    assert by_import["episodes"] == "4" and by_import["policy"] == "guess_number.policy:bisect"
    assert int(by_import["steps"]) <= 4 * 7  # bisection finds 1..100 in at most 7 guesses
    by_module = bench_table(gymenvs_cli("bench", "guess_number:guess_number/GuessNumber-v0", *policy, "-n", "4",
                                        "--num-envs", "2", "--backend", "process", cwd=tmp_path))
    assert by_module["env"] == "guess_number/GuessNumber-v0 (vector env, 2 slots on backend='process')"
    assert int(by_module["episodes"]) >= 4


BAD_BENCH_ARGUMENTS = {
    ("gymenvs/Wordel-v0",): "gymenvs bench: env id 'gymenvs/Wordel-v0' is not registered (did you mean 'gymenvs/Wordle-v0'",
    ("nosuch:Foo-v0",): "gymenvs bench: cannot import 'nosuch' to register its envs: No module named 'nosuch'",
    ("gymenvs/Sudoku-v0",): "gymenvs bench: no scripted policy for 'gymenvs/Sudoku-v0'",
    ("gymenvs/Wordle-v0", "-n", "0"): "gymenvs bench: episodes=0: expected a whole number of at least 1",
    ("gymenvs/Wordle-v0", "--num-envs", "2", "--backend", "fork"): "gymenvs bench: backend='fork': expected one of thread, ",
    ("gymenvs/Wordle-v0", "--backend", "process"): "gymenvs bench: --backend process needs --num-envs",
    ("gymenvs/Wordle-v0", "--policy", "nosuch:act"): "gymenvs bench: --policy 'nosuch:act': cannot import 'nosuch'",
    ("gymenvs/Wordle-v0", "-k", "max_guesses=0"): "gymenvs bench: WordleEnv got max_guesses=0: input should be greater",
}


@pytest.mark.slow
def test_bench_and_eval_say_what_is_wrong_with_their_arguments_in_one_line_and_exit_2():
    for args, message in BAD_BENCH_ARGUMENTS.items():
        result = gymenvs_cli("bench", *args)
        assert (result.returncode, result.stdout, result.stderr.count("\n")) == (2, "", 1), (args, result.stderr)
        assert result.stderr.startswith(message), (args, result.stderr)
    # the id is resolved before the policy is made: the id's error, not "no scripted policy for ..."
    for args, message in list(BAD_BENCH_ARGUMENTS.items())[:2]:
        result = gymenvs_cli("eval", *args)
        assert result.returncode == 2 and result.stderr.startswith(message.replace("bench", "eval")), result.stderr


def test_tasks_build_images_makes_each_tasks_image_and_its_agents_derived_images(terminal_images, docker_client):
    task, image = "gymenvs/edit-config", terminal_images["gymenvs/edit-config"]
    result = subprocess.run([sys.executable, "-m", "gymenvs.cli", "tasks", "build-images", "fixtures", "--format", "harbor",
                             "--instance-ids", task, "--agents", "mini-swe-agent", "--quiet"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "task images: 1 present" in result.stdout and "mini-swe-agent: " in result.stdout
    assert docker_client.images.get(f"{image}-mini-swe-agent-2.4.6")  # present now, built by this or an earlier run
    for argv, error in ((["--instance-ids", "nope"], "['nope'] not in the dataset"), (["--agents", "nosuch"], "nosuch")):
        bad = gymenvs_cli("tasks", "build-images", "fixtures", "--format", "harbor", *argv)
        assert bad.returncode == 2 and error in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
