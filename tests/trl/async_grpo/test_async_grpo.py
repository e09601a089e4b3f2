"""TRL's AsyncGRPOTrainer trains on CPU: EnvRolloutWorker plays, the CPU server generates, HTTPWeightTransfer syncs."""

import queue

import httpx
import numpy as np
import pytest
import torch
from async_support import RETURNS, episode_number, packed_logprobs

pytestmark = pytest.mark.slow

STEPS = 3
BATCH = 6  # two groups of three
MAX_STALENESS = 1
TEMPERATURE = 0.9
TAKE_LIMIT = 4 * (STEPS + 1) * BATCH  # the trainer takes (STEPS + 1) batches, and drops a few stale samples


class RecordingQueue(queue.Queue):
    """The worker's rollout buffer, remembering what the trainer took, in order, with the trainer's version.

    It holds back the first sample and hands it to the trainer once it is more than MAX_STALENESS versions
    behind, as a straggling group would arrive: every run meets a stale sample, at a known point."""

    def __init__(self, trainer_version):
        super().__init__()
        self.trainer_version = trainer_version
        self.taken = []
        self.held = None
        self.held_taken_at = None  # the trainer's version when the held sample came back

    def get(self, *args, **kwargs):
        if len(self.taken) >= TAKE_LIMIT:  # a trainer that drops everything would otherwise never finish
            raise RuntimeError(f"the trainer took {len(self.taken)} samples for {STEPS} steps of {BATCH}")
        if self.held is not None and self.held_taken_at is None and self._stale(self.held):
            sample, self.held_taken_at = self.held, self.trainer_version()
        else:
            sample = super().get(*args, **kwargs)
            if self.held is None:
                self.held, sample = sample, super().get(*args, **kwargs)
        self.taken.append((sample, self.trainer_version()))
        return sample

    def _stale(self, sample):
        return self.trainer_version() - sample.model_version > MAX_STALENESS


@pytest.fixture(scope="module")
def run(_tiny, tmp_path_factory):
    import copy

    from transformers import TrainerCallback
    from trl.experimental.async_grpo import AsyncGRPOConfig

    from wrappers.trl import CPUAsyncGRPOTrainer, EnvRolloutWorker, HTTPWeightTransfer, InferenceServer, Sampling

    model, tokenizer = copy.deepcopy(_tiny[0]), _tiny[1]
    model_dir = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)

    class Logs(TrainerCallback):
        logs = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                self.logs.append(dict(logs))

    with InferenceServer(model_dir, model_name="tiny") as server:
        worker = EnvRolloutWorker(
            "tests/NumberedEcho-v0",
            env_kwargs={"max_turns": 2, "reward": 0.0, "length_reward": 0.1},
            server_url=server.base_url,
            tokenizer=tokenizer,
            num_generations=3,
            max_completion_length=40,
            max_tokens_per_turn=8,
            show_tools=False,
            sampling=Sampling(temperature=TEMPERATURE),
            max_staleness=MAX_STALENESS,
        )
        args = AsyncGRPOConfig(
            output_dir=str(model_dir / "out"),
            bf16=False,
            use_cpu=True,
            max_steps=STEPS,
            per_device_train_batch_size=BATCH,
            num_generations=3,
            temperature=TEMPERATURE,
            learning_rate=1e-2,
            max_staleness=MAX_STALENESS,
            token_budget=0,
            logging_steps=1,
            report_to="none",
            save_strategy="no",
            disable_tqdm=True,
        )
        trainer = CPUAsyncGRPOTrainer(
            str(model_dir),
            processing_class=tokenizer,
            args=args,
            rollout_worker=worker,
            weight_transfer=HTTPWeightTransfer(server.base_url),
            callbacks=[Logs()],
        )
        worker.rollout_buffer = trainer.rollout_queue = RecordingQueue(lambda: trainer.model_version)
        initial = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
        trainer.train()
        sequence = tokenizer("the quick brown fox jumps over the lazy dog")["input_ids"]
        body = {"model": "tiny", "prompt": [sequence], "max_tokens": 1, "prompt_logprobs": 0}
        body["temperature"] = TEMPERATURE
        served = httpx.post(f"{server.base_url}/v1/completions", json=body).json()["choices"][0]["prompt_logprobs"]
        stats = httpx.get(f"{server.base_url}/stats").json()
    yield {
        "trainer": trainer,
        "worker": worker,
        "initial": initial,
        "logs": Logs.logs,
        "sequence": sequence,
        "served": torch.tensor([entry[str(t)]["logprob"] for t, entry in zip(sequence[1:], served[1:])]),
        "stats": stats,
    }


def trainer_logprobs(trainer, sequence, parameters=None):
    """The trainer's own score of `sequence`: its model, its fused head at its temperature, its tree packing."""
    saved = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    if parameters is not None:
        trainer.model.load_state_dict(parameters, strict=False)
    try:
        return packed_logprobs(trainer.model, [sequence], prompt_length=1)[0]
    finally:
        trainer.model.load_state_dict(saved, strict=False)


def test_after_a_weight_sync_the_server_scores_as_the_trainer_does(run):
    trainer, served = run["trainer"], run["served"]
    assert torch.allclose(served, trainer_logprobs(trainer, run["sequence"]), atol=1e-4, rtol=0)
    before_training = trainer_logprobs(trainer, run["sequence"], run["initial"])
    assert (served - before_training).abs().max() > 1e-3  # the server serves the trained weights


def test_the_trainers_weights_change(run):
    changed = [
        name for name, p in run["trainer"].model.named_parameters() if not torch.equal(p.detach(), run["initial"][name])
    ]
    assert changed


def trained_samples(run):
    """The samples the trainer took and kept, in order: it drops those more than max_staleness behind."""
    taken = run["worker"].rollout_buffer.taken
    return [sample for sample, version in taken if version - sample.model_version <= MAX_STALENESS]


def test_the_model_version_goes_up_once_per_sync_and_stale_samples_are_dropped(run):
    trainer, worker = run["trainer"], run["worker"]
    assert trainer.model_version == worker.model_version == STEPS + 1  # the first sync, then one per step
    assert run["stats"]["weight_version"] == STEPS + 1
    buffer = worker.rollout_buffer
    # The held-back sample reached the trainer stale (it was tagged with the version it was generated under)...
    assert buffer.held_taken_at is not None and buffer.held_taken_at - buffer.held.model_version > MAX_STALENESS
    stale = [sample for sample, version in buffer.taken if version - sample.model_version > MAX_STALENESS]
    assert buffer.held in stale
    # ...and the trainer dropped it, and every other stale one it logged, and trained on nothing staler.
    dropped = sum(log.get("sample/dropped_stale_total", 0) for log in run["logs"])
    assert 1 <= dropped <= len(stale)
    assert [log["sample/staleness_max"] <= MAX_STALENESS for log in run["logs"]] == [True] * len(run["logs"])
    assert len(trained_samples(run)) >= STEPS * BATCH
    assert max(sample.model_version for sample, _ in buffer.taken) > 1  # later steps train on newer samples


def test_the_rewards_the_trainer_logs_are_the_env_returns(run):
    trained = trained_samples(run)
    assert all(sample.metrics["reward"] == pytest.approx(RETURNS[episode_number(sample)]) for sample in trained)
    batches = [trained[i * BATCH : (i + 1) * BATCH] for i in range(STEPS + 1)]
    means = [np.mean([RETURNS[episode_number(sample)] for sample in batch]) for batch in batches]
    # The dataloader collates one batch ahead and TRL logs what was collated since the last log:
    # the first log covers batches 0 and 1, log k batch k + 1.
    expected = [np.mean(means[:2]), *means[2:]]
    assert [log["reward"] for log in run["logs"]] == pytest.approx(expected)
