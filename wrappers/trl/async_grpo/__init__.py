"""For `trl.experimental.async_grpo.AsyncGRPOTrainer`: `EnvRolloutWorker` (worker.py) plays episodes
continuously against an inference server; `CPUAsyncGRPOTrainer` (cpu_trainer.py) runs the trainer
without a GPU. See docs/async_grpo.md."""
