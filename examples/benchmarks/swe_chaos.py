"""Chaos run: SWE-v0 episodes with faults injected at random into the real Docker engine.

    python examples/benchmarks/swe_chaos.py [--episodes 200] [--slots 3] [--fault-rate 0.5] [--retries 2] [--seed 0]
                                            [--faults KIND ...] [--log attempts.jsonl]

A scripted policy plays the fixture tasks in a `ConcurrentVectorEnv` (thread backend, a warm pool
per slot, `step_timeout_s`): half the episodes apply the gold patch (reward 1 expected), the others
submit nothing or a change that leaves the bug in place (reward 0 expected). Before a step, with
probability `--fault-rate`, one fault (drawn with the run's seed) is injected into that episode:

- `container_killed`, `container_paused`: the agent's container killed or paused from outside;
- `oom_killed`: the container's memory filled until the engine kills it;
- `disk_limit`: the agent's container written past its disk limit;
- `grading_disk`: the package under test writes past the disk limit when grading imports it;
- `grading_killed`: the grading container killed (`GradingKiller`);
- `image_removed`: the task's image untagged after reset, before the first step (which starts grading's container);
- `engine_error`: the engine's API answers 500 to a file read of the agent's container or to
  grading's read of its changes (`EngineProxy`, which every env of the run talks through);
- `step_timeout`: a command outlives the vector env's `step_timeout_s`;
- `env_exception`: the slot's env raises in its step (a wrapper around SWE-v0 raises `RuntimeError`
  once armed), as a bug in env code would; the vector env ends that slot's episode and rebuilds it.

An episode that does not end `outcome="model"` is replayed, as the TRL bridge replays it (same
seed, same policy; the replay may draw a fault too), up to `--retries` times. Prints one row per
fault kind: injected, ended infra, ended model (target 0), retried, recovered (the replay's reward
was the expected one), and the wrong rewards among all model endings (target 0); then the
episodes' count, the wall time and the containers left behind. Each slot runs from its own tags of
the fixture images (`gymenvs-chaos-<pid>-s<slot>/...`, removed at the end), so that removing one
touches no other slot. Needs a Docker engine and the fixture images (`gymenvs swe build-images`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import random
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import docker
import gymnasium as gym

import gymenvs  # noqa: F401  (registers gymenvs/SWE-v0)
from gymenvs.container.runtime.docker import DockerRuntime
from gymenvs.container.runtime.docker.chaos import DEFAULT_ENGINE_SOCKET, EngineProxy, GradingKiller
from gymenvs.container.runtime.owners import LABEL_PID
from gymenvs.swe.images import image_for
from gymenvs.swe.tasks import FIXTURES, Task, load_tasks
from wrappers.vector import ConcurrentVectorEnv

FAULTS = ("container_killed", "container_paused", "oom_killed", "disk_limit", "grading_disk", "grading_killed",
          "image_removed", "engine_error", "step_timeout", "env_exception")
#: The `outcome_reason` each fault must end with (any of them).
EXPECTED_REASONS = {
    "container_killed": {"container_died"}, "container_paused": {"container_paused"}, "oom_killed": {"oom_killed"},
    "disk_limit": {"disk_limit"}, "grading_disk": {"disk_limit"}, "grading_killed": {"container_died"},
    "image_removed": {"image_missing"}, "engine_error": {"engine_error"}, "step_timeout": {"step_timeout"},
    "env_exception": {"env_exception"},
}
SUBMIT = {"name": "submit", "arguments": {}}
#: Make the container's main process (`sleep`) the OOM killer's first victim, then fill its memory in tmpfs.
OOM = ('for p in /proc/[0-9]*; do [ "$(cat $p/comm)" = sleep ] && echo 1000 > $p/oom_score_adj; done; '
       "head -c 512m /dev/zero > /dev/shm/fill")
MEM_LIMIT, DISK_LIMIT_MB = "64m", 40
STEP_TIMEOUT_S, COMMAND_TIMEOUT_S = 30.0, 45.0


def bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


def patched_file(task: Task) -> str:
    """The first source file the gold patch changes (the tests import it)."""
    return next(line[6:] for line in task.patch.splitlines() if line.startswith("+++ b/"))


class RaisingWhenArmed(gym.Wrapper):
    """Raises in `step` once its slot is in `armed` (then disarms it): an exception from env code."""

    def __init__(self, env: gym.Env, slot: int, armed: set[int]):
        super().__init__(env)
        self.slot, self.armed = slot, armed

    def step(self, action: Any) -> Any:
        if self.slot in self.armed:
            self.armed.discard(self.slot)
            raise RuntimeError("injected: an exception in the env's step")
        return self.env.step(action)


@dataclass
class Attempt:
    """One try of one episode: its policy, its fault (None: none) and where it ended."""

    episode: int
    seed: int
    kind: str  # gold | empty | wrong
    fault: str | None
    fault_at: int  # the index of the step before which the fault is injected
    retry: int = 0
    task: Task | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    done: int = 0
    outcome: str = ""
    reason: str = ""
    reward: float = 0.0
    detail: str = ""

    @property
    def expected(self) -> float:
        return 1.0 if self.kind == "gold" else 0.0


class Chaos:
    """The run: the vector env, the injector's own engine connections, and the attempts' bookkeeping."""

    def __init__(self, args: argparse.Namespace, proxy: EngineProxy):
        self.args, self.proxy = args, proxy
        self.random = random.Random(args.seed)
        # Both straight to the engine, not via the proxy: a plain docker client that attacks containers from
        # outside, and a runtime for the GradingKiller.
        self.client = docker.DockerClient(base_url=f"unix://{DEFAULT_ENGINE_SOCKET}", timeout=120)
        self.runtime = DockerRuntime(f"unix://{DEFAULT_ENGINE_SOCKET}", timeout=120)
        self.tasks = {task.instance_id: task for task in load_tasks(FIXTURES)}
        self.prefix = f"gymenvs-chaos-{os.getpid()}"
        self.queue: deque[Attempt] = deque(self._attempt(i, i, 0) for i in range(args.episodes))
        self.finished: list[Attempt] = []
        self.cleanups: dict[int, list[Any]] = {}
        self.armed: set[int] = set()  # the slots whose env raises at its next step

    # -- images and envs -----------------------------------------------------------------

    def template(self, slot: int) -> str:
        return f"{self.prefix}-s{slot}/{{instance_id}}:latest"

    def tag_images(self) -> None:
        for slot in range(self.args.slots):
            for task in self.tasks.values():
                self.tag(slot, task)

    def tag(self, slot: int, task: Task) -> None:
        repository, tag = self.template(slot).format(instance_id=task.instance_id).rsplit(":", 1)
        self.client.images.get(image_for(task)).tag(repository, tag)

    def untag_images(self) -> None:
        for image in self.client.images.list(name=f"{self.prefix}-*/*"):
            for name in image.tags:
                if name.startswith(self.prefix):
                    self.client.images.remove(name)

    def make_env(self, slot: int) -> gym.Env:
        env = gym.make("gymenvs/SWE-v0", image_template=self.template(slot), mem_limit=MEM_LIMIT,
                       disk_limit=f"{DISK_LIMIT_MB}m", command_timeout_s=COMMAND_TIMEOUT_S, grading_timeout_s=120.0,
                       warm_pool=1, max_turns=6)
        swe: Any = env.unwrapped
        swe.tasks = tuple(dataclasses.replace(task, image=None) for task in swe.tasks)  # run from the slot's tags
        return RaisingWhenArmed(env, slot, self.armed)

    # -- attempts ------------------------------------------------------------------------

    def _attempt(self, episode: int, seed: int, retry: int, kind: str | None = None) -> Attempt:
        kind = kind or ("gold" if episode % 2 == 0 else ("empty", "wrong")[episode // 2 % 2])
        fault = self.random.choice(self.args.faults) if self.random.random() < self.args.fault_rate else None
        return Attempt(episode, seed, kind, fault, fault_at=self.random.randrange(2), retry=retry)

    def plan(self, attempt: Attempt, task: Task) -> None:
        """The attempt's steps: the policy's two (work, submit), with the fault's own step put in."""
        attempt.task = task
        work = {"gold": bash(f"cat > /tmp/gold.patch <<'EOF_PATCH'\n{task.patch}EOF_PATCH\ngit apply /tmp/gold.patch"),
                "empty": bash("git status --short"),
                "wrong": bash(f"echo '# looked at this' >> {patched_file(task)}")}[attempt.kind]
        steps = [work, SUBMIT]
        extra = {"oom_killed": bash(OOM), "disk_limit": bash(f"head -c {DISK_LIMIT_MB + 20}m /dev/zero > /tmp/fill; sleep 2"),
                 "step_timeout": bash(f"sleep {STEP_TIMEOUT_S + 10:g}"),
                 "grading_disk": bash(f"echo \"open('/tmp/fill', 'wb').write(bytes({DISK_LIMIT_MB + 20} << 20))\" "
                                      f">> {patched_file(task)}")}.get(attempt.fault or "")
        if attempt.fault == "engine_error" and attempt.fault_at == 0:
            extra = {"name": "view_file", "arguments": {"path": patched_file(task)}}
        if attempt.fault == "grading_disk":
            attempt.fault_at = 1  # after the work, so the package writes when grading imports it
        if extra is not None:
            steps.insert(attempt.fault_at, extra)
        attempt.steps = steps

    def inject(self, slot: int, attempt: Attempt, state: dict[str, Any]) -> None:
        """Before the attempt's next step: the fault that acts from outside the episode, if it is due now."""
        fault, at, container = attempt.fault, attempt.done, state["container"]
        submitting = attempt.steps[at] is SUBMIT
        if fault == "container_killed" and at == attempt.fault_at:
            self.client.containers.get(container).kill()
        elif fault == "env_exception" and at == attempt.fault_at:
            self.armed.add(slot)
        elif fault == "container_paused" and at == attempt.fault_at:
            self.client.containers.get(container).pause()
        elif fault == "grading_killed" and submitting:
            # the grading container started during the episode, before grading takes it; or once the tests run
            killer = GradingKiller(self.runtime, "run-tests.sh" if attempt.fault_at else None, episode_id=state["episode_id"])
            killer.start()
            self.cleanups.setdefault(slot, []).append(killer)
        elif fault == "image_removed" and at == 0:  # before the first step, which starts the grading container
            assert attempt.task is not None
            self.client.images.remove(self.template(slot).format(instance_id=attempt.task.instance_id))
            self.cleanups.setdefault(slot, []).append(functools.partial(self.tag, slot, attempt.task))
        elif fault == "engine_error" and (submitting if attempt.fault_at else at == 0):
            container_id = self.client.containers.get(container).id
            path = "/changes" if attempt.fault_at else "/archive"  # grading's read of the changes, or view_file's
            self.cleanups.setdefault(slot, []).append(self.proxy.fail("GET", f"/containers/{container_id}{path}"))

    def clean_up(self, slot: int) -> None:
        self.armed.discard(slot)
        for item in self.cleanups.pop(slot, []):
            if isinstance(item, GradingKiller):
                item.stop.set()
                item.join()
            elif callable(item):
                item()
            else:
                item.times = 0  # an engine rule that did not fire: disarm it

    def end(self, attempt: Attempt, outcome: str, reason: str, reward: float, detail: str) -> None:
        attempt.outcome, attempt.reason, attempt.reward, attempt.detail = outcome, reason, reward, detail
        self.finished.append(attempt)
        if self.args.log:
            with open(self.args.log, "a") as log:
                row = {k: v for k, v in dataclasses.asdict(attempt).items() if k not in ("task", "steps")}
                log.write(json.dumps({**row, "instance_id": attempt.task.instance_id if attempt.task else None}) + "\n")
        if outcome != "model" and attempt.retry < self.args.retries:
            replay = self._attempt(attempt.episode, attempt.seed, attempt.retry + 1, attempt.kind)
            self.queue.appendleft(replay)  # replayed next, as the bridge replays it within the batch

    # -- the loop ------------------------------------------------------------------------

    def run(self, envs: ConcurrentVectorEnv) -> None:
        slots: list[Attempt | None] = [None] * self.args.slots
        while self.queue or any(slots):
            idle = [i for i, attempt in enumerate(slots) if attempt is None][: len(self.queue)]
            if idle:
                self._reset(envs, slots, idle)
            busy = [i for i, attempt in enumerate(slots) if attempt is not None]
            if not busy:
                continue
            states = envs.state()
            actions: list[Any] = [None] * self.args.slots
            for i in busy:
                attempt = slots[i]
                assert attempt is not None
                self.inject(i, attempt, states[i])
                actions[i] = attempt.steps[attempt.done]
            _, rewards, terminated, truncated, infos = envs.step(actions)
            for i in busy:
                attempt = slots[i]
                assert attempt is not None
                attempt.done += 1
                if terminated[i] or truncated[i]:
                    self.clean_up(i)
                    self.end(attempt, _info(infos, "outcome", i) or "model", _info(infos, "outcome_reason", i),
                             float(rewards[i]), _info(infos, "outcome_detail", i))
                    slots[i] = None
                elif attempt.done == len(attempt.steps):
                    raise RuntimeError(f"episode {attempt.episode} did not end after its steps: {infos}")
            self.progress()

    def _reset(self, envs: ConcurrentVectorEnv, slots: list[Attempt | None], idle: list[int]) -> None:
        taken = {i: self.queue.popleft() for i in idle}
        seeds = [taken[i].seed if i in taken else None for i in range(self.args.slots)]
        mask = [i in taken for i in range(self.args.slots)]
        _, infos = envs.reset(seed=seeds, options={"reset_mask": mask})
        for i, attempt in taken.items():
            if _info(infos, "error", i):  # the reset itself failed: an infra ending, replayed
                self.end(attempt, _info(infos, "outcome", i) or "infra", _info(infos, "outcome_reason", i), 0.0,
                         _info(infos, "error", i))
                continue
            self.plan(attempt, self.tasks[_info(infos, "instance_id", i)])
            slots[i] = attempt

    def progress(self) -> None:
        episodes = {a.episode for a in self.finished if a.outcome == "model" or a.retry == self.args.retries}
        print(f"\r{len(episodes)}/{self.args.episodes} episodes, {len(self.finished)} attempts", end="", flush=True)

    # -- the report ----------------------------------------------------------------------

    def report(self, seconds: float, left_behind: int) -> None:
        final = {}
        for attempt in self.finished:
            final[attempt.episode] = attempt  # the last attempt of each episode
        print("\n")
        header = ("fault", "injected", "ended infra", "precise reason", "ended model", "retried", "recovered",
                  "dropped")
        rows = []
        for fault in (*FAULTS, None):
            mine = [a for a in self.finished if a.fault == fault]
            infra = [a for a in mine if a.outcome != "model"]
            retried = [a for a in infra if a.retry < self.args.retries]
            recovered = [a for a in retried if final[a.episode].outcome == "model"
                         and final[a.episode].reward == final[a.episode].expected]
            precise = [a for a in infra if fault is None or a.reason in EXPECTED_REASONS[fault]]
            dropped = [a for a in infra if a.retry == self.args.retries]
            rows.append((fault or "(none)", len(mine), len(infra), len(precise), len(mine) - len(infra), len(retried),
                         len(recovered), len(dropped)))
        widths = [max(len(str(row[k])) for row in (header, *rows)) for k in range(len(header))]
        print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for row in rows:
            print("| " + " | ".join(str(v).ljust(w) for v, w in zip(row, widths)) + " |")
        model = [a for a in self.finished if a.outcome == "model"]
        wrong = [a for a in model if a.reward != a.expected]
        faulted_model = [a for a in model if a.fault is not None]
        print(f"\nfaults scored as a model outcome: {len(faulted_model)} (target 0); wrong rewards among "
              f"{len(model)} model endings: {len(wrong)} (target 0)")
        for a in faulted_model + wrong:
            print(f"  episode {a.episode} retry {a.retry}: fault {a.fault}, {a.kind}, reward {a.reward}, {a.reason}: {a.detail}")
        unexpected = [a for a in self.finished if a.fault and a.outcome != "model" and a.reason not in EXPECTED_REASONS[a.fault]]
        for a in unexpected:
            print(f"  episode {a.episode} retry {a.retry}: fault {a.fault} ended {a.outcome}/{a.reason}: {a.detail[:200]}")
        for a in self.finished:
            if a.fault is None and a.outcome != "model":
                print(f"  episode {a.episode} retry {a.retry}: no fault, ended {a.outcome}/{a.reason}: {a.detail[:200]}")
        solved = Counter(final[e].outcome for e in final)
        print(f"{self.args.episodes} episodes, {len(self.finished)} attempts ({self.args.slots} slots), final outcomes "
              f"{dict(solved)}; {seconds:.0f} s; containers left behind: {left_behind}")


def _info(infos: dict[str, Any], key: str, index: int) -> Any:
    """Slot `index`'s `info[key]` from a batched info dict (None when that slot has none)."""
    if key in infos and infos.get(f"_{key}", [True] * (index + 1))[index]:
        return infos[key][index]
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--slots", type=int, default=3)
    parser.add_argument("--fault-rate", type=float, default=0.5)
    parser.add_argument("--retries", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--faults", nargs="+", choices=FAULTS, default=list(FAULTS), help="the kinds to draw from (default: all)")
    parser.add_argument("--log", help="append each attempt to this JSONL file as it ends")
    parser.add_argument("--from-log", help="print the table of a finished run's --log file, and run nothing")
    args = parser.parse_args()
    if args.from_log:
        chaos = Chaos(args, EngineProxy())
        with open(args.from_log) as log:
            chaos.finished = [Attempt(**{k: v for k, v in json.loads(line).items() if k != "instance_id"}) for line in log]
        chaos.report(float("nan"), -1)
        return
    with EngineProxy() as proxy:
        os.environ["DOCKER_HOST"] = proxy.url  # every env's engine traffic goes through the proxy
        chaos = Chaos(args, proxy)
        chaos.tag_images()
        started = time.monotonic()
        try:
            envs = ConcurrentVectorEnv([functools.partial(chaos.make_env, slot) for slot in range(args.slots)],
                                       step_timeout_s=STEP_TIMEOUT_S, autoreset_mode="Disabled")
            with envs:
                chaos.run(envs)
        finally:
            seconds = time.monotonic() - started
            time.sleep(COMMAND_TIMEOUT_S - STEP_TIMEOUT_S + 5)  # a timed-out slot's old env closes when its command ends
            mine = {"label": f"{LABEL_PID}={os.getpid()}"}
            left = chaos.client.containers.list(all=True, filters=mine, ignore_removed=True)
            for container in left:
                container.remove(force=True)
            chaos.untag_images()
        chaos.report(seconds, len(left))


if __name__ == "__main__":
    main()
