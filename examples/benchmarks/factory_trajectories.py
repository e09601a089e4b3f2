"""What recording trajectories costs TRL's tool loop: `environment_factory(..., trajectories=DIR)` against the same
factory without, through `GRPOTrainer`.

    python examples/benchmarks/factory_trajectories.py [--rounds 5] [--steps 3] [--batch 8]

A tiny Qwen3-family model (random weights, built offline) is scripted to make three `guess` calls in Wordle-v0 and
then reply, so every episode of every step plays the same four model turns through TRL's own tool loop, each a real
generation. After one run that warms up (not counted), each round trains `--steps` GRPO steps of `--batch` episodes
with trajectories and without, in alternating order. Prints the median seconds of a training run each way and their
ratio, and the files written per run. Then, without TRL, the recording's own cost: the median time of an episode of
the same three calls played on a factory instance directly (its reset and tool methods, as TRL calls them), with
and without trajectories (best of `--rounds` runs of 300 episodes; the writing thread waited for). Figures depend on
the machine and its load: printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from wrappers.trl.extras.offline import run_offline_and_quietly

run_offline_and_quietly()

from transformers import PrinterCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from gymenvs.dialects import response_parser  # noqa: E402
from wrappers.trl import CPU_TRAINING_ARGS, environment_factory, episode_dataset  # noqa: E402
from wrappers.trl.extras.tiny_families import (  # noqa: E402
    family_model,
    family_tokenizer,
    model_turn_text,
    script_generation,
    tool_call_turns,
)
from wrappers.trl.rollout.transcript import training_template  # noqa: E402

GUESSES = ("crane", "slate", "pious")


def scripted_model():
    tokenizer = family_tokenizer("qwen3")
    model, template = family_model(tokenizer), training_template(tokenizer)
    turns = tool_call_turns(tokenizer, "guess", "word", list(GUESSES), template)
    reply = model_turn_text(tokenizer, {"role": "assistant", "content": "Done."}, "Done.",
                            [{"role": "user", "content": "."}], template)
    turns = [*turns, tokenizer.encode(reply, add_special_tokens=False)]
    calls = script_generation(model, turns)
    scripted = model.generate

    def every_step_alike(input_ids, **options):  # each GRPO step's tool loop makes the same four calls
        if len(calls) == len(turns):
            calls.clear()
        return scripted(input_ids, **options)

    model.generate = every_step_alike
    return model, tokenizer


def one_run(model, tokenizer, options, folder: Path | None) -> float:
    """Seconds of `trainer.train()`: `--steps` GRPO steps through TRL's tool loop."""
    with tempfile.TemporaryDirectory() as output_dir:
        args = GRPOConfig(output_dir=output_dir, **CPU_TRAINING_ARGS, per_device_train_batch_size=options.batch,
                          num_generations=2, max_completion_length=2000, max_steps=options.steps,
                          max_tool_calling_iterations=len(GUESSES), logging_steps=1, seed=0)
        Wordle = environment_factory("gymenvs/Wordle-v0", max_turns=len(GUESSES), trajectories=folder)
        trainer = GRPOTrainer(model=model, processing_class=response_parser(tokenizer), args=args,
                              train_dataset=episode_dataset(options.batch * options.steps), environment_factory=Wordle)
        trainer.remove_callback(PrinterCallback)
        started = time.perf_counter()
        trainer.train()
        return time.perf_counter() - started


def episode_seconds(folder: Path | None, episodes: int = 300) -> float:
    """Seconds per episode of a factory instance played directly: a reset and the three guesses."""
    Wordle = environment_factory("gymenvs/Wordle-v0", max_turns=len(GUESSES), trajectories=folder)
    wordle = Wordle()
    started = time.perf_counter()
    for seed in range(episodes):
        wordle.reset(prompt=[{"role": "user", "content": ""}], seed=seed, options={"secret": "lymph"})
        for word in GUESSES:
            wordle.guess(word=word)
    wordle._close()  # waits for the writing thread
    return (time.perf_counter() - started) / episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    options = parser.parse_args()
    model, tokenizer = scripted_model()
    print(f"load average at the start {os.getloadavg()[0]:.2f}")
    one_run(model, tokenizer, options, None)  # warm-up
    seconds: dict[bool, list[float]] = {False: [], True: []}
    files = []
    for number in range(options.rounds):
        for recording in ((False, True) if number % 2 == 0 else (True, False)):
            with tempfile.TemporaryDirectory() as folder:
                seconds[recording].append(one_run(model, tokenizer, options, Path(folder) if recording else None))
                if recording:
                    files.append(len(list(Path(folder).rglob("*.json"))))
    without, with_ = statistics.median(seconds[False]), statistics.median(seconds[True])
    print(f"{options.steps} steps of {options.batch} Wordle episodes (4 model turns, 3 calls each), median of {options.rounds}:")
    print(f"  without trajectories {without:.3f} s, with {with_:.3f} s: ratio {with_ / without:.3f}")
    print(f"  each way: {', '.join(f'{s:.3f}' for s in seconds[False])} / {', '.join(f'{s:.3f}' for s in seconds[True])}")
    print(f"  trajectory files per run: {sorted(set(files))}")
    plain = min(episode_seconds(None) for _ in range(options.rounds))
    with tempfile.TemporaryDirectory() as folder:
        recorded = min(episode_seconds(Path(folder)) for _ in range(options.rounds))
    print(f"an episode played on the instance directly: {plain * 1e3:.3f} ms without, {recorded * 1e3:.3f} ms with "
          f"trajectories: recording adds {(recorded - plain) * 1e3:.3f} ms an episode")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
