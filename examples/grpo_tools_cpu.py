"""Train a tiny model on CPU with GRPO until it aims its tool calls at a toy env's ball, in about a minute.

The model is a randomly initialised 2-layer Qwen2 with a tokenizer trained in-process (no download).
The toy env registered here keeps Catch's idea in a form a tiny model can learn: a ball falls into
column a, b or c, its fall is drawn as the column's letter once per row, and the agent catches it by
calling the tool `catch(column)`. A random model never writes a well-formed tool call, so supervised
steps first teach the call's format from a poor teacher that names the ball's column half of the time
and another column the rest: the model then calls the tool and catches under half of the balls.
GRPO then trains it through TRL's own tool loop (`environment_factory`, no dataset: each group of
rollouts gets its own ball, the group's members the same one) and the model learns to aim.

Prints the catches of 60 held-out balls (sampled calls) before and after GRPO, TRL's tool-call
frequency and mean reward every 10 steps, then the first and last five steps.

    python examples/grpo_tools_cpu.py [--steps 40] [--seed 0] [--lr 3e-4] [--batch 64]
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import tempfile
import time
from typing import Any

# No dataset: TRL's placeholder rows are all alike, and the bridge says how it tells groups apart.
from wrappers.trl.extras.offline import run_offline_and_quietly

run_offline_and_quietly(seedless_rows=True)

import gymnasium as gym  # noqa: E402
import torch  # noqa: E402
from grpo_cpu import COLUMNS, LetterCatch  # noqa: E402  (the same toy env, its fall drawn below)
from transformers import PrinterCallback, TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from wrappers.trl import CPU_TRAINING_ARGS, environment_factory, teach_tool_calls, tiny_model, tool_call_text  # noqa: E402

ROWS = 16
HELD_OUT_BALLS = range(10_000, 10_060)


class FallingBall(LetterCatch):
    """LetterCatch whose observation also draws the fall: the column's letter once per row. Attention in a
    tiny random model is spread over the ~300 tokens of the prompt; one letter among them is too faint to read
    within the demo's minute, sixteen are not."""

    def _start_episode(self, options: dict[str, Any]) -> str:
        told = super()._start_episode(options)
        return f"{told} Its fall: {' '.join(self._column * ROWS)}"


class Progress(TrainerCallback):
    def __init__(self) -> None:
        self.rewards: list[float] = []
        self.call_frequency: list[float] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "reward" in logs:
            self.rewards.append(logs["reward"])
            self.call_frequency.append(logs.get("tools/call_frequency", 0.0))
            if state.global_step % 10 == 0 or state.global_step == 1:
                print(
                    f"step {state.global_step:3d}  tool calls {self.call_frequency[-1]:.2f}  "
                    f"mean reward {logs['reward']:.3f}",
                    flush=True,
                )


def first_message(episode: Any, seed: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": episode.reset(prompt=[{"role": "user", "content": ""}], seed=seed)}]


def one_ball_per_column(episode: Any) -> dict[str, list[dict[str, Any]]]:
    """The first message of an episode whose ball falls in each column."""
    balls: dict[str, list[dict[str, Any]]] = {}
    for seed in itertools.count():
        message = first_message(episode, seed)
        balls.setdefault(re.search(r"column (\w)", message[0]["content"])[1], message)  # type: ignore[index]
        if len(balls) == len(COLUMNS):
            return balls
    raise AssertionError("unreachable")


def teach_format_poorly(model: Any, tokenizer: Any, episode: Any, seed: int) -> None:
    """Supervised steps on the call's format from a teacher that, for each ball, names its column twice and each
    other column once: it aims half of the time, so what the model learns beyond that is GRPO's."""
    balls = one_ball_per_column(episode)
    pairs = [(balls[column], named) for column in COLUMNS for named in (*COLUMNS, column)]
    teach_tool_calls(model, tokenizer, [conversation for conversation, _ in pairs],
                     [tool_call_text("catch", {"column": named}) for _, named in pairs],
                     tools=[episode.catch], steps=150, learning_rate=3e-3, seed=seed, paired=True)


def held_out_catches(model: Any, tokenizer: Any, Catch: type) -> int:
    """Balls caught out of `HELD_OUT_BALLS`, one sampled call each (as in training: temperature 1)."""
    episodes = [Catch() for _ in HELD_OUT_BALLS]
    prompts = [tokenizer.apply_chat_template(first_message(episode, seed), tools=[episode.catch],
                                             add_generation_prompt=True, return_dict=True, return_tensors="pt")
               for episode, seed in zip(episodes, HELD_OUT_BALLS)]
    input_ids = torch.cat([prompt["input_ids"] for prompt in prompts])  # every prompt has the same length
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        output = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), do_sample=True,
                                max_new_tokens=28, pad_token_id=tokenizer.pad_token_id)
    caught = 0
    for episode, text in zip(episodes, tokenizer.batch_decode(output[:, input_ids.shape[1]:])):
        named = re.search(r'"column": "(\w)"', text)
        caught += bool(named) and "Caught" in episode.catch(named[1])
    return caught


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--batch", type=int, default=64)
    options = parser.parse_args()
    gym.register("example/FallingBall-v0", entry_point=FallingBall)
    start = time.perf_counter()

    model, tokenizer = tiny_model(seed=options.seed, hidden_size=64, intermediate_size=128)
    Catch = environment_factory("example/FallingBall-v0", name="falling_ball")
    teach_format_poorly(model, tokenizer, Catch(), options.seed)
    before = held_out_catches(model, tokenizer, Catch)
    print(f"after the supervised steps: {before} of {len(HELD_OUT_BALLS)} held-out balls caught", flush=True)

    progress = Progress()
    with tempfile.TemporaryDirectory() as output_dir:
        config = GRPOConfig(
            output_dir=output_dir,
            **CPU_TRAINING_ARGS,
            per_device_train_batch_size=options.batch,
            num_generations=8,
            max_completion_length=28,
            max_tool_calling_iterations=1,
            max_steps=options.steps,
            learning_rate=options.lr,
            logging_steps=1,
            seed=options.seed,
        )
        trainer = GRPOTrainer(
            model=model, processing_class=tokenizer, args=config, environment_factory=Catch, callbacks=[progress]
        )
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    after = held_out_catches(model, tokenizer, Catch)
    first, last = progress.rewards[:5], progress.rewards[-5:]
    print(
        f"\nfirst 5 steps: tool calls {statistics.mean(progress.call_frequency[:5]):.2f}, mean reward "
        f"{statistics.mean(first):.3f}; last 5 steps: tool calls {statistics.mean(progress.call_frequency[-5:]):.2f}, "
        f"mean reward {statistics.mean(last):.3f}; sd of a step's reward within them {statistics.stdev(first):.3f}, "
        f"{statistics.stdev(last):.3f}"
        f"\nheld-out balls caught: {before} of {len(HELD_OUT_BALLS)} before GRPO, {after} after; "
        f"{time.perf_counter() - start:.0f} s on CPU"
    )


if __name__ == "__main__":
    main()
