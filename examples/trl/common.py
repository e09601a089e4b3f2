"""What the CPU ports of TRL's environment_factory examples share: offline set-up, a tiny model, a CPU config.

TRL's examples train Qwen3 on a GPU with vLLM against OpenEnv servers. These ports keep their
structure (an env class per game, reward functions that read `environments`) but use gymenvs envs
in process and the tiny offline model, so they run anywhere in seconds. They show the wiring,
not learning: two GRPO steps of a random 2-layer model.
"""

from __future__ import annotations

import inspect
import tempfile

# TRL's example datasets repeat their prompts and have no seed column; the bridge says how it tells groups apart.
from wrappers.trl.extras.offline import run_offline_and_quietly

run_offline_and_quietly(seedless_rows=True)

from transformers import PrinterCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from wrappers.trl import CPU_TRAINING_ARGS, teach_tool_calls, tiny_model, tool_call_text  # noqa: E402


def train(environment_factory, *, calls: list[tuple[str, dict]], steps: int = 2, **trainer_kwargs) -> GRPOTrainer:
    """Two GRPO steps of the tiny model, first taught to write the given tool calls, on CPU."""
    model, tokenizer = tiny_model(seed=0)
    factories = environment_factory if isinstance(environment_factory, dict) else {None: environment_factory}
    for factory in factories.values():
        probe = factory()
        tools = [  # what TRL shows the model: the public functions of the class but reset and get_reward
            getattr(probe, name)
            for name, _ in inspect.getmembers(factory, inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")
        ]
        dataset = trainer_kwargs.get("train_dataset")
        prompt = dataset[0]["prompt"] if dataset is not None and "prompt" in dataset.column_names else None
        prompt = prompt or [{"role": "user", "content": ""}]
        # As TRL builds it: the reset observation appended to the last message.
        conversation = [*prompt[:-1], {**prompt[-1], "content": prompt[-1]["content"] + probe.reset(prompt=prompt, seed=0)}]
        texts = [tool_call_text(name, arguments) for name, arguments in calls if hasattr(probe, name)]
        teach_tool_calls(model, tokenizer, [conversation], texts, tools=tools, steps=60)
    with tempfile.TemporaryDirectory() as output_dir:
        config = GRPOConfig(
            output_dir=output_dir, **CPU_TRAINING_ARGS, per_device_train_batch_size=8, num_generations=4,
            max_completion_length=64, max_tool_calling_iterations=2, max_steps=steps, logging_steps=1, learning_rate=1e-3,
            chat_template_kwargs={"enable_thinking": False},  # as TRL's examples pass it (Qwen3)
        )
        trainer = GRPOTrainer(
            model=model, processing_class=tokenizer, args=config, environment_factory=environment_factory,
            **trainer_kwargs,
        )
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    return trainer


def print_rewards(trainer: GRPOTrainer) -> None:
    print("reward functions TRL logs:", trainer.reward_func_names)
    for entry in trainer.state.log_history:
        if "reward" in entry:
            columns = {k.split("/")[1]: round(v, 3) for k, v in entry.items() if k.startswith("rewards/") and k.endswith("/mean")}
            print(f"step {entry['step']}: reward {entry['reward']:.3f}  per function {columns}  "
                  f"tool calls {entry.get('tools/call_frequency', 0):.2f}")
