"""How busy the generator stays: EnvRolloutWorker + AsyncGRPOTrainer against make_rollout_func + GRPOTrainer.

Both train the same tiny model on CPU for the same number of steps, with the same batch, group size,
turn budget and env, one after the other in this one run:

- sync: `GRPOTrainer(rollout_func=make_rollout_func(...))`. Each step generates for the batch, lets
  the envs step, generates again..., then trains; the generator (the trained model's `generate`)
  waits while the envs step and while the optimizer runs.
- async: `CPUAsyncGRPOTrainer` with `EnvRolloutWorker` and the CPU inference server in its own
  process; groups play continuously while the trainer trains, and weights are pushed after every step.

Two envs: `gymenvs/Echo-v0` whose steps sleep (`--step-sleep`, I/O-bound; thread slots), and Echo
whose steps hash (`--cpu-work` rounds of SHA-256, CPU-bound; process slots). Printed per env and
path: the generator's busy time as a share of the training wall time (time inside `generate`),
samples trained per second (both over the steps after the first, which warms up), and for the
async path the time from each weight sync to the first queued sample of the new version.

    python examples/benchmarks/async_rollout.py [--steps 6] [--batch 32] [--group 4] [--turns 4]

Figures depend on the machine and its load: they are printed, never asserted.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time

from wrappers.trl.extras.offline import run_offline_and_quietly

run_offline_and_quietly()

import httpx  # noqa: E402
from transformers import PrinterCallback, TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl.experimental.async_grpo import AsyncGRPOConfig  # noqa: E402

from wrappers.trl import (  # noqa: E402
    CPU_TRAINING_ARGS,
    CPUAsyncGRPOTrainer,
    EnvRolloutWorker,
    HTTPWeightTransfer,
    Sampling,
    episode_dataset,
    tiny_model,
)
from wrappers.trl.rollout.base import EnvRollout  # noqa: E402
from wrappers.trl.serve.inference_server import ServerProcess  # noqa: E402

ENV_ID = "gymenvs/Echo-v0"
TEMPERATURE = 1.0


class TimedGenerator:
    """Adds the time spent inside `generate` to `rollout.generation_s`."""

    def __init__(self, generator, rollout: TimedRollout):
        self.generator, self.rollout = generator, rollout

    def generate(self, prompts, max_tokens):
        start = time.perf_counter()
        try:
            return self.generator.generate(prompts, max_tokens)
        finally:
            self.rollout.generation_s += time.perf_counter() - start


class TimedRollout(EnvRollout):
    """make_rollout_func's rollout function, timing the trainer's generator."""

    generation_s = 0.0

    def _generator_for(self, trainer):
        return TimedGenerator(super()._generator_for(trainer), self)


class Window(TrainerCallback):
    """Opens the measuring window when the first training step ends (the first step warms up: the
    first `generate` and the first backward pass of a process are slow) and closes it at the end."""

    def __init__(self, busy_s) -> None:
        self.busy_s = busy_s  # reads the generator's busy seconds so far
        self.start = self.end = None

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 1:
            self.start = (time.perf_counter(), self.busy_s())

    def on_train_end(self, args, state, control, **kwargs):
        self.end = (time.perf_counter(), self.busy_s())

    def figures(self) -> dict:
        return {"wall_s": self.end[0] - self.start[0], "busy_s": self.end[1] - self.start[1]}


class DroppedSamples(TrainerCallback):
    """Samples the async trainer dropped for being more than max_staleness versions old."""

    count = 0

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.count += int((logs or {}).get("sample/dropped_stale_total") or 0)


def training_options(options) -> dict:
    """What both trainers are configured with."""
    return {
        **CPU_TRAINING_ARGS,
        "per_device_train_batch_size": options.batch,
        "num_generations": options.group,
        "max_completion_length": options.turns * (options.turn_tokens + 8),
        "max_steps": options.steps,
        "learning_rate": 1e-4,
        "temperature": TEMPERATURE,
        "seed": 0,
    }


def run_sync(env_kwargs: dict, backend: str, model, tokenizer, options) -> dict:
    rollout = TimedRollout(
        ENV_ID, env_kwargs=env_kwargs, max_tokens_per_turn=options.turn_tokens, show_tools=False, backend=backend
    )
    window = Window(lambda: rollout.generation_s)
    with tempfile.TemporaryDirectory() as output_dir:
        config = GRPOConfig(output_dir=output_dir, **training_options(options))
        trainer = GRPOTrainer(
            model=copy.deepcopy(model),
            processing_class=copy.deepcopy(tokenizer),
            args=config,
            train_dataset=episode_dataset(options.batch * options.steps),
            rollout_func=rollout,
            reward_funcs=rollout.reward_func,
            callbacks=[window],
        )
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    rollout.close()
    return {"path": "sync make_rollout_func", **window.figures(), "lags": [], "dropped": 0}


def run_async(env_kwargs: dict, backend: str, model, tokenizer, options) -> dict:
    dropped = DroppedSamples()
    with tempfile.TemporaryDirectory() as model_dir:
        model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
        with ServerProcess(model_dir) as server:
            window = Window(lambda: httpx.get(f"{server.base_url}/stats").json()["busy_s"])
            worker = EnvRolloutWorker(
                ENV_ID,
                env_kwargs=env_kwargs,
                server_url=server.base_url,
                tokenizer=tokenizer,
                num_generations=options.group,
                max_completion_length=options.turns * (options.turn_tokens + 8),
                max_tokens_per_turn=options.turn_tokens,
                show_tools=False,
                sampling=Sampling(temperature=TEMPERATURE),
                groups_in_flight=options.groups_in_flight,
                max_staleness=1,
                queue_maxsize=options.batch,  # about one step ahead, plus the groups in flight
                backend=backend,
            )
            config = AsyncGRPOConfig(
                output_dir=f"{model_dir}/out", max_staleness=1, token_budget=0, **training_options(options)
            )
            trainer = CPUAsyncGRPOTrainer(
                model_dir,
                processing_class=tokenizer,
                args=config,
                rollout_worker=worker,
                weight_transfer=HTTPWeightTransfer(server.base_url),
                callbacks=[dropped, window],
            )
            trainer.remove_callback(PrinterCallback)
            trainer.train()
    # The first sync comes before the worker starts: its lag is the start-up, not a sync.
    return {
        "path": "async EnvRolloutWorker",
        **window.figures(),
        "lags": worker.version_lags[1:],
        "dropped": dropped.count,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6, help="training steps per path (the first warms up)")
    parser.add_argument("--batch", type=int, default=32, help="samples (episodes) per training step")
    parser.add_argument("--group", type=int, default=4, help="GRPO group size")
    parser.add_argument("--turns", type=int, default=4, help="env steps per episode")
    parser.add_argument("--turn-tokens", type=int, default=8, help="cap on one model turn")
    parser.add_argument("--groups-in-flight", type=int, default=8, help="async worker: groups played at once")
    parser.add_argument("--step-sleep", type=float, default=0.05, help="I/O-bound env: seconds each step sleeps")
    parser.add_argument("--cpu-work", type=int, default=50_000, help="CPU-bound env: SHA-256 rounds per step")
    options = parser.parse_args()
    model, tokenizer = tiny_model(seed=0)
    envs = [
        (f"Echo, {options.step_sleep * 1000:.0f} ms sleep per step", {"step_sleep_s": options.step_sleep}, "thread"),
        (f"Echo, {options.cpu_work} SHA-256 rounds per step", {"step_cpu_work": options.cpu_work}, "process"),
    ]
    rows = []
    for label, env_kwargs, backend in envs:
        env_kwargs = {**env_kwargs, "max_turns": options.turns}
        for run in (run_sync, run_async):
            result = run(env_kwargs, backend, model, tokenizer, options)
            rows.append((label, result))
            print(f"{label}: {result['path']} done in {result['wall_s']:.1f} s", flush=True)
    print_table(rows, options)


def print_table(rows: list[tuple[str, dict]], options) -> None:
    load = os.getloadavg()
    print(
        f"\n{options.steps - 1} training steps (after a warm-up step) of {options.batch} episodes "
        f"(groups of {options.group}, up to {options.turns} turns of <= {options.turn_tokens} tokens), "
        "tiny model on CPU; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n"
    )
    lag = "sync -> first new sample s (median, max)"
    header = ("env", "path", "generator busy", "samples / s", "stale dropped", lag)
    table = []
    for label, r in rows:
        lags = f"{statistics.median(r['lags']):.2f}, {max(r['lags']):.2f}" if r["lags"] else "-"
        busy = f"{100 * r['busy_s'] / r['wall_s']:.0f}%"
        rate = f"{(options.steps - 1) * options.batch / r['wall_s']:.1f}"
        table.append((label, r["path"], busy, rate, str(r["dropped"]), lags))
    widths = [max(len(row[i]) for row in (header, *table)) for i in range(len(header))]
    print("| " + " | ".join(cell.ljust(width) for cell, width in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (width + 2) for width in widths) + "|")
    for row in table:
        print("| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |")


if __name__ == "__main__":
    main()
