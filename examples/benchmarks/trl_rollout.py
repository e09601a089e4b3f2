"""Episodes per second: gymenvs' concurrent `make_rollout_func` against TRL's own `environment_factory` loop.

Both run inside `GRPOTrainer` on CPU, with the same tiny model (taught to call the `echo` tool), the
same batch and the same env: `gymenvs/Echo-v0` whose every step sleeps 50 ms, standing in for a
container or a remote tool. TRL runs the env tools of a batch one rollout after another; the rollout
function steps every episode of the batch at once in a `ConcurrentVectorEnv`. Both paths cap a model
turn at the same number of tokens and sample at temperature 0.7. "rollout s" is the rollout phase
of a GRPO step (TRL's tool loop, or the rollout function); "GRPO step s" adds scoring and the
optimizer step.

    python examples/benchmarks/trl_rollout.py [--episodes 128] [--turns 4] [--steps 2] [--step-sleep 0.05]

Figures depend on the machine and its load: they are printed, never asserted.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile
import time

from wrappers.trl.extras.offline import run_offline_and_quietly

run_offline_and_quietly()

from transformers import PrinterCallback, TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from wrappers.trl import CPU_TRAINING_ARGS, environment_factory, episode_dataset, make_rollout_func, tiny_model  # noqa: E402
from wrappers.trl.extras.tiny_model import imitate  # noqa: E402

ENV_ID = "gymenvs/Echo-v0"


class StepTimer(TrainerCallback):
    """Wall time of each optimizer step (a step = one batch of episodes rolled out, scored, trained on)."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self.logs: list[dict] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.durations.append(time.perf_counter() - self._start)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "reward" in logs:
            self.logs.append(logs)


def time_rollouts(trainer: GRPOTrainer) -> list[float]:
    """Wall time of each rollout phase: GRPOTrainer._generate runs TRL's tool loop, or calls the
    rollout function. (TRL calls `reset` just before it; Echo's reset costs nothing.)"""
    durations: list[float] = []
    generate = trainer._generate

    def timed(prompts):
        start = time.perf_counter()
        try:
            return generate(prompts)
        finally:
            durations.append(time.perf_counter() - start)

    trainer._generate = timed
    return durations


def taught_model(env_kwargs: dict, rollout_tools: list[dict], turns: int):
    """The tiny model, taught to answer every turn of either path's conversation with an echo tool call."""
    model, tokenizer = tiny_model(seed=0)
    Echo = environment_factory(ENV_ID, **env_kwargs)
    observation = Echo().reset(prompt=[{"role": "user", "content": ""}], seed=0)
    opening = episode_dataset(1)[0]["prompt"]
    opening[-1]["content"] = observation
    calls = [{"name": "echo", "arguments": {"message": word}} for word in ("hi", "ok")]
    exchange = [
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": calls[0]}]},
        {"role": "tool", "name": "echo", "content": "hi"},
    ]
    prompts = [
        tokenizer.apply_chat_template(
            opening + exchange * turn, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
        for tools in ([Echo.echo], rollout_tools)  # TRL renders the class's methods; the rollout, the env's schemas
        for turn in range(turns)
    ]
    answers = [f"<tool_call>\n{json.dumps(call)}\n</tool_call>" for call in calls]
    return imitate(model, tokenizer, prompts, answers, steps=150), tokenizer


def run(name: str, model, tokenizer, options: argparse.Namespace, **trainer_kwargs) -> dict:
    timer = StepTimer()
    with tempfile.TemporaryDirectory() as output_dir:
        config = GRPOConfig(
            output_dir=output_dir,
            **CPU_TRAINING_ARGS,
            per_device_train_batch_size=options.episodes,
            num_generations=4,
            max_completion_length=64 * options.turns,
            max_tool_calling_iterations=options.turns,
            max_steps=options.steps + 1,
            logging_steps=1,
            learning_rate=1e-5,
            seed=0,
            temperature=0.7,  # the taught model writes well-formed calls at this temperature, in both paths
            generation_kwargs={"max_new_tokens": options.turn_tokens},  # TRL's cap on one turn
        )
        trainer = GRPOTrainer(
            model=copy.deepcopy(model),
            processing_class=copy.deepcopy(tokenizer),
            args=config,
            train_dataset=episode_dataset(4 * options.episodes),
            callbacks=[timer],
            **trainer_kwargs,
        )
        trainer.remove_callback(PrinterCallback)
        rollouts = time_rollouts(trainer)
        trainer.train()
    rollout_s, step_s = statistics.mean(rollouts[1:]), statistics.mean(timer.durations[1:])  # the first step warms up
    return {"name": name, "rollout_s": rollout_s, "step_s": step_s, "logs": timer.logs[1:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=128, help="episodes per batch (a multiple of 4)")
    parser.add_argument("--turns", type=int, default=4, help="env steps per episode")
    parser.add_argument("--steps", type=int, default=2, help="timed training steps per path (after one warm-up step)")
    parser.add_argument("--step-sleep", type=float, default=0.05, help="seconds each env step sleeps")
    parser.add_argument("--turn-tokens", type=int, default=48, help="cap on the tokens of one model turn (both paths)")
    options = parser.parse_args()

    env_kwargs = {"step_sleep_s": options.step_sleep, "max_turns": options.turns}
    rollout = make_rollout_func(ENV_ID, env_kwargs=env_kwargs, max_tokens_per_turn=options.turn_tokens)
    model, tokenizer = taught_model(env_kwargs, rollout.tools, options.turns)

    trl_loop = run(
        "TRL environment_factory",
        model,
        tokenizer,
        options,
        environment_factory=environment_factory(ENV_ID, **env_kwargs),
    )
    turns: list[int] = []

    def counting_rollout(prompts, trainer):
        output = rollout(prompts, trainer)
        turns.extend(output["env_turns"])
        return output

    concurrent = run(
        "gymenvs make_rollout_func",
        model,
        tokenizer,
        options,
        rollout_func=counting_rollout,
        reward_funcs=rollout.reward_func,
    )
    rollout.close()

    trl_loop["env_steps"] = statistics.mean(log["tools/call_frequency"] for log in trl_loop["logs"])
    concurrent["env_steps"] = statistics.mean(turns[options.episodes :])  # after the warm-up step
    print_table(options, [trl_loop, concurrent])


def print_table(options: argparse.Namespace, results: list[dict]) -> None:
    print(
        f"\n{ENV_ID}, step_sleep_s={options.step_sleep}, {options.episodes} episodes per batch, "
        f"up to {options.turns} turns "
        f"of at most {options.turn_tokens} tokens, mean of {options.steps} GRPO steps on CPU (after one warm-up step)\n"
    )
    header = ("path", "env steps / episode", "rollout s", "episodes / s", "env steps / s", "GRPO step s")
    rows = [
        (
            r["name"],
            f"{r['env_steps']:.2f}",
            f"{r['rollout_s']:.2f}",
            f"{options.episodes / r['rollout_s']:.1f}",
            f"{options.episodes * r['env_steps'] / r['rollout_s']:.1f}",
            f"{r['step_s']:.2f}",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    print("| " + " | ".join(cell.ljust(width) for cell, width in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (width + 2) for width in widths) + "|")
    for row in rows:
        print(
            "| "
            + " | ".join([row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:])])
            + " |"
        )
    baseline, ours = results
    print(
        f"\nrollout speed-up (episodes / s): {baseline['rollout_s'] / ours['rollout_s']:.1f}x; "
        f"whole GRPO step: {baseline['step_s'] / ours['step_s']:.1f}x"
    )
    print(
        "(env steps / episode: TRL's logged tools/call_frequency, the rollout's env_turns. TRL ends an episode at the "
        "first turn without a well-formed tool call; the rollout gives that turn to the env, which answers with an "
        "error, so its episodes run longer.)"
    )


if __name__ == "__main__":
    main()
