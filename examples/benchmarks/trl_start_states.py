"""Distinct start states per 16 rollouts (4 GRPO groups of 4), through a real `trl.GRPOTrainer` step.

For each way a TRL user feeds episodes to the bridge, one training step runs with the tiny offline
model and every episode's start state is recorded (the Wordle secret, the Catch ball column). A
good bridge gives each group one start and different groups different starts: 4 distinct states
per 16 rollouts, every group sharing one.

    python examples/benchmarks/trl_start_states.py [factory|rollout]   (default: both)
"""

from __future__ import annotations

import sys
import tempfile
import warnings

from wrappers.trl.extras.offline import run_offline_and_quietly

run_offline_and_quietly()
warnings.filterwarnings("ignore", category=FutureWarning)

import gymnasium as gym  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import PrinterCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from gymenvs.envs.catch import CatchEnv  # noqa: E402
from gymenvs.envs.wordle import WordleEnv  # noqa: E402
from wrappers.trl import CPU_TRAINING_ARGS, environment_factory, make_rollout_func, tiny_model  # noqa: E402

GROUP, ROLLOUTS = 4, 16
STARTS: list[tuple[str, object]] = []  # (env, start state) in reset order


class RecordedWordle(WordleEnv):
    def _start_episode(self, options):
        observation = super()._start_episode(options)
        STARTS.append(("wordle", self.state()["secret"]))
        return observation


class RecordedCatch(CatchEnv):
    def _start_episode(self, options):
        observation = super()._start_episode(options)
        STARTS.append(("catch", self.state()["ball"][1]))
        return observation


def zero(completions, **kwargs):
    return [0.0] * len(completions)


def train_one_step(**trainer_kwargs) -> None:
    model, tokenizer = tiny_model(seed=0)
    with tempfile.TemporaryDirectory() as output_dir:
        config = GRPOConfig(
            output_dir=output_dir, **CPU_TRAINING_ARGS, per_device_train_batch_size=ROLLOUTS,
            num_generations=GROUP, max_completion_length=24, max_steps=1, logging_strategy="no",
            max_tool_calling_iterations=1,
        )
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config, **trainer_kwargs)
        trainer.remove_callback(PrinterCallback)
        trainer.train()


def summary(starts: list) -> str:
    groups = [starts[i : i + GROUP] for i in range(0, len(starts), GROUP)]
    shared = sum(len(set(group)) == 1 for group in groups)
    return f"{len(set(starts)):2d} distinct start states in {len(starts)} rollouts; {shared}/{len(groups)} groups share one"


def measure(label: str, **trainer_kwargs) -> None:
    if sys.argv[1:] and not label.startswith(sys.argv[1]):
        return
    STARTS.clear()
    train_one_step(**trainer_kwargs)
    starts = STARTS[-ROLLOUTS:]  # the factory probes build no episode; a rollout resets exactly once per rollout
    by_env: dict[str, list] = {}
    for env, state in starts:
        by_env.setdefault(env, []).append(state)
    for env, states in by_env.items():
        print(f"{label:<62} {env:<7} {summary(states)}")


def main() -> None:
    gym.register("bench/Wordle-v0", entry_point=RecordedWordle)
    gym.register("bench/Catch-v0", entry_point=RecordedCatch)
    rows = ROLLOUTS // GROUP
    prompt = [{"role": "user", "content": "Play."}]
    seeded = Dataset.from_dict({"prompt": [prompt] * rows, "seed": list(range(rows))})
    same_prompt = Dataset.from_dict({"prompt": [prompt] * rows})
    dict_form = Dataset.from_dict({"environment": ["wordle", "catch"] * rows})
    factory = {"wordle": environment_factory("bench/Wordle-v0"), "catch": environment_factory("bench/Catch-v0")}

    measure("factory: seed column, identical prompts", train_dataset=seeded,
            environment_factory=environment_factory("bench/Wordle-v0"))
    measure("factory: identical prompts, no seed column", train_dataset=same_prompt,
            environment_factory=environment_factory("bench/Wordle-v0"))
    measure("factory: no train_dataset (TRL's placeholder rows)",
            environment_factory=environment_factory("bench/Wordle-v0"))
    measure("factory: dict form, Dataset({'environment': [...]})", train_dataset=dict_form,
            environment_factory=factory, reward_funcs=zero)
    # One worker thread: the envs reset in slot order, so the recorded starts line up with the groups.
    rollout = make_rollout_func("bench/Wordle-v0", max_workers=1)
    measure("rollout: seed column, identical prompts", train_dataset=seeded, rollout_func=rollout, reward_funcs=zero)
    measure("rollout: identical prompts, no seed column", train_dataset=same_prompt, rollout_func=rollout,
            reward_funcs=zero)
    rollout.close()
    try:
        multi = make_rollout_func({"wordle": "bench/Wordle-v0", "catch": "bench/Catch-v0"}, max_workers=1)
    except Exception as exc:  # the bridge before issue 10 had no multi-env rollout
        print(f"{'rollout: dict form, Dataset({environment: [...]})':<62} -       {type(exc).__name__}: {exc}")
    else:
        # Without environment_factory TRL needs a prompt column: empty prompts beside the environment names.
        with_prompts = dict_form.add_column("prompt", [[{"role": "user", "content": ""}]] * len(dict_form))
        measure("rollout: dict form + empty prompts", train_dataset=with_prompts, rollout_func=multi,
                reward_funcs=zero)
        multi.close()


if __name__ == "__main__":
    main()
