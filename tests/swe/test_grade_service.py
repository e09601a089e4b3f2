"""`gymenvs swe grade` (many predictions, the harness's report layout, resuming) and grading verdicts
that need a real run: a test command that cannot start is an error that truncates the episode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gymenvs.swe.grading import GradeReport
from gymenvs.swe.grading.evaluate import Prediction, grade_predictions, read_predictions
from swe.swe_support import FIXTURE_TASKS

pytestmark = pytest.mark.docker
TASKS = {task.instance_id: task for task in FIXTURE_TASKS}
TEXTKIT, INTERVALS, ROMANS = "gymenvs-fixtures__textkit-1", "gymenvs-fixtures__intervals-1", "gymenvs-fixtures__romans-1"
UPSTREAM = "gymenvs-upstream__itsdangerous-2.1.1"
NOT_A_FIX = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1,2 @@\n{first}\n+More words.\n"
DOES_NOT_APPLY = "diff --git a/nothing.py b/nothing.py\n--- a/nothing.py\n+++ b/nothing.py\n@@ -1 +1 @@\n-absent\n+present\n"


def grade_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gymenvs.cli", "swe", "grade", "--quiet", "--run-id", "r1",
                           "--log-dir", str(tmp_path / "logs"), "--report-dir", str(tmp_path), *args],
                          capture_output=True, text=True, timeout=600, cwd=Path(__file__).resolve().parents[2])


@pytest.mark.slow
def test_grade_writes_the_harness_layout_and_resumes(swe_images, tmp_path):
    repos = Path(__file__).resolve().parents[2] / "gymenvs/swe/tasks/fixtures/repos"
    readme = (repos / "romans/README.md").read_text().splitlines()[0]
    rows = [{"instance_id": UPSTREAM, "model_patch": TASKS[UPSTREAM].patch},
            {"instance_id": TEXTKIT, "model_patch": TASKS[TEXTKIT].patch},
            {"instance_id": ROMANS, "model_patch": NOT_A_FIX.format(first=f" {readme}")},
            {"instance_id": INTERVALS, "model_patch": DOES_NOT_APPLY}]
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("".join(json.dumps({**row, "model_name_or_path": "org/model"}) + "\n" for row in rows))

    first = grade_cli(tmp_path, "--predictions", str(predictions), "--workers", "2")
    assert first.returncode == 1, first.stderr  # not all resolved
    summary = json.loads((tmp_path / "org__model.r1.json").read_text())
    assert summary["resolved_ids"] == sorted([UPSTREAM, TEXTKIT]) and summary["unresolved_ids"] == [ROMANS]
    assert summary["error_ids"] == [INTERVALS]  # the patch does not apply: no report.json, as in the harness
    instance = tmp_path / "logs/r1/org__model"
    report = json.loads((instance / UPSTREAM / "report.json").read_text())[UPSTREAM]
    assert report["resolved"] and report["patch_successfully_applied"] and not report["patch_is_None"]
    assert report["tests_status"]["FAIL_TO_PASS"] == {"success": list(TASKS[UPSTREAM].fail_to_pass), "failure": []}
    assert json.loads((instance / ROMANS / "report.json").read_text())[ROMANS]["resolved"] is False
    assert not (instance / INTERVALS / "report.json").exists()

    (instance / TEXTKIT / "report.json").unlink()  # as if the run had been killed before grading it
    again = grade_cli(tmp_path, "--predictions", str(predictions), "--workers", "2")
    lines = dict(line.split("\t", 1) for line in again.stdout.splitlines() if "\t" in line)
    assert lines[UPSTREAM] == lines[ROMANS].replace("unresolved", "resolved") == "resolved (from an earlier run)"
    assert lines[TEXTKIT].startswith("resolved\t") and lines[INTERVALS].startswith("patch_failed\t")  # graded again
    assert json.loads((tmp_path / "org__model.r1.json").read_text()) == summary


def test_predictions_in_each_of_the_harness_formats(tmp_path):
    rows = [{"instance_id": "a", "model_patch": "x", "model_name_or_path": "m"}, {"instance_id": "b", "model_patch": None}]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "p.json").write_text(json.dumps({row["instance_id"]: row for row in rows}))
    (tmp_path / "l.json").write_text(json.dumps(rows))
    read = [read_predictions(tmp_path / name) for name in ("p.jsonl", "p.json", "l.json")]
    assert read[0] == read[1] == read[2]
    assert [p.model_patch for p in read_predictions(tmp_path / "p.jsonl")] == ["x", None]
    (tmp_path / "bad.json").write_text(json.dumps([{"model_patch": "x"}]))
    with pytest.raises(ValueError, match="no instance_id"):
        read_predictions(tmp_path / "bad.json")


def test_predictions_for_unknown_or_repeated_instances_are_refused(tmp_path):
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text(json.dumps({"instance_id": "nope__nope-1", "model_patch": "x"}) + "\n")
    refused = grade_cli(tmp_path, "--predictions", str(predictions))
    assert refused.returncode == 2 and "nope__nope-1" in refused.stderr and "Traceback" not in refused.stderr
    predictions.write_text(2 * (json.dumps({"instance_id": TEXTKIT, "model_patch": "x"}) + "\n"))
    refused = grade_cli(tmp_path, "--predictions", str(predictions))
    assert refused.returncode == 2 and "more than one prediction" in refused.stderr


def test_a_test_command_that_cannot_start_truncates_the_episode_with_an_error(make_env, tmp_path):
    """The row's own test_cmd asks for a plugin the image lacks (pytest exits 4): not a failing agent."""
    row = json.loads((Path(__file__).resolve().parents[2] / "gymenvs/swe/tasks/fixtures/tasks.jsonl").read_text().splitlines()[0])
    row["test_cmd"] = "pytest -rA -n 2 " + " ".join(TASKS[row["instance_id"]].test_files)
    dataset = tmp_path / "tasks.jsonl"
    dataset.write_text(json.dumps(row) + "\n")
    env = make_env(dataset=str(dataset))
    env.reset()
    observation, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": {}})
    assert truncated and not terminated and reward == 0.0
    assert info["status"] == "error" and "exit 4" in info["error"] and "could not run" in info["error"]


def test_a_run_started_again_reads_back_its_reports_instead_of_grading_again(tmp_path):
    task = TASKS[TEXTKIT]
    kwargs = dict(tasks={task.instance_id: task}, run_id="r1", log_dir=tmp_path, progress=False,
                  grade_one=lambda task, patch: GradeReport(task.instance_id, "resolved", test_exit_code=0))
    first = grade_predictions([Prediction(task.instance_id, task.patch)], **kwargs)
    assert [o.status for o in first] == ["resolved"] and not first[0].resumed
    again = grade_predictions([Prediction(task.instance_id, task.patch)], **kwargs)
    assert again[0].resumed  # the same run, read back from the report.json the first call wrote
