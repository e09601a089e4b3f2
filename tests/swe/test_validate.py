"""`gymenvs tasks validate` on SWE tasks, on the real engine: the fixture tasks are valid, and three tasks
broken on purpose (tests/swe/data/validate/broken_tasks.jsonl, derived from textkit-1) are each caught by
the rule they break; a rerun skips what the report already judged;
an env refuses a task marked invalid."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gymenvs.container.validation import read_report, run_validation
from gymenvs.swe.family import SWEFamily
from gymenvs.swe.grading import GradeReport
from gymenvs.swe.grading.validate import judge
from gymenvs.swe.tasks import fixtures_path, load_tasks
from swe.swe_support import FIXTURE_IDS, FIXTURE_TASKS

ROOT = Path(__file__).resolve().parents[2]
BROKEN = Path(__file__).parent / "data" / "validate" / "broken_tasks.jsonl"
GOLD_FIXES_NOTHING = "gymenvs-broken__gold-does-not-resolve"
FLAKY = "gymenvs-broken__flaky-test"
EMPTY_RESOLVES = "gymenvs-broken__empty-patch-resolves"
TEXTKIT, ROMANS = "gymenvs-fixtures__textkit-1", "gymenvs-fixtures__romans-1"
COIN_FLIPS = {f"tests/test_flaky.py::test_passes_on_a_coin_flip[{i}]" for i in range(8)}
#: Tasks validated at a time (`--workers`; a report's content does not depend on it). Measured on two cores: the
#: module's validation of 7 tasks took a median 31 s with 2, 28 s with 3 and 25 s with 4; the rerun's 3 tasks 13 s
#: with 2 and 10 s with 3 or more.
WORKERS = 4


def validate_cli(command: str, dataset: Path, folder: Path) -> subprocess.CompletedProcess:
    """`gymenvs {command} validate DATASET --runs 2` with its report and valid tasks in `folder`."""
    return subprocess.run([sys.executable, "-m", "gymenvs.cli", *command.split(), "validate", str(dataset), "--runs", "2",
                           "--workers", str(WORKERS), "--quiet", "--report", str(folder / "report.jsonl"),
                           "--valid-tasks", str(folder / "valid.jsonl")],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)


@pytest.fixture(scope="module")
def run(swe_images, tmp_path_factory):
    """One `gymenvs tasks validate --runs 2` over the fixture tasks and the broken ones (about a minute).

    The flaky task's 8 coin-flip tests each keep one status over both runs of both patches with
    probability 1/4, so `flaky` misses them all with probability 2**-16."""
    folder = tmp_path_factory.mktemp("validate")
    dataset = folder / "tasks.jsonl"
    dataset.write_text((fixtures_path() / "tasks.jsonl").read_text() + BROKEN.read_text())
    result = validate_cli("tasks", dataset, folder)  # a .jsonl file: the SWE family
    assert result.returncode == 1, result.stderr  # some tasks are invalid
    return folder, read_report(folder / "report.jsonl"), result.stdout


def rules(verdict) -> dict[str, set[str]]:
    return {broken.rule: set(broken.tests) for broken in verdict.broken}


@pytest.mark.docker
@pytest.mark.slow
def test_the_fixture_tasks_are_valid_and_make_the_filtered_dataset(run):
    folder, report, _ = run
    for instance_id in FIXTURE_IDS:
        verdict = report[instance_id]
        assert (verdict.status, verdict.broken) == ("valid", []), verdict.summary()
        assert verdict.empty_runs == ["unresolved"] * 2 and verdict.gold_runs == ["resolved"] * 2
    assert load_tasks(str(folder / "valid.jsonl")) == FIXTURE_TASKS  # the broken tasks are left out


@pytest.mark.docker
@pytest.mark.slow
def test_a_gold_patch_that_does_not_resolve_is_caught(run):
    verdict = run[1][GOLD_FIXES_NOTHING]
    assert (verdict.status, verdict.rule) == ("invalid", "gold_does_not_resolve")
    fail_to_pass = set(load_tasks(str(BROKEN))[0].fail_to_pass)
    assert rules(verdict) == {"gold_does_not_resolve": fail_to_pass, "fail_to_pass_fails_after": fail_to_pass}
    # Each run says why: the test command's exit code, the reward, and the tests' own output.
    runs = [("empty", 0.0, "unresolved"), ("gold", 0.0, "unresolved")] * 2
    assert [(e.run, e.reward, e.reason) for e in verdict.evidence] == runs
    assert all(e.exit_code not in (None, 0) and "failed" in e.output for e in verdict.evidence), verdict.evidence


@pytest.mark.docker
@pytest.mark.slow
def test_a_flaky_test_is_caught_with_runs_2(run):
    verdict = run[1][FLAKY]
    assert (verdict.status, verdict.rule) == ("invalid", "flaky")
    found = rules(verdict)
    assert found["flaky"] and found["flaky"] <= COIN_FLIPS
    assert set().union(*found.values()) <= COIN_FLIPS  # no other test of the task is blamed


@pytest.mark.docker
@pytest.mark.slow
def test_an_empty_patch_that_resolves_is_caught(run):
    verdict = run[1][EMPTY_RESOLVES]
    assert (verdict.status, verdict.rule) == ("invalid", "empty_patch_resolves")
    already_passing = {"tests/test_slug.py::test_slugify_lowercases", "tests/test_slug.py::test_slugify_single_spaces"}
    assert rules(verdict) == {"empty_patch_resolves": set(), "fail_to_pass_passes_before": already_passing}


@pytest.mark.docker
@pytest.mark.slow
def test_the_command_prints_each_verdict(run):
    lines = dict(line.split("\t", 1) for line in run[2].splitlines() if "\t" in line)
    assert lines[TEXTKIT].startswith("valid\t")
    assert lines[EMPTY_RESOLVES].startswith("invalid: empty_patch_resolves: resolved in 2 of 2 run(s); ")
    assert "valid 4/7, invalid 3, errors 0" in run[2]


@pytest.mark.docker
@pytest.mark.slow
def test_a_rerun_over_the_report_grades_nothing_and_says_the_same(run, tmp_path):
    """`gymenvs tasks validate` over a copy of the report grades nothing again and prints each task's verdict, the
    count and the exit code of the first run."""
    folder, report, stdout = run
    (tmp_path / "report.jsonl").write_text((folder / "report.jsonl").read_text())
    again = validate_cli("tasks", folder / "tasks.jsonl", tmp_path)
    assert again.returncode == 1, again.stderr
    resumed = [line.split("\t") for line in again.stdout.splitlines() if line.endswith(" (from the report)")]
    first = [line.split("\t")[:2] for line in stdout.splitlines() if "\t" in line]
    assert [[i, summary.removesuffix(" (from the report)")] for i, summary in resumed] == first and len(first) == 7
    assert again.stdout.splitlines()[-1].startswith("valid 4/7, invalid 3, errors 0; ")
    assert read_report(tmp_path / "report.jsonl") == report
    assert (tmp_path / "valid.jsonl").read_text() == (folder / "valid.jsonl").read_text()


@pytest.mark.docker
@pytest.mark.slow
def test_a_rerun_grades_only_the_tasks_the_report_has_not_judged(run, runtime, tmp_path):
    folder, report, _ = run
    tasks = [dataclasses.replace(t, pass_to_pass=t.pass_to_pass[1:]) if t.instance_id == ROMANS else t  # its row changed
             for t in load_tasks(str(folder / "tasks.jsonl"))]
    lines = (folder / "report.jsonl").read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["instance_id"] != TEXTKIT]
    errored = {**json.loads(next(line for line in lines if FLAKY in line)), "status": "error", "error": "engine gone"}
    (tmp_path / "report.jsonl").write_text("".join(line + "\n" for line in kept) + json.dumps(errored) + "\n")
    family = SWEFamily(dataset=str(folder / "tasks.jsonl"))
    validated: list[str] = []

    def validate_one(task, runs: int):
        validated.append(task.instance_id)
        return family.validate(task, runtime, runs=runs, timeout_s=300)

    verdicts = run_validation(tasks, validate_one, key=lambda task: task.instance_id, fingerprint_of=family.fingerprint,
                              report=tmp_path / "report.jsonl", runs=2, workers=WORKERS, progress=False)
    assert sorted(validated) == sorted([TEXTKIT, FLAKY, ROMANS])  # missing, errored, changed
    redone = {v.instance_id: v for v in verdicts if v.instance_id in validated}
    assert all(len(v.empty_runs) == len(v.gold_runs) == 2 for v in redone.values())  # 2 runs x 2 patches each
    assert [v.instance_id for v in verdicts] == [t.instance_id for t in tasks]
    again = read_report(tmp_path / "report.jsonl")
    assert again[TEXTKIT].status == again[ROMANS].status == "valid" and again[FLAKY].rule == "flaky"
    redone = (TEXTKIT, FLAKY, ROMANS)
    assert {v.instance_id for v in verdicts if not v.resumed} == set(redone)
    untouched = {i: v.to_dict() for i, v in again.items() if i not in redone}
    assert untouched == {i: v.to_dict() for i, v in report.items() if i not in redone}
    assert len((tmp_path / "report.jsonl").read_text().splitlines()) == len(tasks)  # rewritten, one line per task


@pytest.mark.docker
@pytest.mark.slow
def test_the_env_refuses_a_task_marked_invalid(run, make_env):
    folder = run[0]
    env = make_env(dataset=str(folder / "tasks.jsonl"), validation_report=str(folder / "report.jsonl"))
    assert [t.instance_id for t in env.unwrapped.tasks] == FIXTURE_IDS  # never drawn
    with pytest.raises(ValueError, match=rf"instance_id='{EMPTY_RESOLVES}' is never drawn: validation_report=.* marks it "
                                         r"invalid: empty_patch_resolves"):
        env.reset(options={"instance_id": EMPTY_RESOLVES})
    env.reset(options={"instance_id": TEXTKIT})
    assert env.unwrapped.episode_task.instance_id == TEXTKIT


def test_a_run_that_could_not_grade_is_no_verdict():
    task = FIXTURE_TASKS[0]
    graded = GradeReport(task.instance_id, "resolved", dict.fromkeys(task.fail_to_pass, "PASSED"),
                         dict.fromkeys(task.pass_to_pass, "PASSED"))
    verdict = judge(task, [GradeReport(task.instance_id, "error", error="grading could not run: engine gone")], [graded])
    assert (verdict.status, verdict.broken, verdict.error) == ("error", [], "error: grading could not run: engine gone")


@pytest.mark.parametrize("status", ["screened", "tampered"])
def test_a_gold_patch_grading_zeroes_is_invalid_not_an_error_retried_forever(status):
    """Screened and tampered are verdicts grading gives every time: the task is broken, and a rerun skips it."""
    task = FIXTURE_TASKS[0]
    passed = (dict.fromkeys(task.fail_to_pass, "PASSED"), dict.fromkeys(task.pass_to_pass, "PASSED"))
    empty = GradeReport(task.instance_id, "unresolved", dict.fromkeys(task.fail_to_pass, "FAILED"), passed[1])
    gold = GradeReport(task.instance_id, status, *passed, error=f"{status}: what grading saw")
    verdict = judge(task, [empty], [gold])
    rule = "gold_screened" if status == "screened" else "tampered"
    assert (verdict.status, verdict.rule, verdict.judged) == ("invalid", rule, True)
    assert verdict.broken[0].detail == f"{status}: what grading saw"


def test_a_report_line_cut_short_is_ignored(tmp_path):
    task = FIXTURE_TASKS[0]
    line = json.dumps({"instance_id": task.instance_id, "status": "valid", "runs": 1})
    (tmp_path / "report.jsonl").write_text(line + "\n" + line[:20])
    assert list(read_report(tmp_path / "report.jsonl")) == [task.instance_id]


@pytest.mark.parametrize("env_id", ["gymenvs/SWE-v0", "gymenvs/SWEAgent-v0"])
def test_both_envs_take_a_validation_report(env_id, tmp_path):
    import gymnasium as gym

    import gymenvs  # noqa: F401

    romans = "gymenvs-fixtures__romans-1"
    flaky = {"rule": "flaky", "tests": ["tests/test_numerals.py::test_roundtrip"], "detail": ""}
    report = tmp_path / "report.jsonl"
    report.write_text(json.dumps({"instance_id": romans, "status": "invalid", "broken": [flaky], "runs": 2}) + "\n" +
                      json.dumps({"instance_id": TEXTKIT, "status": "error", "error": "engine gone"}) + "\n")
    env = gym.make(env_id, validation_report=str(report))  # constructing touches no engine
    assert [t.instance_id for t in env.unwrapped.tasks] == [i for i in FIXTURE_IDS if i != romans]  # an error is no verdict
    with pytest.raises(ValueError, match=r"romans-1' is never drawn: validation_report=.* marks it invalid: "
                                         r"flaky \(tests/test_numerals.py::test_roundtrip\)"):
        env.reset(options={"instance_id": romans})  # refused before any engine is reached
    with pytest.raises(ValueError, match=r"no task can run: .*romans-1.*validation_report=.* marks it invalid"):
        gym.make(env_id, validation_report=str(report), instance_ids=[romans])
    with pytest.raises(ValueError, match="does not exist: write one with `gymenvs tasks validate`"):
        gym.make(env_id, validation_report=str(tmp_path / "absent.jsonl"))
