"""Generation backends: token ids in; token ids, the sampled tokens' logprobs and a finish reason out."""

import sys
import types
from types import SimpleNamespace

import pytest
import torch
from bridge_support import CompletionsServer, StandInLLM, StandInSamplingParams, teacher_forced_logprobs

from wrappers.trl import Sampling, TransformersGenerator, VLLMGenerator, VLLMServerGenerator
from wrappers.trl.generation import MissingLogprobError, VLLMClientGenerator, generator_from_trainer


def prompts_for(tokenizer):
    return [tokenizer(text)["input_ids"] for text in ("hello", "the quick brown fox jumps", "a b c")]


def assert_logprobs_match_the_model(model, prompts, completions, temperature, top_k=0):
    for prompt, completion in zip(prompts, completions):
        forward = teacher_forced_logprobs(model, prompt, completion.token_ids, temperature, top_k)
        assert torch.allclose(torch.tensor(completion.logprobs), forward, atol=1e-4, rtol=0)


def test_transformers_backend_returns_the_sampling_logprob_of_each_sampled_token(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=0.7))
    prompts = prompts_for(tokenizer)  # different lengths: the batch is left-padded
    completions = generator.generate(prompts, [3, 9, 5])
    assert [len(c.token_ids) for c in completions] == [3, 9, 5]
    assert [c.finish_reason for c in completions] == ["length"] * 3
    assert_logprobs_match_the_model(model, prompts, completions, temperature=0.7)


def test_a_stop_token_ends_a_completion_and_is_kept(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    every_token = range(len(tokenizer))  # whatever is sampled first stops the completion
    generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, stop_token_ids=every_token)
    completions = generator.generate(prompts_for(tokenizer), [8, 8, 8])
    assert all(len(c.token_ids) == 1 and c.finish_reason == "stop" for c in completions)


def test_bad_batches_are_rejected(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id)
    with pytest.raises(ValueError, match="2 prompts but 1 token budgets"):
        generator.generate([[1], [2]], [4])
    with pytest.raises(ValueError, match="at least 1"):
        generator.generate([[1]], [0])
    with pytest.raises(ValueError, match="temperature > 0"):
        Sampling(temperature=0.0)


@pytest.fixture
def completions_server(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    server = CompletionsServer(StandInLLM(model, tokenizer.pad_token_id))
    yield server
    server.close()


def test_server_backend_speaks_vllm_completions_with_token_ids_and_logprobs(model_and_tokenizer, completions_server):
    model, tokenizer = model_and_tokenizer
    generator = VLLMServerGenerator(
        completions_server.base_url,
        sampling=Sampling(temperature=0.9, top_k=5),
        stop_token_ids=[tokenizer.eos_token_id],
    )
    assert generator.model == "tiny-qwen2"  # read from /v1/models
    prompts = prompts_for(tokenizer)
    completions = generator.generate(prompts, [4, 7, 2])
    (request,) = completions_server.requests
    assert request["prompt"] == prompts and request["max_tokens"] == 7
    assert request["return_token_ids"] is True and request["logprobs"] == 0 and request["n"] == 1
    assert (request["temperature"], request["top_k"], request["top_p"]) == (0.9, 5, 1.0)
    # Choices are matched to prompts by index, and each completion is cut at its own budget.
    assert [len(c.token_ids) for c in completions] == [4, 7, 2]
    assert_logprobs_match_the_model(model, prompts, completions, temperature=0.9, top_k=5)
    generator.close()


def test_server_errors_are_reported_with_the_server_message(completions_server):
    generator = VLLMServerGenerator(completions_server.base_url, model="not-served")
    with pytest.raises(RuntimeError, match="answered 404.*does not exist"):
        generator.generate([[1, 2]], [3])


@pytest.fixture
def stand_in_vllm(model_and_tokenizer, monkeypatch):
    """`vllm` replaced by the stand-in (vLLM needs a GPU): its `SamplingParams` takes vLLM's keywords
    only and its `LLM` samples from the real tiny model with the parameters it is given."""
    import trl.generation.vllm_client
    import trl.generation.vllm_generation  # noqa: F401  (imported before the stand-in: they look for a real vllm)

    model, tokenizer = model_and_tokenizer
    module = types.ModuleType("vllm")
    module.SamplingParams = StandInSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    return StandInLLM(model, tokenizer.pad_token_id)


def test_in_process_vllm_backend_sends_one_sampling_params_per_prompt_with_logprobs_0(
    model_and_tokenizer, stand_in_vllm
):
    model, tokenizer = model_and_tokenizer
    generator = VLLMGenerator(
        stand_in_vllm, sampling=Sampling(temperature=0.7, top_p=0.95, min_p=None), extra_sampling_params={"seed": 3}
    )
    prompts = prompts_for(tokenizer)
    completions = generator.generate(prompts, [2, 5, 3])
    ((requests, params),) = stand_in_vllm.calls
    assert requests == [{"prompt_token_ids": prompt} for prompt in prompts]
    assert [(p.n, p.logprobs, p.max_tokens, p.top_p, p.min_p, p.seed) for p in params] == [
        (1, 0, m, 0.95, 0.0, 3) for m in (2, 5, 3)
    ]
    assert [len(c.token_ids) for c in completions] == [2, 5, 3]
    for prompt, completion in zip(prompts, completions):  # top-p renormalises the kept tokens' probabilities
        forward = teacher_forced_logprobs(model, prompt, completion.token_ids, temperature=0.7)
        assert (torch.tensor(completion.logprobs) > forward).all()
    # The seed is honoured: the same request samples the same tokens again.
    assert [c.token_ids for c in generator.generate(prompts, [2, 5, 3])] == [c.token_ids for c in completions]


def test_in_process_vllm_backend_honours_temperature_and_top_k(model_and_tokenizer, stand_in_vllm):
    model, tokenizer = model_and_tokenizer
    prompts = prompts_for(tokenizer)
    completions = VLLMGenerator(stand_in_vllm, sampling=Sampling(temperature=0.6)).generate(prompts, [3, 3, 3])
    assert_logprobs_match_the_model(model, prompts, completions, temperature=0.6)
    completions = VLLMGenerator(stand_in_vllm, sampling=Sampling(top_k=1)).generate(prompts, [4, 4, 4])
    for prompt, completion in zip(prompts, completions):  # top-k 1 is greedy: each token is the argmax
        with torch.no_grad():
            logits = model(torch.tensor([prompt + completion.token_ids])).logits[0, len(prompt) - 1 : -1]
        assert completion.token_ids == logits.argmax(-1).tolist()[: len(completion.token_ids)]
        assert completion.logprobs == [0.0] * len(completion.token_ids)  # the processed distribution


def test_in_process_vllm_backend_reports_a_stop_token_as_stop_and_a_spent_budget_as_length(
    model_and_tokenizer, stand_in_vllm
):
    _, tokenizer = model_and_tokenizer
    prompts = prompts_for(tokenizer)
    every_token = list(range(len(tokenizer)))  # whatever is sampled first stops the completion
    stopped = VLLMGenerator(stand_in_vllm, extra_sampling_params={"stop_token_ids": every_token}).generate(prompts, [4, 4, 4])
    assert [(len(c.token_ids), c.finish_reason) for c in stopped] == [(1, "stop")] * 3
    _, params = stand_in_vllm.calls[0]
    assert all(p.stop_token_ids == every_token for p in params)
    spent = VLLMGenerator(stand_in_vllm).generate(prompts, [3, 1, 2])
    assert [(len(c.token_ids), c.finish_reason) for c in spent] == [(3, "length"), (1, "length"), (2, "length")]


def test_a_sampling_parameter_vllm_does_not_have_fails(stand_in_vllm):
    generator = VLLMGenerator(stand_in_vllm, extra_sampling_params={"max_new_tokens": 3})  # a transformers name
    with pytest.raises(TypeError, match="max_new_tokens"):
        generator.generate([[1, 2]], [3])


def test_a_missing_or_nan_logprob_raises_naming_the_request(stand_in_vllm):
    def answer_with(logprob_positions):
        output = SimpleNamespace(token_ids=(5, 6), logprobs=logprob_positions, finish_reason="length")
        return lambda prompts, sampling_params, use_tqdm: [SimpleNamespace(outputs=[output])] * len(prompts)

    generator = VLLMGenerator(stand_in_vllm)
    for positions, problem in [
        (None, "returned no logprobs"),
        ([{5: SimpleNamespace(logprob=-0.1)}, {6: SimpleNamespace(logprob=float("nan"))}], "token 1 is nan"),
        ([{5: SimpleNamespace(logprob=-0.1)}, {7: SimpleNamespace(logprob=-1.0)}], "token 1 is None"),
    ]:
        stand_in_vllm.generate = answer_with(positions)
        with pytest.raises(MissingLogprobError, match=f"prompt 1 of the batch.*{problem}|prompt 0 of the batch.*{problem}"):
            generator.generate([[1], [2]], [2, 2])


def test_the_server_backend_rejects_a_null_logprob_naming_the_request(completions_server):
    completions_server.null_logprob_at = 1
    generator = VLLMServerGenerator(completions_server.base_url)
    with pytest.raises(MissingLogprobError, match=r"prompt \d of the batch sent to http.*token 1 is None"):
        generator.generate([[1, 2]], [3])
    generator.close()
    assert generator._client.is_closed


@pytest.fixture
def trl_vllm_client(completions_server, monkeypatch):
    """trl's own VLLMClient, pointed at the stand-in server (its constructor insists vllm is installed)."""
    from trl.generation import vllm_client

    monkeypatch.setattr(vllm_client, "is_vllm_available", lambda: True)
    completions_server.reverse_choices = False  # VLLMClient reads choices in order, as vLLM sends them
    return vllm_client.VLLMClient(base_url=completions_server.base_url)


def test_in_server_mode_the_trainers_own_vllm_client_generates(model_and_tokenizer, completions_server, trl_vllm_client):
    model, tokenizer = model_and_tokenizer
    generator = VLLMClientGenerator(
        trl_vllm_client, sampling=Sampling(temperature=0.9, top_k=5), stop_token_ids=[tokenizer.eos_token_id]
    )
    prompts = prompts_for(tokenizer)
    completions = generator.generate(prompts, [4, 7, 2])
    (request,) = completions_server.requests[-1:]
    assert request["prompt"] == prompts and request["logprobs"] == 0 and request["max_tokens"] == 7
    assert (request["temperature"], request["top_k"]) == (0.9, 5)
    assert [len(c.token_ids) for c in completions] == [4, 7, 2]
    assert_logprobs_match_the_model(model, prompts, completions, temperature=0.9, top_k=5)


def vllm_trainer(model, tokenizer, tmp_path, **options):
    """A real GRPOTrainer with `use_vllm=True`: TRL builds its vLLM engine or client itself."""
    from trl import GRPOConfig, GRPOTrainer

    from wrappers.trl import CPU_TRAINING_ARGS, episode_dataset

    config = GRPOConfig(
        output_dir=str(tmp_path), **CPU_TRAINING_ARGS, per_device_train_batch_size=2, num_generations=2,
        max_completion_length=8, max_steps=1, use_vllm=True, **options,
    )
    return GRPOTrainer(
        model=model, processing_class=tokenizer, args=config, train_dataset=episode_dataset(2),
        reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
    )


@pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")
def test_a_trainer_in_colocate_mode_generates_through_the_engine_trl_built(
    model_and_tokenizer, stand_in_vllm, monkeypatch, tmp_path
):
    from trl.generation import vllm_generation

    model, tokenizer = model_and_tokenizer
    built = []
    monkeypatch.setattr(vllm_generation, "is_vllm_available", lambda: True)
    monkeypatch.setattr(vllm_generation, "LLM", lambda **kwargs: built.append(kwargs) or stand_in_vllm, raising=False)
    trainer = vllm_trainer(model, tokenizer, tmp_path, vllm_mode="colocate", temperature=0.6, top_k=4)
    generator = generator_from_trainer(trainer)
    assert isinstance(generator, VLLMGenerator) and generator.llm is stand_in_vllm and len(built) == 1
    prompts = prompts_for(tokenizer)
    completions = generator.generate(prompts, [3, 5, 2])
    assert [len(c.token_ids) for c in completions] == [3, 5, 2]
    assert_logprobs_match_the_model(trainer.model, prompts, completions, temperature=0.6, top_k=4)


@pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")
def test_a_trainer_in_server_mode_generates_through_the_client_trl_built(
    model_and_tokenizer, completions_server, monkeypatch, tmp_path
):
    from trl.generation import vllm_client, vllm_generation

    model, tokenizer = model_and_tokenizer
    monkeypatch.setattr(vllm_client, "is_vllm_available", lambda: True)
    monkeypatch.setattr(vllm_generation, "is_vllm_available", lambda: True)
    communicators = []  # NCCL weight sync needs a GPU: its set-up is recorded, not run
    monkeypatch.setattr(vllm_client.VLLMClient, "init_communicator", lambda self, device=0: communicators.append(self))
    completions_server.reverse_choices = False  # VLLMClient reads choices in order, as vLLM sends them
    trainer = vllm_trainer(
        model, tokenizer, tmp_path, vllm_mode="server", vllm_server_base_url=completions_server.base_url,
        temperature=0.6, top_k=4,
    )
    generator = generator_from_trainer(trainer)
    assert isinstance(generator, VLLMClientGenerator) and generator.client is communicators[0]  # the synced client
    prompts = prompts_for(tokenizer)
    completions = generator.generate(prompts, [4, 6, 2])
    assert [len(c.token_ids) for c in completions] == [4, 6, 2]
    assert_logprobs_match_the_model(trainer.model, prompts, completions, temperature=0.6, top_k=4)


def test_the_trainer_backend_follows_use_vllm_and_vllm_mode(trl_vllm_client):
    server_args = SimpleNamespace(
        use_vllm=True,
        vllm_mode="server",
        temperature=0.8,
        top_p=1.0,
        top_k=0,
        min_p=None,
        repetition_penalty=1.0,
        generation_kwargs=None,
    )
    trainer = SimpleNamespace(args=server_args, eos_token_ids=[2], vllm_generation=SimpleNamespace(vllm_client=trl_vllm_client))
    generator = generator_from_trainer(trainer)
    assert isinstance(generator, VLLMClientGenerator) and generator.client is trl_vllm_client  # no second client
    assert generator.sampling.temperature == 0.8
    colocate_args = SimpleNamespace(
        **{**vars(server_args), "vllm_mode": "colocate", "vllm_enable_sleep_mode": True, "vllm_tensor_parallel_size": 1}
    )
    with pytest.raises(ValueError, match="sleep mode"):
        generator_from_trainer(SimpleNamespace(args=colocate_args))
