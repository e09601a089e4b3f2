"""Train a tiny model on CPU with GRPO until it plays a toy env through tool calls, in a minute or two.

The model is a randomly initialised 2-layer Qwen2 with a tokenizer trained in-process (no download).
The toy env registered here keeps Catch's idea in a form a tiny model can learn: a ball falls into
column a, b or c, and the agent catches it by calling the tool `catch(column)`. A random model never
writes a well-formed tool call, so a few supervised steps first teach the call's format with every
column equally likely (`teach_tool_calls`): the model then calls the tool but catches a third of the
balls. GRPO then trains it through TRL's own tool loop (`environment_factory`, no dataset: each group of
rollouts gets its own ball, the group's members the same one). Within the demo's minute the reward does not
yet rise beyond its step-to-step noise: the model learns to read the column too late (docs/trl.md).

Prints TRL's tool-call frequency and mean reward every 10 steps, then the first and last five steps.

    python examples/grpo_tools_cpu.py [--steps 40] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

# No dataset: TRL's placeholder rows are all alike, and the bridge says how it tells groups apart.
from wrappers.trl.extras.offline import run_offline_and_quietly

run_offline_and_quietly(seedless_rows=True)

import gymnasium as gym  # noqa: E402
from grpo_cpu import COLUMNS, LetterCatch  # noqa: E402  (the same toy env; here only its tool is used)
from transformers import PrinterCallback, TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from wrappers.trl import CPU_TRAINING_ARGS, environment_factory, teach_tool_calls, tiny_model, tool_call_text  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    gym.register("example/LetterCatch-v0", entry_point=LetterCatch)
    start = time.perf_counter()

    model, tokenizer = tiny_model(seed=options.seed, hidden_size=64, intermediate_size=128)
    Catch = environment_factory("example/LetterCatch-v0", name="letter_catch")
    probe = Catch()
    conversations = [
        [{"role": "user", "content": probe.reset(prompt=[{"role": "user", "content": ""}], seed=seed)}]
        for seed in range(6)
    ]
    calls = [tool_call_text("catch", {"column": column}) for column in COLUMNS]
    # 200 gentle steps: 100 at 1e-2 left seeds 1 and 2 writing broken calls (TRL counted 0.01 and 0.05 of them)
    teach_tool_calls(
        model, tokenizer, conversations, calls, tools=[probe.catch], steps=200, learning_rate=3e-3, seed=options.seed
    )

    progress = Progress()
    with tempfile.TemporaryDirectory() as output_dir:
        config = GRPOConfig(
            output_dir=output_dir,
            **CPU_TRAINING_ARGS,
            per_device_train_batch_size=32,
            num_generations=8,
            max_completion_length=28,
            max_tool_calling_iterations=1,
            max_steps=options.steps,
            learning_rate=1e-3,
            logging_steps=1,
            seed=options.seed,
        )
        trainer = GRPOTrainer(
            model=model, processing_class=tokenizer, args=config, environment_factory=Catch, callbacks=[progress]
        )
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    first, last = statistics.mean(progress.rewards[:5]), statistics.mean(progress.rewards[-5:])
    calls_first, calls_last = statistics.mean(progress.call_frequency[:5]), statistics.mean(progress.call_frequency[-5:])
    print(
        f"\nfirst 5 steps: tool calls {calls_first:.2f}, mean reward {first:.3f}; "
        f"last 5 steps: tool calls {calls_last:.2f}, mean reward {last:.3f}; "
        f"{time.perf_counter() - start:.0f} s on CPU"
    )


if __name__ == "__main__":
    main()
