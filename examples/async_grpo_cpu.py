"""The GRPO learning demo of `grpo_cpu.py`, trained by TRL's asynchronous `AsyncGRPOTrainer` on CPU.

Same tiny model, same toy env (a ball falls into column a, b or c; the reply's first letter moves
the paddle). Here generation never waits for training: an inference server (a separate process,
as `vllm serve` would be) samples for `EnvRolloutWorker`, which keeps GRPO groups playing in
`ConcurrentVectorEnv`s and queues scored samples; the trainer takes them as they come and pushes
its weights back to the server after every step. Prints the mean reward of every step, then the
first and last five.

    python examples/async_grpo_cpu.py [--steps 200] [--seed 0]
"""

from __future__ import annotations

import tempfile

from wrappers.trl.extras.offline import run_offline_and_quietly

run_offline_and_quietly()

from grpo_cpu import RewardPrinter, demo_setup  # noqa: E402  (the synchronous demo's toy env, model and printer)
from transformers import PrinterCallback  # noqa: E402
from trl.experimental.async_grpo import AsyncGRPOConfig  # noqa: E402

from wrappers.trl import CPU_TRAINING_ARGS, CPUAsyncGRPOTrainer, EnvRolloutWorker, HTTPWeightTransfer, Sampling  # noqa: E402
from wrappers.trl.serve.inference_server import ServerProcess  # noqa: E402

GROUP = 8
BATCH = 128


def main() -> None:
    options, model, tokenizer = demo_setup(__doc__.split("\n\n")[0])
    printer = RewardPrinter()
    with tempfile.TemporaryDirectory() as model_dir:
        model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
        with ServerProcess(model_dir, max_batch_size=BATCH) as server:
            worker = EnvRolloutWorker(
                "example/LetterCatch-v0",
                server_url=server.base_url,
                tokenizer=tokenizer,
                num_generations=GROUP,
                max_completion_length=2,
                max_tokens_per_turn=1,  # one token answers; the turn is closed with the end-of-turn token
                show_tools=False,
                seed=options.seed,
                sampling=Sampling(temperature=1.0),
                groups_in_flight=BATCH // GROUP,
                max_staleness=1,
                queue_maxsize=BATCH,  # at most about two steps ahead of the trainer
            )
            config = AsyncGRPOConfig(
                output_dir=f"{model_dir}/out",
                **CPU_TRAINING_ARGS,
                per_device_train_batch_size=BATCH,
                num_generations=GROUP,
                max_completion_length=2,
                temperature=1.0,
                max_steps=options.steps,
                learning_rate=2e-3,
                max_staleness=1,
                token_budget=0,  # a fixed number of samples per step, as in the synchronous demo
                logging_steps=1,
                seed=options.seed,
            )
            trainer = CPUAsyncGRPOTrainer(
                model_dir,
                processing_class=tokenizer,
                args=config,
                rollout_worker=worker,
                weight_transfer=HTTPWeightTransfer(server.base_url),
                callbacks=[printer],
            )
            trainer.remove_callback(PrinterCallback)
            trainer.train()
    printer.print_summary()


if __name__ == "__main__":
    main()
