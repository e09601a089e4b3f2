"""Train a tiny model from scratch with GRPO on CPU until it plays a toy env, in a few minutes.

The model is a randomly initialised 2-layer Qwen2 with a tokenizer trained in-process (no download).
It knows no words, so Catch's `left` / `stay` / `right` are out of its reach. The toy env registered
here keeps Catch's idea in a form a random model can stumble on: a ball falls into one of three
lettered columns and the reply's first letter says where the paddle goes. A random reply catches
the ball ~1-3% of the time; GRPO reinforces those replies, and the model learns to read the column
from the observation and answer with its letter.

The episodes run through `wrappers.trl.make_rollout_func` (all episodes of a batch at once, with
token-level logprobs). Prints the mean reward of every step, then the first and last five.

    python examples/grpo_cpu.py [--steps 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from wrappers.trl.extras.offline import run_offline_and_quietly

run_offline_and_quietly()

import gymnasium as gym  # noqa: E402
from transformers import PrinterCallback, TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from gymenvs.core import Outcome, TextEnv, ToolCall, tool  # noqa: E402
from wrappers.trl import CPU_TRAINING_ARGS, episode_dataset, make_rollout_func, tiny_model  # noqa: E402

COLUMNS = "abc"


class LetterCatch(TextEnv):
    """A ball falls into column a, b or c; the reply's first letter puts the paddle under that column.
    Reward 1 for a catch, 0 otherwise; one move per episode."""

    default_max_turns = 1

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._column = COLUMNS[int(self.np_random.integers(len(COLUMNS)))]
        return f"The ball falls in column {self._column}."

    def _parse_text(self, text: str) -> ToolCall:
        return ToolCall("catch", {"column": text.strip()[:1].lower()})

    @tool
    def catch(self, column: str) -> Outcome:
        """Put the paddle under a column.

        Args:
            column: The column's letter.
        """
        caught = column == self._column
        return Outcome("Caught!" if caught else "Missed.", reward=float(caught), terminated=True)


class RewardPrinter(TrainerCallback):
    """Prints each step's mean reward, and at the end the first and last five steps' and the time taken."""

    def __init__(self) -> None:
        self.rewards: list[float] = []
        self.started = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "reward" in logs:
            self.rewards.append(logs["reward"])
            print(f"step {state.global_step:4d}  mean reward {logs['reward']:.3f}", flush=True)

    def print_summary(self) -> None:
        first, last = statistics.mean(self.rewards[:5]), statistics.mean(self.rewards[-5:])
        print(
            f"\nmean reward, first 5 steps: {first:.3f}; last 5 steps: {last:.3f}; "
            f"{time.perf_counter() - self.started:.0f} s on CPU"
        )


def demo_setup(description: str) -> tuple[argparse.Namespace, Any, Any]:
    """The demos' command line (`--steps`, `--seed`), the toy env registered, and the tiny model and tokenizer."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    gym.register("example/LetterCatch-v0", entry_point=LetterCatch)
    model, tokenizer = tiny_model(seed=options.seed, hidden_size=64, intermediate_size=128)
    return options, model, tokenizer


def main() -> None:
    options, model, tokenizer = demo_setup(__doc__.split("\n\n")[0])
    # One token answers: the turn is closed with the end-of-turn token after it.
    rollout = make_rollout_func("example/LetterCatch-v0", show_tools=False, max_tokens_per_turn=1)
    printer = RewardPrinter()
    with tempfile.TemporaryDirectory() as output_dir:
        config = GRPOConfig(
            output_dir=output_dir,
            **CPU_TRAINING_ARGS,
            per_device_train_batch_size=128,
            num_generations=8,
            max_completion_length=2,
            max_steps=options.steps,
            learning_rate=2e-3,
            logging_steps=1,
            seed=options.seed,
        )
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=config,
            train_dataset=episode_dataset(8192, seed=options.seed),
            rollout_func=rollout,
            reward_funcs=rollout.reward_func,
            callbacks=[printer],
        )
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    rollout.close()
    printer.print_summary()


if __name__ == "__main__":
    main()
