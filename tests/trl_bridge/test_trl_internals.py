"""The TRL internals the bridge relies on (wrappers/trl/trl_internals.py), checked against the installed
trl: when a release moves one, these fail by name instead of the bridge silently changing training data."""

import inspect

import pytest
from trl import GRPOConfig, GRPOTrainer

from wrappers.trl import CPU_TRAINING_ARGS, trl_internals

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")


def test_the_generation_step_holds_the_batch_rows_in_a_local_named_inputs():
    method = getattr(GRPOTrainer, trl_internals.GENERATING_METHOD)
    assert trl_internals.ROWS_VARIABLE in inspect.signature(method).parameters
    source = inspect.getsource(method)
    assert "self._generate(prompts)" in source  # rollout_func runs inside it
    assert "environment.reset(**reset_kwargs)" in source  # environment_factory resets run inside it
    assert "self.rollout_func(prompts, self)" in inspect.getsource(GRPOTrainer._generate)


def test_the_private_members_the_bridge_reads_exist():
    init = inspect.getsource(GRPOTrainer.__init__)
    assert "self._dist = DistributedBackend(" in inspect.getsource(GRPOTrainer) and "self.vllm_generation = " in init
    assert "self.num_generations = " in init and "self.num_generations_eval = " in init
    from trl.generation.vllm_generation import VLLMGeneration

    generation = inspect.getsource(VLLMGeneration)
    assert "self.llm = " in generation and "self.vllm_client = " in generation
    from trl.distributed import DistributedBackend  # `_dist` is one

    assert hasattr(DistributedBackend, "summon_full_params")


def test_inside_a_training_step_the_rollout_sees_its_trainer_rows_and_group_size(model_and_tokenizer, tmp_path):
    from datasets import Dataset

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

    prompt = [{"role": "user", "content": "Play."}]
    dataset = Dataset.from_dict({"prompt": [prompt] * 2, "seed": [10, 11], "environment": ["a", "b"]})
    config = GRPOConfig(
        output_dir=str(tmp_path), **CPU_TRAINING_ARGS,
        per_device_train_batch_size=4, num_generations=2, max_completion_length=8, max_steps=1,
    )
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, args=config, train_dataset=dataset,
        rollout_func=rollout_func, reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
    )
    assert trl_internals.batch_rows(trainer) is None  # not generating
    trainer.train()
    assert seen["trainer"] and seen["group_size"] == 2
    rows = seen["rows"]
    assert len(rows) == len(seen["prompts"]) == 4
    assert sorted(row["seed"] for row in rows) == [10, 10, 11, 11]
    assert [row["seed"] for row in rows[::2]] == [row["seed"] for row in rows[1::2]]  # groups are consecutive
    assert {row["environment"] for row in rows} == {"a", "b"}
