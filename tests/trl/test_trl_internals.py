"""The TRL internals the bridge relies on (`wrappers.trl.trl_internals`), run against the installed trl.

Each test builds a real `GRPOTrainer` and reads it through the fence, with the inputs the bridge gives
it: a TRL release that renames a method, a local or an attribute makes one of these fail by name
instead of the bridge silently training on the wrong rows or the wrong engine. vLLM needs a GPU, so
its two classes are replaced by recorders; TRL's own code still builds the trainer around them.
"""

from types import SimpleNamespace

import pytest
import torch
from bridge_support import teacher_forced_logprobs
from trl import GRPOConfig, GRPOTrainer

from wrappers.trl import CPU_TRAINING_ARGS, trl_internals
from wrappers.trl.generation import generator_from_trainer

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")

PROMPT = [{"role": "user", "content": "Play."}]


def rows_dataset():
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [PROMPT] * 2, "seed": [10, 11], "environment": ["a", "b"]})


def grpo_trainer(model, tokenizer, tmp_path, **options):
    """A GRPOTrainer over two rows (seeds 10 and 11), four rollouts per step in groups of two."""
    config_options = {
        **dict(per_device_train_batch_size=4, num_generations=2, max_completion_length=8, max_steps=1),
        **options.pop("config", {}),
    }
    config = GRPOConfig(output_dir=str(tmp_path), **CPU_TRAINING_ARGS, **config_options)
    return GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=rows_dataset(),
        reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
        **options,
    )


def assert_rows_of_one_step(rows):
    assert len(rows) == 4
    assert sorted(row["seed"] for row in rows) == [10, 10, 11, 11]
    assert [row["seed"] for row in rows[::2]] == [row["seed"] for row in rows[1::2]]  # groups are consecutive
    assert {row["environment"] for row in rows} == {"a", "b"}


def test_inside_a_training_step_the_rollout_sees_its_trainer_rows_and_group_size(model_and_tokenizer, tmp_path):
    model, tokenizer = model_and_tokenizer
    seen = {}

    def rollout_func(prompts, trainer):
        seen.update(
            trainer=trl_internals.generating_trainer() is trainer,
            rows=trl_internals.batch_rows(trainer),
            group_size=trl_internals.group_size(trainer),
            prompts=prompts,
        )
        ids = tokenizer("a")["input_ids"]
        return {"prompt_ids": [ids] * len(prompts), "completion_ids": [ids] * len(prompts), "logprobs": [[0.0]] * len(prompts)}

    trainer = grpo_trainer(model, tokenizer, tmp_path, rollout_func=rollout_func)
    assert trl_internals.generating_trainer() is None and trl_internals.batch_rows(trainer) is None  # not generating
    trainer.train()
    assert seen["trainer"] and seen["group_size"] == 2
    assert len(seen["prompts"]) == 4
    assert_rows_of_one_step(seen["rows"])
    assert trl_internals.batch_rows(trainer) is None  # generation is over


def test_an_environment_factory_reset_runs_inside_the_generation_step_of_its_trainer(model_and_tokenizer, tmp_path):
    """environment_factory instances get no trainer: the bridge finds it (and the group size) from reset."""
    model, tokenizer = model_and_tokenizer
    resets = []

    class Recorder:
        def reset(self, **row):
            trainer = trl_internals.generating_trainer()
            rows = trl_internals.batch_rows(trainer)
            group_size = None if trainer is None else trl_internals.group_size(trainer)
            resets.append(SimpleNamespace(row=row, trainer=trainer, rows=rows, group_size=group_size))
            return "Ready."

        def wait(self) -> str:
            """Wait a turn."""
            return "Waited."

    trainer = grpo_trainer(model, tokenizer, tmp_path, environment_factory=Recorder)
    trainer.train()
    assert len(resets) == 4
    assert [(reset.trainer is trainer, reset.group_size) for reset in resets] == [(True, 2)] * 4
    assert_rows_of_one_step(resets[0].rows)
    assert [reset.row["seed"] for reset in resets] == [row["seed"] for row in resets[0].rows]  # reset i gets row i


def test_the_group_size_follows_the_trainers_mode(model_and_tokenizer, tmp_path):
    model, tokenizer = model_and_tokenizer
    trainer = grpo_trainer(
        model, tokenizer, tmp_path, config=dict(num_generations_eval=4, per_device_eval_batch_size=4), rollout_func=None
    )
    trainer.model.train()
    assert trl_internals.group_size(trainer) == 2
    trainer.model.eval()
    assert trl_internals.group_size(trainer) == 4


def test_a_metric_the_rollout_logs_goes_where_trls_log_metric_puts_it(model_and_tokenizer, tmp_path):
    model, tokenizer = model_and_tokenizer
    trainer = grpo_trainer(model, tokenizer, tmp_path, rollout_func=None)
    trl_internals.log_metric(trainer, "dropped", 3.0)
    assert trainer._pending_metrics["dropped"] == [3.0]  # flushed into the step's logs after the rewards


def test_the_transformers_backend_of_a_trainer_generates_with_its_gathered_model(model_and_tokenizer, tmp_path):
    """`full_parameters` and TRL's `unwrap_model_for_generation`, entered as the bridge enters them."""
    model, tokenizer = model_and_tokenizer
    trainer = grpo_trainer(model, tokenizer, tmp_path, config=dict(temperature=0.8))
    with trl_internals.full_parameters(trainer):
        pass
    prompt = tokenizer("the quick brown fox")["input_ids"]
    (completion,) = generator_from_trainer(trainer).generate([prompt], [6])
    assert len(completion.token_ids) >= 1
    forward = teacher_forced_logprobs(trainer.model, prompt, completion.token_ids, temperature=0.8)
    assert torch.allclose(torch.tensor(completion.logprobs), forward, atol=1e-4, rtol=0)


class RecordingLLM:
    """Stands in for `vllm.LLM` (vLLM needs a GPU): keeps what TRL built it with."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


class RecordingClient:
    """Stands in for trl's `VLLMClient`: keeps what TRL built it with, talks to no server."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.communicator_device = None

    def init_communicator(self, device):
        self.communicator_device = device

    def get_server_info(self):
        return {"model_config": {"logprobs_mode": "processed_logprobs"}}


@pytest.fixture
def vllm_recorders(monkeypatch):
    from trl.generation import vllm_generation

    monkeypatch.setattr(vllm_generation, "is_vllm_available", lambda: True)
    monkeypatch.setattr(vllm_generation, "LLM", RecordingLLM, raising=False)
    monkeypatch.setattr(vllm_generation, "VLLMClient", RecordingClient)


def test_in_colocate_mode_the_fence_reaches_the_engine_trl_built(model_and_tokenizer, tmp_path, vllm_recorders):
    model, tokenizer = model_and_tokenizer
    trainer = grpo_trainer(model, tokenizer, tmp_path, config=dict(use_vllm=True, vllm_mode="colocate"))
    llm = trl_internals.colocated_llm(trainer)
    assert isinstance(llm, RecordingLLM)
    # VLLMGenerator's logprobs are the sampling policy's only with this engine setting.
    assert llm.kwargs["logprobs_mode"] == "processed_logprobs"


def test_in_server_mode_the_fence_reaches_the_client_trl_built(model_and_tokenizer, tmp_path, vllm_recorders):
    model, tokenizer = model_and_tokenizer
    config = dict(use_vllm=True, vllm_mode="server", vllm_server_base_url="http://127.0.0.1:9")
    trainer = grpo_trainer(model, tokenizer, tmp_path, config=config)
    client = trl_internals.server_client(trainer)
    assert isinstance(client, RecordingClient) and client.kwargs["base_url"] == "http://127.0.0.1:9"
    assert client.communicator_device is not None  # the client weights are synced through
