"""Validate Harbor tasks before training on them: the oracle must score 1, a run that does nothing must not.

Each task's container is started `runs` times empty (nothing done) and `runs` times after its oracle
(`solution/` copied to /solution and `solve.sh` run, as Harbor's oracle agent does), and each is
graded by the ordinary grading path (`grade_task`: a snapshot, fresh /tests and /logs/verifier).
The rewards are held to these rules (named in the report when broken):

    flaky              the reward changed between runs of the oracle, or of the empty run
    oracle_fails       some oracle run scored below 1
    empty_run_passes   some empty run scored 1 or more

A grading that gave no verdict (infra: a timeout, an engine error; invalid: tests/test.sh missing)
makes the task `error`, and a task without `solution/solve.sh` is `error` too (nothing to hold it
to). The report and its resuming are shared with every family (`gymenvs.container.validation.run_validation`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import shlex
import tarfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager

from gymenvs.container.background import in_thread
from gymenvs.container.runtime import Limits, Runtime, Sandbox, SandboxError
from gymenvs.container.validation import ERROR, INVALID, VALID, BrokenRule, RunEvidence, TaskValidation
from gymenvs.core.outcomes import EndedBy
from gymenvs.terminal import steps
from gymenvs.terminal.compose import start_sidecars
from gymenvs.terminal.grading import VerifierResult, grade_task
from gymenvs.terminal.images import ensure_task_image, environment_digest, sidecar_images
from gymenvs.terminal.task import STEPS, TerminalTask
from gymenvs.terminal.verifier import Verifier, VerifierAhead, network_limits

RULES = ("flaky", "oracle_fails", "empty_run_passes")
SOLUTION_DIR = "/solution"

#: Runs one episode of a task and grades it: `(task, oracle) -> VerifierResult` (`oracle=False`: the empty run).
Runner = Callable[[TerminalTask, bool], VerifierResult]


def fingerprint(task: TerminalTask) -> str:
    """A digest of what decides a task's verdict: task.toml, environment/, tests/, solution/ and steps/."""
    digest = hashlib.sha256(environment_digest(task).encode())
    for folder in (task.tests_dir, task.solution_dir, task.path / STEPS):
        for path in sorted(p for p in (folder.rglob("*") if folder else ()) if p.is_file()):
            digest.update(path.relative_to(task.path).as_posix().encode() + b"\0" + path.read_bytes())
    digest.update((task.path / "task.toml").read_bytes())
    return digest.hexdigest()[:16]


def validate_task(task: TerminalTask, run_one: Runner, runs: int = 1) -> TaskValidation:
    """Run and grade `task` `runs` times empty and `runs` times with its oracle, and judge the rewards.
    An exception of `run_one` is an `error` verdict: one task does not stop the others."""
    started = time.monotonic()
    missing = _missing_oracle(task)
    if missing:
        verdict = TaskValidation(task.name, ERROR, runs=runs, error=f"the task has no {missing}: no oracle to validate it by")
    else:
        empty: list[VerifierResult] = []
        oracle: list[VerifierResult] = []
        try:
            for _ in range(runs):
                empty.append(run_one(task, False))
                oracle.append(run_one(task, True))
        except Exception as exc:
            verdict = TaskValidation(task.name, ERROR, runs=runs, error=f"a run raised {type(exc).__name__}: {exc}")
        else:
            verdict = judge(task.name, empty, oracle)
    verdict.seconds, verdict.fingerprint = time.monotonic() - started, fingerprint(task)
    return verdict


def _missing_oracle(task: TerminalTask) -> str:
    """The solve.sh the oracle lacks ("" if it has all: each step's, or the task's)."""
    if not task.steps:
        return "" if task.solution_dir is not None else "solution/solve.sh"
    missing = [step.name for step in task.steps if step.solution_dir is None]
    return f"steps/NAME/solution/solve.sh for the steps {missing}" if missing else ""


def judge(name: str, empty: Sequence[VerifierResult], oracle: Sequence[VerifierResult]) -> TaskValidation:
    """The verdict on a task from its graded runs; `empty_runs` / `gold_runs` hold each run's reward (or
    the reason there is none)."""
    verdict = TaskValidation(name, VALID, runs=len(oracle), empty_runs=[_seen(r) for r in empty],
                             gold_runs=[_seen(r) for r in oracle])
    no_verdict = [r for r in (*empty, *oracle) if r.reward is None]
    if no_verdict:
        verdict.status, verdict.error = ERROR, f"{no_verdict[0].reason}: {no_verdict[0].detail}"
        verdict.evidence = _runs_evidence(empty, oracle)
        return verdict
    empty_rewards = [r.reward for r in empty if r.reward is not None]
    oracle_rewards = [r.reward for r in oracle if r.reward is not None]
    broken = []
    changed = [f"{what} run rewards {' / '.join(map(_number, rewards))}"
               for what, rewards in (("oracle", oracle_rewards), ("empty", empty_rewards)) if len(set(rewards)) > 1]
    if changed:
        broken.append(BrokenRule("flaky", detail="; ".join(changed)))
    # Each rule's detail is the first offending run's cause (every reward is a number past the check above).
    if failed := [r for r in oracle if (r.reward or 0.0) < 1]:
        broken.append(BrokenRule("oracle_fails", detail=evidence("oracle", failed[0]).cause()))
    if passed := [r for r in empty if (r.reward or 0.0) >= 1]:
        broken.append(BrokenRule("empty_run_passes", detail=evidence("empty", passed[0]).cause()))
    verdict.broken = broken
    verdict.status = INVALID if broken else VALID
    if broken:
        verdict.evidence = _runs_evidence(empty, oracle)
    return verdict


def _runs_evidence(empty: Sequence[VerifierResult], oracle: Sequence[VerifierResult]) -> list[RunEvidence]:
    """Every run's evidence, in the order run (empty, oracle, empty, oracle...)."""
    return [evidence(run, result) for pair in zip(empty, oracle) for run, result in zip(("empty", "oracle"), pair)]


def evidence(run: str, result: VerifierResult) -> RunEvidence:
    """What a graded run showed, as a verdict keeps it."""
    return RunEvidence.of(run, "test.sh", result.test_exit_code, result.reward, result.reason, result.test_output)


def _seen(result: VerifierResult) -> str:
    return _number(result.reward) if result.reward is not None else result.reason


def _number(value: float) -> str:
    return f"{value:g}"


def task_limits(task: TerminalTask) -> Limits:
    """The agent container's resources, from [environment] (network: [agent]'s policy, else [environment]'s)."""
    environment = task.config.environment
    return Limits(cpus=environment.cpus, mem_limit=f"{environment.memory_mb}m", disk_limit=environment.storage_mb << 20,
                  **network_limits(*task.config.agent_network))


def run_episode(runtime: Runtime, task: TerminalTask, oracle: bool, *, timeout_s: float | None = None) -> VerifierResult:
    """Start the task's container (and its sidecars), run its oracle in it (or nothing), grade it, remove them;
    step by step for a task of several steps (its result combined from theirs, as in an episode)."""
    image = ensure_task_image(runtime, task)
    with sidecars_of(runtime, task) as network_name:
        return _run_steps(runtime, task, image, network_name, oracle, timeout_s)


@contextmanager
def sidecars_of(runtime: Runtime, task: TerminalTask) -> Iterator[str | None]:
    """A compose task's sidecars, started for the block and removed after it; their network's name (None without)."""
    if task.compose_file is None:
        yield None
        return
    sidecars = start_sidecars(runtime, task, sidecar_images(runtime, task), episode_id=task.name,
                              network=task_limits(task).network)
    try:
        yield sidecars.network
    finally:
        sidecars.remove()


def _run_steps(runtime: Runtime, task: TerminalTask, image: str, network_name: str | None, oracle: bool,
               timeout_s: float | None) -> VerifierResult:
    views = [task.at_step(index) for index in range(len(task.steps))] or [task]
    workdir = runtime.image_config(image).workdir
    results: list[VerifierResult] = []
    checkpoints: list[str] = []
    try:
        for index, view in enumerate(views):
            more = index + 1 < len(views)
            limits = dataclasses.replace(task_limits(view), network_name=network_name)
            sandbox = runtime.start(image, role="validate", episode_id=task.name, limits=limits, workdir=workdir)
            # Started ahead only where grading takes it (elsewhere grading tests a snapshot in its own verifier).
            ahead = _verifier_ahead(runtime, image, view, limits, workdir) if sandbox.reads_layer() else None
            handed = False
            try:
                steps.prepare_step(sandbox, view)
                if oracle:
                    _run_oracle(sandbox, view)
                if more:  # the next step goes on from these files, as the agent left them (before grading)
                    image = sandbox.commit("gymenvs-step", f"validate-{uuid.uuid4().hex[:12]}")
                    checkpoints.append(image)
                waited = time.monotonic()
                verifier, handed = _taken(ahead) if ahead is not None else None, True
                waited = time.monotonic() - waited
                result = grade_task(sandbox, view, timeout_s=timeout_s, ahead=verifier)
                result.seconds += waited  # the oracle's run is shorter than an agent's: grading waited for its verifier
                results.append(result)
            finally:
                sandbox.remove()
                if ahead is not None and not handed:
                    _discard(ahead)
            if more and not steps.goes_on(view, results[-1]):
                break
    finally:
        for checkpoint in checkpoints:
            runtime.remove_image(checkpoint)
    graded = results[-1].outcome == EndedBy.MODEL
    return steps.combine(task, results) if task.steps and graded else results[-1]


def _verifier_ahead(runtime: Runtime, image: str, task: TerminalTask, limits: Limits, workdir: str) -> Future[VerifierAhead]:
    """The step's verifier, started in the background while its oracle runs, as an episode's is while its agent works."""
    return in_thread(lambda: VerifierAhead.start(runtime, image, task, limits=limits, workdir=workdir),
                     "gymenvs-grading-ahead")


def _taken(ahead: Future[VerifierAhead]) -> Verifier | None:
    """The verifier started ahead, once it is; None if it could not start (grading then starts its own)."""
    return ahead.result().verifier if ahead.exception() is None else None


def _discard(ahead: Future[VerifierAhead]) -> None:
    """Remove the verifier started ahead that grading did not take (the oracle failed, say)."""
    if (verifier := _taken(ahead)) is not None:
        verifier.remove()


def _run_oracle(sandbox: Sandbox, task: TerminalTask) -> None:
    """solution/ copied to /solution, then `bash /solution/solve.sh` with [solution] env, in the agent's time."""
    assert task.solution_dir is not None
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        tar.add(task.solution_dir, arcname=SOLUTION_DIR.lstrip("/"))
    sandbox.put_archive("/", archive.getvalue())
    exports = "".join(f"export {key}={shlex.quote(value)}\n" for key, value in task.config.solution.env.items())
    result = sandbox.run(f"{exports}bash {SOLUTION_DIR}/solve.sh", timeout=task.config.agent.timeout_sec)
    if result.timed_out:
        raise SandboxError(f"solution/solve.sh did not finish in {task.config.agent.timeout_sec:g} s")
