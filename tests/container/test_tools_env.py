"""The tools env (`ToolsEnv`): gymenvs/SWE-v0 end to end against the real Docker engine, on every shipped fixture task."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from env_support import envs_made
from episode_support import play_all
from swe.swe_support import FIXTURE_IDS, FIXTURE_TASKS, own_containers

from gymenvs.container.runtime.docker.sandbox import DockerSandbox
from gymenvs.container.runtime.owners import LABEL_ROLE
from gymenvs.core import is_trainable
from gymenvs.swe.grading import grade
from gymenvs.swe.images import image_for

from .tools_support import FORCE_PASS_CONFTEST, SUBMIT, TASKS, bash, ending, start, submit, write_and_apply

pytestmark = pytest.mark.docker


#: Episodes played at once by `episodes` (they wait on the engine and on pytest in their containers, which takes the
#: CPU: on 2 loaded cores the 15 took 35-41 s one at a time, 19-33 s three at a time, 20-30 s four or six at a time).
WORKERS = 3
#: The tasks the editing-the-tests cheat is tried on (not the upstream task: its regression test checks with
#: pytest.raises, which `assert True` leaves failing).
EDITABLE_IDS = [i for i in FIXTURE_IDS if TASKS[i].extra.get("upstream") is None]


def why(info: dict) -> tuple:
    """How an episode's step ended, for an assertion's message."""
    report = info.get("report") or {}
    return info.get("status"), info.get("outcome"), info.get("outcome_reason"), info.get("error"), report.get("status")


def play_gold(make, instance_id):
    """The gold patch applied with bash, then submitted: both steps."""
    env = start(make, instance_id)
    return env.step(write_and_apply(TASKS[instance_id].patch, "gold.patch")), env.step(SUBMIT)


def play_empty(make, instance_id):
    """Submitted at once: the reward and the report."""
    return submit(start(make, instance_id))


def play_edited_tests(make, instance_id):
    """The failing tests edited to pass: what pytest said in the agent's container, the reward and the report."""
    task = TASKS[instance_id]
    env = start(make, instance_id)
    env.step(write_and_apply(task.test_patch, "tests.patch"))
    files = " ".join(task.test_files)
    env.step(bash(f"sed -i 's/^\\( *\\)assert .*/\\1assert True/' {files}"))
    local = env.step(bash(f"python3 -m pytest -rA -p no:cacheprovider {files}"))[0]
    return (local, *submit(env))


def play_forced_conftest(make, instance_id):
    """A conftest.py that forces passes: what pytest said in the agent's container, the reward and the report."""
    task = TASKS[instance_id]
    env = start(make, instance_id)
    env.step({"name": "create_file", "arguments": {"path": "conftest.py", "content": FORCE_PASS_CONFTEST}})
    env.step(write_and_apply(task.test_patch, "tests.patch"))
    local = env.step(bash(f"python3 -m pytest -rA -p no:cacheprovider {' '.join(task.test_files)}"))[0]
    env.step(bash("git checkout -q -- . && git clean -fdq tests && git status --short"))
    return (local, *submit(env))


PLAYS = {"gold": (play_gold, FIXTURE_IDS), "empty": (play_empty, FIXTURE_IDS),
         "edited tests": (play_edited_tests, EDITABLE_IDS), "forced conftest": (play_forced_conftest, FIXTURE_IDS)}


@pytest.fixture(scope="module")
def episodes(swe_images):
    """The episodes of the per-task tests below, each played once in its own env (closed when it ends), `WORKERS`
    at a time: by (kind, instance id), what its test asserts on."""

    def episode(play, instance_id):
        def played():
            with envs_made("gymenvs/SWE-v0", command_timeout_s=20.0) as make:  # as the `make_env` fixture
                return play(make, instance_id)
        return played

    return play_all({(kind, instance_id): episode(play, instance_id)
                     for kind, (play, ids) in PLAYS.items() for instance_id in ids}, WORKERS)


@pytest.mark.parametrize("instance_id", FIXTURE_IDS)
def test_gold_patch_applied_through_bash_grades_one(episodes, instance_id):
    task = TASKS[instance_id]
    applied, submitted = episodes["gold", instance_id].result()
    observation, reward, terminated, truncated, info = applied
    assert info["exit_code"] == 0 and reward == 0.0 and not terminated and "report" not in info, (observation, why(info))
    observation, reward, terminated, truncated, info = submitted
    report = info["report"]
    assert reward == 1.0 and report["status"] == "resolved" and terminated and not truncated, why(info)
    assert ending(info) == ("model", "solved")
    assert report["fail_to_pass"] == dict.fromkeys(task.fail_to_pass, "PASSED")
    assert report["pass_to_pass"] == dict.fromkeys(task.pass_to_pass, "PASSED")
    assert report["tests_status"]["FAIL_TO_PASS"] == {"success": list(task.fail_to_pass), "failure": []}


@pytest.mark.parametrize("instance_id", FIXTURE_IDS)
def test_empty_submission_grades_zero_with_the_failing_tests_reported(episodes, instance_id):
    task = TASKS[instance_id]
    reward, report = episodes["empty", instance_id].result()
    assert reward == 0.0 and report["status"] == "unresolved" and report["patch_is_empty"], report["status"]
    assert report["fail_to_pass"] == dict.fromkeys(task.fail_to_pass, "FAILED")
    assert report["pass_to_pass"] == dict.fromkeys(task.pass_to_pass, "PASSED")


@pytest.mark.parametrize("instance_id", EDITABLE_IDS)
def test_editing_the_failing_tests_to_pass_grades_zero(episodes, instance_id):
    task = TASKS[instance_id]
    local, reward, report = episodes["edited tests", instance_id].result()
    assert all(f"PASSED {name}" in local for name in task.fail_to_pass), local  # the cheat works in the agent's container
    assert reward == 0.0 and report["status"] == "unresolved", report["status"]
    assert set(report["ignored_files"]) == set(task.test_files)
    assert report["fail_to_pass"] == dict.fromkeys(task.fail_to_pass, "FAILED")


@pytest.mark.parametrize("instance_id", FIXTURE_IDS)
def test_a_conftest_that_forces_passes_grades_zero(episodes, instance_id):
    task = TASKS[instance_id]
    local, reward, report = episodes["forced conftest", instance_id].result()
    assert all(f"PASSED {name}" in local for name in task.fail_to_pass), local  # the cheat works in the agent's container
    assert reward == 0.0 and report["ignored_files"] == {"conftest.py": "pytest configuration"}, report["status"]
    assert report["fail_to_pass"] == dict.fromkeys(task.fail_to_pass, "FAILED")


def test_the_agent_never_sees_the_hidden_tests_or_a_grade(make_env):
    task = TASKS[FIXTURE_IDS[0]]
    env = start(make_env, task.instance_id)
    test_name = task.fail_to_pass[0].split("::")[1]
    observation, reward, terminated, truncated, info = env.step(bash(f"grep -rn {test_name} / --include=*.py 2>/dev/null; true"))
    assert test_name not in observation.replace(f"grep -rn {test_name}", "")
    assert reward == 0.0 and not (terminated or truncated) and set(info) == {"exit_code", "timed_out", "shell_restarted"}


def test_file_tools_view_edit_and_create(make_env):
    env = start(make_env, "gymenvs-fixtures__intervals-1")
    view = env.step({"name": "view_file", "arguments": {"path": "intervals/ops.py", "start_line": 11, "end_line": 12}})[0]
    assert view == "    11\t            merged[-1] = (merged[-1][0], end)\n    12\t        else:"
    edit = {"path": "intervals/ops.py", "old_text": "(merged[-1][0], end)",
            "new_text": "(merged[-1][0], max(merged[-1][1], end))"}
    assert env.step({"name": "edit_file", "arguments": edit})[0] == "Edited /testbed/intervals/ops.py."
    again = env.step({"name": "edit_file", "arguments": edit})
    assert "old_text does not occur" in again[0] and "error" in again[4]
    created = env.step({"name": "create_file", "arguments": {"path": "notes/deep/todo.txt", "content": "é\n"}})
    assert created[0].startswith("Wrote")
    assert env.step(bash("cat notes/deep/todo.txt; git status --short"))[0] == "é\n M intervals/ops.py\n?? notes/\n[exit code: 0]"
    missing = env.step({"name": "view_file", "arguments": {"path": "nope.py"}})
    assert missing[0] == "Invalid action: /testbed/nope.py does not exist"
    reward, report = submit(env)
    assert reward == 1.0


def test_the_turn_limit_grades_the_work_done(make_env):
    task = TASKS["gymenvs-fixtures__romans-1"]
    env = start(make_env, task.instance_id, max_turns=2)
    env.step(write_and_apply(task.patch, "gold.patch"))
    observation, reward, terminated, truncated, info = env.step(bash("echo out of turns"))
    assert truncated and not terminated and reward == 1.0
    assert info["truncated_reason"] == "turn_limit" and info["report"]["status"] == "resolved"
    assert ending(info) == ("model", "solved")  # resolved at the turn limit is still the agent's success
    assert "Turn limit reached" in observation and "Grading: resolved" in observation


def test_free_text_runs_as_bash_and_bad_calls_are_observations(make_env):
    env = start(make_env, FIXTURE_IDS[0])
    assert env.step("echo $((6 * 7))")[0] == "42\n[exit code: 0]"
    observation, reward, terminated, truncated, info = env.step({"name": "bash", "arguments": {}})
    assert "missing argument 'command'" in observation and "error" in info and not (terminated or truncated)


def test_a_container_killed_from_outside_truncates_and_the_env_resets(make_env, docker_client):
    env = start(make_env, FIXTURE_IDS[1])
    docker_client.api.kill(env.unwrapped.state()["container"])
    observation, reward, terminated, truncated, info = env.step(bash("echo hi"))
    assert truncated and not terminated and reward == 0.0
    assert "killed from outside" in info["error"] and "episode cannot go on" in observation
    assert ending(info) == ("infra", "container_died") and info["outcome_detail"] == info["error"]
    env.reset(options={"instance_id": FIXTURE_IDS[1]})
    assert env.step(bash("echo back"))[0] == "back\n[exit code: 0]"


def test_a_container_killed_before_submit_is_not_graded_and_ends_as_infra(make_env, docker_client):
    task = TASKS[FIXTURE_IDS[0]]
    env = start(make_env, task.instance_id)
    env.step(write_and_apply(task.patch, "gold.patch"))  # work that would resolve the task
    docker_client.api.kill(env.unwrapped.state()["container"])
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert ending(info) == ("infra", "container_died") and "killed from outside" in info["outcome_detail"]
    assert info["report"]["status"] == "error" and not is_trainable(info)
    assert own_containers(docker_client) == []


def roles(client) -> list[str]:
    return sorted(container.labels[LABEL_ROLE] for container in own_containers(client))


def test_the_grading_container_starts_during_the_episode_and_leaves_nothing(make_env, docker_client):
    task = TASKS[FIXTURE_IDS[0]]
    env = start(make_env, task.instance_id)
    assert roles(docker_client) == ["agent"]  # reset starts nothing for grading: the agent's start-up comes first
    env.step(write_and_apply(task.patch, "gold.patch"))
    deadline = time.monotonic() + 30
    while roles(docker_client) != ["agent", "grading"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert roles(docker_client) == ["agent", "grading"]  # started by the first step, before any submit
    reward, report = submit(env)
    assert reward == 1.0 and report["status"] == "resolved"
    assert own_containers(docker_client) == []
    env.reset(options={"instance_id": task.instance_id})
    env.step(bash("echo abandoned"))  # starts another grading container, which this episode never uses
    env.reset(options={"instance_id": task.instance_id})
    env.close()
    assert own_containers(docker_client) == []


def test_grading_reads_the_agents_files_from_its_layer_as_the_engine_would(make_env, monkeypatch):
    """Grading reads what the agent wrote (and the tests' results) from the containers' layers on this host, with no
    file read through the engine; the graded diff is the one the engine's reads give (a new file, a symbolic link, a
    second name of a file included), and so is the reward."""
    task = TASKS[FIXTURE_IDS[0]]
    extras = "printf 'notes\\n' > NOTES.md && ln -s NOTES.md NOTES-link.md && ln NOTES.md NOTES-second.md"
    engine_reads: list[str] = []
    real_read_archive = DockerSandbox.read_archive

    def read_archive(sandbox, path):
        engine_reads.append(path)
        return real_read_archive(sandbox, path)

    def graded(through_engine: bool) -> tuple[float, dict]:
        with monkeypatch.context() as patched:
            patched.setattr(DockerSandbox, "read_archive", read_archive)
            if through_engine:  # as where this process cannot read the layers (another host's engine, say)
                patched.setattr(DockerSandbox, "changes_archive", lambda sandbox, paths, limit: None)
            env = start(make_env, task.instance_id)
            env.step(write_and_apply(task.patch, "gold.patch"))
            env.step(bash(extras))
            engine_reads.clear()
            observation, reward, terminated, truncated, info = env.step(SUBMIT)
            return reward, {**info, "engine_reads": list(engine_reads)}

    from_layer, through_engine = graded(through_engine=False), graded(through_engine=True)
    assert from_layer[0] == through_engine[0] == 1.0
    assert from_layer[1]["engine_reads"] == [] and through_engine[1]["engine_reads"]
    patch = from_layer[1]["patch"]
    assert patch == through_engine[1]["patch"]
    assert "+++ b/NOTES.md" in patch and "+++ b/NOTES-second.md" in patch and "new file mode 120000" in patch


def test_a_grading_timeout_ends_as_infra_not_as_a_failure(make_env):
    env = start(make_env, FIXTURE_IDS[0], grading_timeout_s=0.01)
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert info["report"]["status"] == "timeout" and reward == 0.0 and truncated and not terminated
    assert ending(info) == ("infra", "grading_timeout") and "did not finish in 0.01 s" in info["outcome_detail"]


def test_a_task_whose_test_patch_does_not_apply_ends_as_invalid(make_env):
    task = TASKS[FIXTURE_IDS[0]]
    env = make_env()
    broken = dataclasses.replace(task, test_patch=task.test_patch.replace("\n ", "\n XX-not-in-the-repo ", 1))
    env.unwrapped.tasks = (broken,)
    env.reset(options={"instance_id": task.instance_id})
    env.step(write_and_apply(task.patch, "gold.patch"))
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert reward == 0.0 and truncated and ending(info) == ("invalid", "broken_task")
    assert "test_patch does not apply" in info["outcome_detail"]


def test_unknown_ids_and_missing_images_are_clear_errors_with_nothing_left_running(make_env, docker_client):
    env = make_env()
    with pytest.raises(ValueError, match="instance_id='nope' is not a task of this env"):
        env.reset(options={"instance_id": "nope"})
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"instance": FIXTURE_IDS[0]})
    offline = make_env(image_template="localhost:1/gymenvs-missing/{swebench_id}:latest", pull=True)
    offline.unwrapped.tasks = tuple(t.__class__(**{**t.__dict__, "image": None}) for t in FIXTURE_TASKS)
    with pytest.raises(RuntimeError, match="is not present locally and could not be pulled"):
        offline.reset(seed=0)
    assert own_containers(docker_client) == []
    env.reset(options={"instance_id": FIXTURE_IDS[0]})  # the env is still usable


def test_a_patch_that_does_not_apply_is_reported(runtime, docker_client, swe_images):
    task = TASKS[FIXTURE_IDS[0]]
    stale = task.patch.replace("    chars = []\n", "    letters = []\n")  # context the base commit does not have
    report = grade(runtime, task, stale, image=image_for(task), timeout=60)
    assert report.status == "patch_failed" and report.reward == 0.0 and "does not apply" in report.error
    assert own_containers(docker_client) == []


@pytest.mark.slow
def test_eight_episodes_at_once_in_threads_without_cross_talk(make_env, docker_client):
    def episode(slot: int):
        task = FIXTURE_TASKS[slot % len(FIXTURE_TASKS)]
        env = start(make_env, task.instance_id)
        token = f"slot{slot}-{uuid.uuid4().hex[:8]}"
        env.step(bash(f"export TOKEN={token} && echo {token} > /tmp/token && echo {token} >> README.md"))
        if slot % 2 == 0:
            env.step(write_and_apply(task.patch, "gold.patch"))
        seen = env.step(bash("cat /tmp/token; echo $TOKEN; tail -n 1 README.md"))[0]
        observation, reward, terminated, truncated, info = env.step(SUBMIT)
        env.close()
        return token, seen, reward, info["patch"], (info["status"], info["outcome_reason"], info.get("error"))

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(episode, range(8)))
    tokens = [token for token, *_ in results]
    for slot, (token, seen, reward, patch, ended) in enumerate(results):
        assert seen == f"{token}\n{token}\n{token}\n[exit code: 0]"
        assert reward == (1.0 if slot % 2 == 0 else 0.0), (slot, ended)
        assert f"+{token}\n" in patch and not any(other in patch for other in tokens if other != token), (slot, ended)
    assert own_containers(docker_client) == []


@pytest.mark.slow
def test_env_passes_gymnasiums_checker(make_env):
    from gymnasium.utils.env_checker import check_env

    check_env(make_env(command_timeout_s=5.0).unwrapped, skip_render_check=True)


def test_the_documented_swe_example_runs(swe_images, capsys):
    page = (Path(__file__).resolve().parents[2] / "docs" / "swe.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.DOTALL) if "gymenvs/SWE-v0" in b]
    exec(compile(block, "docs/swe.md", "exec"), {"__name__": "documented_example"})
    assert "1.0 resolved" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_lists_tasks_grades_gold_patches_and_reaps(swe_images, tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "gymenvs.cli", "swe", *args], capture_output=True, text=True,
                              timeout=300, cwd=Path(__file__).resolve().parents[2])

    listing = cli("tasks")
    assert listing.returncode == 0 and [line.split("\t")[0] for line in listing.stdout.splitlines()] == FIXTURE_IDS
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("".join(json.dumps({"instance_id": i, "model_patch": TASKS[i].patch if n else ""}) + "\n"
                                   for n, i in enumerate(FIXTURE_IDS[:2])))
    graded = cli("grade", "--predictions", str(predictions), "--output", str(tmp_path / "reports.json"), "--quiet",
                 "--log-dir", str(tmp_path / "logs"), "--report-dir", str(tmp_path))
    assert graded.returncode == 1, graded.stderr  # one of the two is not resolved
    assert f"{FIXTURE_IDS[0]}\tempty_patch" in graded.stdout and f"{FIXTURE_IDS[1]}\tresolved" in graded.stdout
    reports = json.loads((tmp_path / "reports.json").read_text())
    assert reports[0] is None and reports[1][FIXTURE_IDS[1]]["resolved"]  # an empty patch is not graded
    assert cli("reap").stdout.startswith("removed ")


#: A new module of the package under test that imports pytest's internals: the static screen's `framework-import`.
PROBE = """diff --git a/textkit/probe.py b/textkit/probe.py
new file mode 100644
--- /dev/null
+++ b/textkit/probe.py
@@ -0,0 +1 @@
+import _pytest.runner
"""


@pytest.mark.slow
@pytest.mark.parametrize(("screen", "status"), [("zero", "screened"), ("flag", "resolved")])
def test_cli_grade_screen_zeroes_or_flags_a_patch_that_targets_the_test_run(swe_images, tmp_path, screen, status):
    task = TASKS[FIXTURE_IDS[0]]
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text(json.dumps({"instance_id": task.instance_id, "model_patch": task.patch + PROBE}) + "\n")
    graded = subprocess.run([sys.executable, "-m", "gymenvs.cli", "swe", "grade", "--predictions", str(predictions),
                             "--screen", screen, "--output", str(tmp_path / "reports.json"), "--quiet",
                             "--log-dir", str(tmp_path / "logs"), "--report-dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert graded.returncode == (0 if status == "resolved" else 1), graded.stderr
    (report,) = [reports[task.instance_id]["gymenvs"] for reports in json.loads((tmp_path / "reports.json").read_text())]
    assert report["status"] == status and [finding["rule"] for finding in report["screen"]] == ["framework-import"]
