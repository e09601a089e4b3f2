"""`gymenvs tasks regrade`: stored episodes graded again, without the agent, by the grader and tasks of now (SWE from the
stored diff, Terminal from the snapshot or the changed files its grading kept). The rewards equal the first grading's,
and a task whose tests changed in between shows its episodes changing."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import gymnasium as gym
import pytest
from swe.swe_support import FIXTURE_IDS

from gymenvs.container.regrading import StoredEpisode, regrade_episodes
from gymenvs.swe.family import SWEFamily
from gymenvs.swe.tasks import FIXTURES
from gymenvs.swe.tasks.tasks import fixtures_path as swe_fixtures
from gymenvs.terminal.family import HarborFamily
from gymenvs.terminal.tasks import fixtures_path
from gymenvs.trajectories import RecordTrajectories

from .tools_support import SUBMIT, TASKS, bash, write_and_apply

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
#: Episodes played, and episodes graded again (`gymenvs tasks regrade --workers`), at a time: most of an episode or a
#: grading waits on the engine, so a few overlap well on two cores.
WORKERS = 3
#: serve-status's tests need the web server its oracle left running: the re-grading starts it again, as grading did.
TERMINAL = ["gymenvs/edit-config", "gymenvs/csv-report", "gymenvs/serve-status"]
#: Every fixture of one step whose oracle always scores 1.
ONE_STEP = [
    "gymenvs/configure-service",
    "gymenvs/csv-report",
    "gymenvs/edit-config",
    "gymenvs/fix-build",
    "gymenvs/record-in-sidecar",
    "gymenvs/serve-status",
]
#: A task whose agent deletes a file and a folder of its image, and whose tests check they are gone.
TIDY_UP = {
    "task.toml": """\
        schema_version = "1.1"
        [task]
        name = "gymenvs/tidy-up"
        [verifier]
        timeout_sec = 60
        [environment]
        cpus = 1
        memory_mb = 512
        storage_mb = 1024
        allow_internet = false
        """,
    "instruction.md": "Delete /app/old.txt and the folder /app/cache; keep /app/notes.txt.\n",
    "environment/Dockerfile": "FROM gymenvs/swe-base:bookworm\nWORKDIR /app\nCOPY app/ /app/\n",
    "environment/app/old.txt": "old\n",
    "environment/app/notes.txt": "notes\n",
    "environment/app/cache/stale.txt": "stale\n",
    "tests/test.sh": """\
        #!/bin/bash
        if [ ! -e /app/old.txt ] && [ ! -e /app/cache ] && [ -f /app/notes.txt ]; then echo 1; else echo 0; fi \\
          > /logs/verifier/reward.txt
        """,
    "solution/solve.sh": "#!/bin/bash\nrm -r /app/old.txt /app/cache\n",
}


def write_task(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text))


def oracle_episodes(tasks: Path, names: list[str], folder: Path, **options) -> list[dict]:
    """One Terminal-v0 episode per task of `tasks` named in `names`, `WORKERS` at a time, each in an env of its own:
    its oracle through bash, then submit, recorded under `folder`; their grading reports, in the order of `names`."""

    def episode(name: str) -> dict:
        env = RecordTrajectories(gym.make("gymenvs/Terminal-v0", dataset=str(tasks), command_timeout_s=60.0, **options), folder)
        try:
            env.reset(options={"task": name})
            env.step(bash((tasks / name.split("/")[1] / "solution" / "solve.sh").read_text()))
            *_, info = env.step(SUBMIT)
        finally:
            env.close()
        return info["report"]

    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(episode, names))


def regrade(trajectories: Path, dataset: str | Path) -> tuple[int, dict[str, str]]:
    """`gymenvs tasks regrade`: its exit code and, per task, its line's "then -> now" and "same"/"changed"."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gymenvs.cli",
            "tasks",
            "regrade",
            str(trajectories),
            "--dataset",
            str(dataset),
            "--workers",
            str(WORKERS),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    print(result.stdout)  # shown when a test fails: each line's last column says why its reward is what it is
    assert result.returncode == 0, result.stderr
    lines = [line.split("\t") for line in result.stdout.splitlines() if line.count("\t") >= 4]
    return len(lines), {task: f"{rewards} {status}" for _, task, rewards, status, _ in lines}


def test_swe_episodes_are_graded_again_from_their_diff(swe_images, tmp_path):
    folder = tmp_path / "swe"

    def gold_episode(instance_id: str) -> float:  # the gold patch applied through bash, then submitted
        env = RecordTrajectories(gym.make("gymenvs/SWE-v0", command_timeout_s=60.0), folder)
        try:
            env.reset(options={"instance_id": instance_id})
            env.step(write_and_apply(TASKS[instance_id].patch, "gold.patch"))
            return env.step(SUBMIT)[1]
        finally:
            env.close()

    with ThreadPoolExecutor(WORKERS) as pool:
        assert list(pool.map(gold_episode, FIXTURE_IDS)) == [1.0] * 4
    count, lines = regrade(folder, FIXTURES)
    assert count == 4 and set(lines.values()) == {"1 -> 1 same"}

    changed = tmp_path / "tasks.jsonl"  # one task whose tests are now wrong: a FAIL_TO_PASS test that does not exist
    rows = [json.loads(line) for line in (swe_fixtures() / "tasks.jsonl").read_text().splitlines()]
    rows[0]["FAIL_TO_PASS"] = [*rows[0]["FAIL_TO_PASS"], "tests/test_missing.py::test_gone"]
    changed.write_text("".join(json.dumps(row) + "\n" for row in rows))
    _, lines = regrade(folder, changed)
    assert lines[rows[0]["instance_id"]] == "1 -> 0 changed"
    assert [value for task, value in lines.items() if task != rows[0]["instance_id"]] == ["1 -> 1 same"] * 3


def test_a_grading_that_could_not_run_is_an_error_and_never_a_changed_reward(swe_images, runtime, tmp_path):
    task = TASKS[FIXTURE_IDS[0]]  # its gold patch, graded with too little time for its tests to finish
    episode = StoredEpisode(tmp_path / "episode.json", "gymenvs/SWE-v0", task.instance_id, 1.0, {"patch": task.patch})
    [result] = regrade_episodes([episode], SWEFamily(grading_timeout_s=0.01), runtime)
    assert result.failed and not result.changed
    assert "\t1 -> error\terror\tGrading: timeout." in result.line() and "did not finish in 0.01 s" in result.line()


def test_terminal_episodes_are_graded_again_from_the_snapshot_they_kept(terminal_images, docker_client, tmp_path):
    tasks = tmp_path / "tasks"
    for name in TERMINAL:
        shutil.copytree(fixtures_path() / name.split("/")[1], tasks / name.split("/")[1])
    folder = tmp_path / "terminal"
    reports = oracle_episodes(tasks, TERMINAL, folder, keep_snapshots=True)
    snapshots = [report["snapshot"] for report in reports]
    try:
        assert [report["reward"] for report in reports] == [1.0] * 3
        assert all(docker_client.images.get(snapshot) for snapshot in snapshots)  # kept past the episode
        count, lines = regrade(folder, tasks)
        assert count == 3 and set(lines.values()) == {"1 -> 1 same"}
        (tasks / "edit-config" / "tests" / "test.sh").write_text("#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n")
        _, lines = regrade(folder, tasks)
        assert lines == {
            "gymenvs/edit-config": "1 -> 0 changed",
            "gymenvs/csv-report": "1 -> 1 same",
            "gymenvs/serve-status": "1 -> 1 same",
        }
    finally:
        for snapshot in snapshots:
            docker_client.images.remove(snapshot, force=True)


def test_terminal_episodes_are_graded_again_from_the_changed_files_they_kept(terminal_images, tmp_path):
    """Each one-step fixture's oracle episode, and one that deletes files of its image (they stay deleted), graded again
    in a fresh container of the task's image with the files put back: the same reward, but record-in-sidecar's, whose
    work lives in its sidecar (which starts afresh). A test.sh that now writes 0 turns its episode to 0."""
    tasks = tmp_path / "tasks"
    for name in ONE_STEP:
        shutil.copytree(fixtures_path() / name.split("/")[1], tasks / name.split("/")[1])
    write_task(tasks / "tidy-up", TIDY_UP)
    folder = tmp_path / "terminal"
    reports = oracle_episodes(tasks, [*ONE_STEP, "gymenvs/tidy-up"], folder, keep_changes=True)
    assert [report["reward"] for report in reports] == [1.0] * 7
    assert all(report["changes"]["archive"] and not report["changes"]["not_kept"] for report in reports)
    assert reports[-1]["changes"]["deleted"] == ["/app/cache", "/app/old.txt"]
    count, lines = regrade(folder, tasks)
    assert count == 7 and lines == {
        **{name: "1 -> 1 same" for name in [*ONE_STEP, "gymenvs/tidy-up"]},
        "gymenvs/record-in-sidecar": "1 -> 0 changed",
    }
    (tasks / "edit-config" / "tests" / "test.sh").write_text("#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n")
    edit_config = next(path for path in folder.rglob("*.json") if StoredEpisode.read(path).instance_id == "gymenvs/edit-config")
    assert regrade(edit_config, tasks) == (1, {"gymenvs/edit-config": "1 -> 0 changed"})


def test_changes_past_the_limit_are_not_kept_and_the_report_says_why(terminal_images, runtime):
    env = gym.make("gymenvs/Terminal-v0", instance_ids=["gymenvs/edit-config"], keep_changes=True, changes_limit="1k")
    try:
        env.reset(seed=0)
        env.step(bash("head -c 100000 /dev/urandom > /app/noise.bin"))
        *_, info = env.step(SUBMIT)
    finally:
        env.close()
    changes = info["report"]["changes"]
    why = "the changed files take more than 1024 bytes compressed, the limit (changes_limit)"
    assert (info["outcome"], changes["not_kept"], changes["archive"]) == ("model", why, ""), info["report"]
    family = HarborFamily()
    task = next(task for task in family.load_tasks() if task.name == "gymenvs/edit-config")
    with pytest.raises(ValueError, match=re.escape(f"the episode's changed files were not kept: {why}")):
        family.regrade(task, {"report": info["report"]}, runtime)


def test_an_episode_that_kept_no_snapshot_says_so(terminal_images, tmp_path):
    folder = tmp_path / "terminal"
    env = RecordTrajectories(gym.make("gymenvs/Terminal-v0", instance_ids=["gymenvs/edit-config"]), folder)
    env.reset(seed=0)
    env.step(SUBMIT)
    env.close()
    result = subprocess.run(
        [sys.executable, "-m", "gymenvs.cli", "tasks", "regrade", str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 1 and (
        "0 -> error\terror\tgymenvs/edit-config: the episode kept no snapshot and no changed files to grade again "
        "(run it with keep_snapshots=True or keep_changes=True)" in result.stdout
    )
    assert result.stdout.endswith("1 episodes graded again: 0 changed, 0 the same, 1 could not be graded\n")
