"""CPU GRPO through `make_rollout_func` on SWE-v0 while the engine kills containers: no fault becomes a 0.

    python examples/benchmarks/swe_grpo_faults.py [--steps 2] [--kills 4] [--kill-rate 0.5] [--seed 0]

The policy is the tiny random model (wrappers/trl/extras/tiny_model.py) with one turn per episode,
so the reward is a verdict on what it left in the repository. The task is the textkit fixture with
its test lists set so that the untouched repository resolves it (FAIL_TO_PASS: a test that already
passes): every episode the model ends is worth 1.0, and a 0 among the rewards TRL receives could
only come from a fault. Meanwhile a thread kills, with probability `--kill-rate` (seeded), each new
agent or grading container of this process, `--kills` in all. The bridge replays each episode a
fault ended (`infra_retries=2`) and hands TRL None (NaN: out of its group's baseline) for one that
still fails.

Prints, per training step, the rewards TRL received, the mean TRL logged and the counts the rollout
logged (`infra_failures`, `retries`, `dropped`); then the kills by role. Needs a Docker engine and
the fixture images (`gymenvs swe build-images`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from wrappers.trl.extras.offline import run_offline_and_quietly

run_offline_and_quietly()

import docker  # noqa: E402
from transformers import PrinterCallback, TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from gymenvs.container.runtime.owners import LABEL_PID, LABEL_ROLE  # noqa: E402
from gymenvs.swe.tasks import FIXTURES, load_tasks, task_to_row  # noqa: E402
from wrappers.trl import CPU_TRAINING_ARGS, episode_dataset, make_rollout_func, tiny_model  # noqa: E402

ALWAYS_RESOLVES = "gymenvs-chaos__textkit-untouched-resolves"


def always_resolving_dataset(folder: Path) -> str:
    """A one-task dataset (JSONL in `folder`): textkit-1, with a test that already passes as FAIL_TO_PASS,
    so the untouched repository resolves it."""
    (task,) = [task for task in load_tasks(FIXTURES) if task.instance_id == "gymenvs-fixtures__textkit-1"]
    task = dataclasses.replace(task, instance_id=ALWAYS_RESOLVES, fail_to_pass=task.pass_to_pass[:1],
                               pass_to_pass=task.pass_to_pass[1:])
    path = folder / "always_resolves.jsonl"
    path.write_text(json.dumps(task_to_row(task), default=str) + "\n")
    return str(path)


class ContainerKiller(threading.Thread):
    """Kills each new agent or grading container of this process with probability `rate`, `budget` in all."""

    def __init__(self, client: Any, budget: int, rate: float, seed: int):
        super().__init__(daemon=True)
        self.client, self.budget, self.rate, self.random = client, budget, rate, random.Random(seed)
        self.seen: set[str] = set()
        self.killed: list[str] = []  # the roles of the containers killed
        self.stop = threading.Event()

    def run(self) -> None:
        mine = {"label": [f"{LABEL_PID}={os.getpid()}"], "status": "running"}
        while not self.stop.is_set() and len(self.killed) < self.budget:
            for container in self.client.containers.list(filters=mine, ignore_removed=True):
                role = container.labels.get(LABEL_ROLE)
                if container.id in self.seen or role not in ("agent", "grading"):
                    continue
                self.seen.add(container.id)
                if self.random.random() < self.rate and len(self.killed) < self.budget:
                    try:
                        container.kill()
                    except docker.errors.APIError:  # gone meanwhile
                        continue
                    self.killed.append(role)
            self.stop.wait(0.05)


class StepPrinter(TrainerCallback):
    """Prints each logged step: the rewards TRL received in it, its mean reward and the fault counts."""

    def __init__(self, received: list[list[float | None]]):
        self.received, self.printed = received, 0

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "reward" not in logs:
            return
        rewards = [r for batch in self.received[self.printed:] for r in batch]
        self.printed = len(self.received)
        counts = {name: int(logs.get(name, 0)) for name in ("infra_failures", "retries", "dropped")}
        mean = logs["reward"]  # None when every reward of the step was dropped
        mean_text = f"{mean:.3f}" if isinstance(mean, float) else str(mean)
        print(f"step {state.global_step}: rewards {rewards}  mean {mean_text}  {counts}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--kills", type=int, default=4)
    parser.add_argument("--kill-rate", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    model, tokenizer = tiny_model(seed=options.seed)
    received: list[list[float | None]] = []
    with tempfile.TemporaryDirectory() as folder:
        rollout = make_rollout_func("gymenvs/SWE-v0", env_kwargs={"dataset": always_resolving_dataset(Path(folder)),
                                                                  "max_turns": 1, "command_timeout_s": 10.0},
                                    max_tokens_per_turn=8, infra_retries=2)

        def env_reward(**kwargs: Any) -> list[float | None]:
            rewards = rollout.reward_func(**kwargs)
            received.append(rewards)
            return rewards

        config = GRPOConfig(output_dir=folder, **CPU_TRAINING_ARGS, per_device_train_batch_size=4, num_generations=2,
                            max_completion_length=40, max_steps=options.steps, logging_steps=1, learning_rate=1e-3,
                            seed=options.seed, log_completions=False)
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config,
                              train_dataset=episode_dataset(2 * options.steps, seed=options.seed), rollout_func=rollout,
                              reward_funcs=env_reward, callbacks=[StepPrinter(received)])
        trainer.remove_callback(PrinterCallback)
        killer = ContainerKiller(docker.from_env(), options.kills, options.kill_rate, options.seed)
        started = time.monotonic()
        killer.start()
        try:
            trainer.train()
        finally:
            killer.stop.set()
            killer.join()
            rollout.close()
    every = [r for batch in received for r in batch]
    print(f"\n{len(every)} rewards received by TRL: {every.count(1.0)} of 1.0, {every.count(None)} None (dropped), "
          f"{every.count(0.0)} of 0.0 (target 0: every model ending here is worth 1.0)")
    print(f"containers killed: {killer.killed}; {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
