"""`gymenvs tasks validate` on Harbor tasks, on the real engine: four tasks of our own in a tmp folder
(good, broken oracle, flaky, empty run passes), each caught by the rule it breaks; the command writes
a report and the list of valid tasks, and a rerun resumes from the report. Both families (Harbor and
SWE) validate through the one `run_validation` and report, which both families' envs read."""

from __future__ import annotations

import json
import textwrap
import threading
from pathlib import Path

import pytest

from gymenvs.cli import main
from gymenvs.container.validation import read_report, run_validation
from gymenvs.tasks_cli import detect_format
from gymenvs.terminal.family import HarborFamily
from gymenvs.terminal.grading import VerifierResult
from gymenvs.terminal.tasks import load_terminal_tasks
from gymenvs.terminal.validate import judge, run_episode, validate_task

BASE = "gymenvs/swe-base:bookworm"
CHECK = "grep -qx hello /app/out.txt"
PROBE_8080 = ("if (exec 3<>/dev/tcp/127.0.0.1/8080); then echo 1 > /logs/verifier/reward.txt; "
              "else echo 0 > /logs/verifier/reward.txt; exit 1; fi")
#: name -> (solve.sh, test.sh)
TASKS = {
    "good": ("echo hello > /app/out.txt", f"if {CHECK}; then echo 1; else echo 0; fi > /logs/verifier/reward.txt"),
    "broken-oracle": ("echo goodbye > /app/out.txt", f"if {CHECK}; then echo 1; else echo 0; fi > /logs/verifier/reward.txt"),
    # Fails at random, seeded by tests/seed (which the runner below rewrites before every run): odd seeds fail.
    "flaky": ("echo hello > /app/out.txt",
              f"if {CHECK} && [ $(( $(cat /tests/seed) % 2 )) -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt"),
    "empty-run-passes": ("echo hello > /app/out.txt", "echo 1 > /logs/verifier/reward.txt"),
    # The oracle starts a server the tests probe: grading starts it again beside the tests (gymenvs.terminal.services).
    "needs-live-service": ("setsid nohup python3 -m http.server 8080 >/dev/null 2>&1 &\n"
                           "for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null && break; sleep 0.1; done",
                           PROBE_8080),
    # The same tests, but the oracle never starts the server.
    "service-never-started": ("echo 'the server is left for later'", PROBE_8080),
}
#: Tasks validated at a time (a report's content does not depend on it). Measured on two cores: the four tasks'
#: validation took a median 8.7 s with 2, 9.4 s with 3 (a wave of three, then one) and 7.9 s with 4.
WORKERS = 4


def write_task(root: Path, name: str, solve: str, test: str) -> None:
    folder = root / name
    for part in ("environment", "tests", "solution"):
        (folder / part).mkdir(parents=True)
    (folder / "instruction.md").write_text("Write the line `hello` to /app/out.txt.\n")
    (folder / "task.toml").write_text(textwrap.dedent(f"""\
        schema_version = "1.1"
        [task]
        name = "{name}"
        [verifier]
        timeout_sec = 60
        [agent]
        timeout_sec = 60
        [environment]
        memory_mb = 512
        storage_mb = 2048
        allow_internet = false
        """))
    (folder / "environment" / "Dockerfile").write_text(f"FROM {BASE}\nWORKDIR /app\n")
    (folder / "tests" / "test.sh").write_text(f"#!/bin/bash\n{test}\n")
    (folder / "tests" / "seed").write_text("0\n")
    (folder / "solution" / "solve.sh").write_text(f"#!/bin/bash\n{solve}\n")


@pytest.fixture(scope="module")
def task_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("harbor-validate")
    for name, (solve, test) in TASKS.items():
        write_task(root, name, solve, test)
    return root


@pytest.fixture(scope="module")
def verdicts(runtime, swe_images, task_root, tmp_path_factory):
    """`run_validation --runs 2` over the four tasks, judged by the Harbor rules (`validate_task`), as
    `HarborFamily.validate` does, except that each run first writes the next seed."""
    tasks = load_terminal_tasks(str(task_root))
    counters: dict[str, int] = {}
    lock = threading.Lock()

    def run_one(task, oracle: bool) -> VerifierResult:
        with lock:
            counters[task.name] = counters.get(task.name, 0) + 1
            (task.tests_dir / "seed").write_text(f"{(counters[task.name] - 1) // 2}\n")  # run i: empty and oracle share seed i
        return run_episode(runtime, task, oracle)

    report = tmp_path_factory.mktemp("report") / "validation.jsonl"
    verdicts = run_validation(tasks, lambda task, runs: validate_task(task, run_one, runs), key=lambda task: task.instance_id,
                              fingerprint_of=HarborFamily().fingerprint, report=report, runs=2, workers=WORKERS, progress=False)
    return {v.instance_id: v for v in verdicts}


@pytest.mark.docker
@pytest.mark.slow
def test_each_broken_task_is_caught_by_its_rule(verdicts):
    assert verdicts["good"].status == "valid", verdicts["good"]
    assert (verdicts["good"].gold_runs, verdicts["good"].empty_runs) == (["1", "1"], ["0", "0"])
    assert [b.rule for b in verdicts["broken-oracle"].broken] == ["oracle_fails"]
    assert [b.rule for b in verdicts["flaky"].broken] == ["flaky", "oracle_fails"]
    assert verdicts["flaky"].gold_runs == ["1", "0"]
    assert [b.rule for b in verdicts["empty-run-passes"].broken] == ["empty_run_passes"]
    assert verdicts["good"].evidence == []
    # The server the oracle left running answers the tests (started again beside them); the empty run's does not exist.
    assert (verdicts["needs-live-service"].status, verdicts["needs-live-service"].gold_runs,
            verdicts["needs-live-service"].empty_runs) == ("valid", ["1", "1"], ["0", "0"]), verdicts["needs-live-service"]


@pytest.mark.docker
@pytest.mark.slow
def test_an_invalid_verdict_says_why_from_the_real_test_output(verdicts):
    """The test's own exit code and error line, for each run: here, that nothing listens where the server should."""
    service = verdicts["service-never-started"]
    assert service.summary() == ("invalid: oracle_fails: test.sh exited 1 (reward 0, failed): "
                                 "/tests/test.sh: line 2: /dev/tcp/127.0.0.1/8080: Connection refused"), service
    assert [(e.run, e.exit_code, e.reward) for e in service.evidence] == [("empty", 1, 0.0), ("oracle", 1, 0.0)] * 2
    broken = verdicts["broken-oracle"]
    assert broken.summary() == "invalid: oracle_fails: test.sh exited 0 (reward 0, failed)", broken


@pytest.mark.docker
@pytest.mark.slow
def test_the_command_writes_a_report_and_the_valid_list_and_resumes(swe_images, task_root, tmp_path, capsys):
    report, valid = tmp_path / "report.jsonl", tmp_path / "valid.txt"
    argv = ["tasks", "validate", str(task_root), "--instance-ids", "good", "broken-oracle", "--report", str(report),
            "--valid-tasks", str(valid), "--quiet"]
    assert main(argv) == 1  # one task is invalid
    out = capsys.readouterr().out
    assert "good\tvalid\t" in out
    assert "broken-oracle\tinvalid: oracle_fails: test.sh exited 0 (reward 0, failed)\t" in out  # one line says why
    assert valid.read_text() == f"{(task_root / 'good').resolve()}\n"
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert [(line["instance_id"], line["status"], line["rule"]) for line in lines] == [  # in --instance-ids' order
        ("good", "valid", None), ("broken-oracle", "invalid", "oracle_fails")]
    assert main(argv) == 1
    assert capsys.readouterr().out.count("(from the report)") == 2  # nothing graded again
    assert set(read_report(report)) == {"good", "broken-oracle"}


def test_the_format_is_detected_and_swe_options_are_refused_for_harbor(task_root, capsys):
    assert detect_format(str(task_root)) == "harbor"
    assert detect_format("fixtures") == detect_format("tasks.jsonl") == "swe"
    for flag in (["--grade-as-root"], ["--image-template", "mirror.local/{swebench_id}:v1"]):
        assert main(["tasks", "validate", str(task_root), *flag]) == 2
        assert f"{flag[0]}: an option of another family; {str(task_root)!r} holds harbor tasks" in capsys.readouterr().err
    assert main(["tasks", "validate", str(task_root), "--instance-ids", "nope"]) == 2
    assert "instance_ids=['nope']: ['nope'] not in the dataset" in capsys.readouterr().err


def result(reward: float | None, reason: str = "failed") -> VerifierResult:
    return VerifierResult(reward, outcome="model" if reward is not None else "infra", reason=reason)


def test_judge_rules_and_no_verdict():
    assert judge("t", [result(0)], [result(1, "solved")]).status == "valid"
    assert judge("t", [result(0.5, "partial")], [result(1, "solved")]).status == "valid"  # partial credit is not a pass
    flaky = judge("t", [result(0), result(0)], [result(1), result(0.5)])
    assert [b.rule for b in flaky.broken] == ["flaky", "oracle_fails"] and flaky.gold_runs == ["1", "0.5"]
    timeout = judge("t", [result(0)], [result(None, "grading_timeout")])
    assert (timeout.status, timeout.gold_runs) == ("error", ["grading_timeout"])


PYTEST_LOG = "\n".join([*(f"tests/test_outputs.py::test_{i} PASSED" for i in range(30)),
                        "E   ConnectionRefusedError: [Errno 111] Connection refused",
                        "FAILED tests/test_outputs.py::test_health - ConnectionRefusedError: [Errno 111]",
                        "========================= 1 failed, 30 passed in 0.31s ========================="])


def test_an_invalid_verdict_says_why_for_each_run_and_keeps_it_in_the_report(tmp_path):
    """The one-line cause names the exit code and the output line that says what went wrong (not pytest's closing
    count); each run keeps its exit code, reward, reason and last output lines, and the report gives them back."""
    from gymenvs.container.validation import OUTPUT_LINES, TaskValidation

    oracle = VerifierResult(0.0, reason="failed", test_exit_code=1, log_tail=PYTEST_LOG)
    empty = VerifierResult(0.0, reason="no_reward", test_exit_code=0, log_tail="")
    verdict = judge("t", [empty], [oracle])
    cause = ("test.sh exited 1 (reward 0, failed): "
             "FAILED tests/test_outputs.py::test_health - ConnectionRefusedError: [Errno 111]")
    assert verdict.summary() == f"invalid: oracle_fails: {cause}"
    assert [(e.run, e.exit_code, e.reward, e.reason) for e in verdict.evidence] == [
        ("empty", 0, 0.0, "no_reward"), ("oracle", 1, 0.0, "failed")]
    assert verdict.evidence[1].output.splitlines() == PYTEST_LOG.splitlines()[-OUTPUT_LINES:]
    assert verdict.evidence[0].cause() == "test.sh exited 0 (reward 0, no_reward)"
    assert TaskValidation.from_dict(json.loads(json.dumps(verdict.to_dict()))) == verdict
    assert judge("t", [result(0)], [result(1, "solved")]).evidence == []  # a valid verdict keeps no output


def test_a_grading_without_verdict_keeps_each_runs_evidence():
    timeout = VerifierResult(None, outcome="infra", reason="grading_timeout", log_tail="waiting for the server...")
    verdict = judge("t", [result(0)], [timeout])
    assert verdict.status == "error" and [(e.run, e.reward, e.output) for e in verdict.evidence] == [
        ("empty", 0.0, ""), ("oracle", None, "waiting for the server...")]
    assert verdict.evidence[1].cause() == "test.sh gave no exit code (no reward, grading_timeout): waiting for the server..."


SWE_BROKEN = Path(__file__).resolve().parents[1] / "swe" / "data" / "validate" / "broken_tasks.jsonl"
#: family name -> (its envs, the task of our own to validate, the rule that task breaks)
FAMILIES = {
    "harbor": (("gymenvs/Terminal-v0", "gymenvs/TerminalAgent-v0"), "broken-oracle", "oracle_fails"),
    "swe": (("gymenvs/SWE-v0", "gymenvs/SWEAgent-v0"), "gymenvs-broken__empty-patch-resolves", "empty_patch_resolves"),
}


def validated(family, runtime, instance_id: str, report: Path) -> list:
    """`instance_id` of `family` validated as `gymenvs tasks validate` does: the family's `validate`, through the one
    `run_validation`."""
    (task,) = [task for task in family.load_tasks() if task.instance_id == instance_id]
    return run_validation([task], lambda task, runs: family.validate(task, runtime, runs=runs), key=lambda task: task.instance_id,
                          fingerprint_of=family.fingerprint, report=report, progress=False)


@pytest.mark.docker
@pytest.mark.slow
def test_both_families_validate_through_one_machinery_and_both_families_envs_refuse_what_it_marks_invalid(
        runtime, swe_images, task_root, tmp_path):
    """A Harbor task and a SWE task, each broken on purpose, validated by their family's `validate` through the one
    `run_validation`: both reports are read by the one `read_report`, and `validation_report=` on every env of
    each family (tools and agent) leaves the invalid task out and refuses it by name, saying which rule it broke."""
    import re

    import gymnasium as gym

    import gymenvs  # noqa: F401
    from gymenvs.swe.family import SWEFamily

    families = {"harbor": HarborFamily(dataset=str(task_root)), "swe": SWEFamily(dataset=str(SWE_BROKEN))}
    for name, family in families.items():
        env_ids, invalid, rule = FAMILIES[name]
        report = tmp_path / f"{name}.jsonl"
        verdicts = validated(family, runtime, invalid, report)
        assert [(v.instance_id, v.status, v.rule) for v in verdicts] == [(invalid, "invalid", rule)], verdicts
        assert len(verdicts[0].empty_runs) == len(verdicts[0].gold_runs) == 1
        assert read_report(report) == {invalid: verdicts[0]}  # the one report format, whatever the family
        for env_id in env_ids:
            env = gym.make(env_id, dataset=family.options.dataset, validation_report=str(report))
            try:
                assert env.unwrapped.family.name == name and env.unwrapped.family.options.validation_report == str(report)
                drawn = [task.instance_id for task in env.unwrapped.tasks]
                assert invalid not in drawn and drawn, drawn
                refusal = f"instance_id='{invalid}' is never drawn: validation_report={str(report)!r} marks it invalid: {rule}"
                with pytest.raises(ValueError, match=re.escape(refusal)):
                    env.reset(options={"instance_id": invalid})
            finally:
                env.close()
