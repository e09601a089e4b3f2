"""Generation backends: token ids in; token ids, the sampled tokens' logprobs and a finish reason out."""

import sys
import types
from types import SimpleNamespace

import pytest
import torch
from bridge_support import CompletionsServer, teacher_forced_logprobs

from wrappers.trl import Sampling, TransformersGenerator, VLLMGenerator, VLLMServerGenerator
from wrappers.trl.generation import generator_from_trainer


def prompts_for(tokenizer):
    return [tokenizer(text)["input_ids"] for text in ("hello", "the quick brown fox jumps", "a b c")]


def assert_logprobs_match_the_model(model, prompts, completions, temperature):
    for prompt, completion in zip(prompts, completions):
        forward = teacher_forced_logprobs(model, prompt, completion.token_ids, temperature)
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
    server = CompletionsServer(
        TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=0.9))
    )
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
    assert_logprobs_match_the_model(model, prompts, completions, temperature=0.9)
    generator.close()


def test_server_errors_are_reported_with_the_server_message(completions_server):
    generator = VLLMServerGenerator(completions_server.base_url, model="not-served")
    with pytest.raises(RuntimeError, match="answered 404.*does not exist"):
        generator.generate([[1, 2]], [3])


class FakeVLLM:
    """Stands in for the `vllm` package (it needs a GPU): `SamplingParams` records its arguments and
    `LLM.generate` answers with objects shaped like vLLM's `RequestOutput`, from a real tiny model."""

    def __init__(self, generator):
        self.generator = generator
        self.calls = []
        module = types.ModuleType("vllm")
        module.SamplingParams = lambda **kwargs: SimpleNamespace(**kwargs)
        self.module = module

    def generate(self, requests, sampling_params, use_tqdm):
        self.calls.append((requests, sampling_params))
        prompts = [request["prompt_token_ids"] for request in requests]
        completions = self.generator.generate(prompts, [params.max_tokens for params in sampling_params])
        return [
            SimpleNamespace(
                outputs=[
                    SimpleNamespace(
                        token_ids=tuple(c.token_ids),
                        logprobs=[{t: SimpleNamespace(logprob=lp, rank=1)} for t, lp in zip(c.token_ids, c.logprobs)],
                        finish_reason=c.finish_reason,
                    )
                ]
            )
            for c in completions
        ]


def test_in_process_vllm_backend_sends_one_sampling_params_per_prompt_with_logprobs_0(model_and_tokenizer, monkeypatch):
    model, tokenizer = model_and_tokenizer
    fake = FakeVLLM(TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id))
    monkeypatch.setitem(sys.modules, "vllm", fake.module)
    generator = VLLMGenerator(fake, sampling=Sampling(top_p=0.95, min_p=None), extra_sampling_params={"seed": 3})
    prompts = prompts_for(tokenizer)
    completions = generator.generate(prompts, [2, 5, 3])
    ((requests, params),) = fake.calls
    assert requests == [{"prompt_token_ids": prompt} for prompt in prompts]
    assert [(p.n, p.logprobs, p.max_tokens, p.top_p, p.min_p, p.seed) for p in params] == [
        (1, 0, m, 0.95, 0.0, 3) for m in (2, 5, 3)
    ]
    assert [len(c.token_ids) for c in completions] == [2, 5, 3]
    assert_logprobs_match_the_model(model, prompts, completions, temperature=1.0)


def test_the_trainer_backend_follows_use_vllm_and_vllm_mode(completions_server):
    server_args = SimpleNamespace(
        use_vllm=True,
        vllm_mode="server",
        vllm_server_base_url=completions_server.base_url,
        temperature=0.8,
        top_p=1.0,
        top_k=0,
        min_p=None,
        repetition_penalty=1.0,
        generation_kwargs=None,
    )
    generator = generator_from_trainer(SimpleNamespace(args=server_args, eos_token_ids=[2]))
    assert isinstance(generator, VLLMServerGenerator) and generator.base_url == completions_server.base_url
    assert generator.sampling.temperature == 0.8
    colocate_args = SimpleNamespace(
        **{**vars(server_args), "vllm_mode": "colocate", "vllm_enable_sleep_mode": True, "vllm_tensor_parallel_size": 1}
    )
    with pytest.raises(ValueError, match="sleep mode"):
        generator_from_trainer(SimpleNamespace(args=colocate_args))
