"""The CPU inference server, the HTTP weight transfer and the CPU tree attention behind AsyncGRPOTrainer on CPU."""

import copy
import threading

import httpx
import pytest
import torch
from async_support import packed_logprobs
from bridge_support import teacher_forced_logprobs

from wrappers.trl import HTTPWeightTransfer, InferenceServer


@pytest.fixture
def served(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    with InferenceServer(copy.deepcopy(model), tokenizer, model_name="tiny") as server:
        yield model, tokenizer, server


def complete(server, prompts, **fields):
    body = {"model": "tiny", "prompt": prompts, "max_tokens": 6, "logprobs": 0, "return_token_ids": True, **fields}
    return httpx.post(f"{server.base_url}/v1/completions", json=body, timeout=60)


def test_the_server_lists_its_model_and_config_as_vllm_does(served):
    _, _, server = served
    assert httpx.get(f"{server.base_url}/health").status_code == 200
    (card,) = httpx.get(f"{server.base_url}/v1/models").json()["data"]
    assert card["id"] == "tiny" and card["max_model_len"] == 4096
    info = httpx.get(f"{server.base_url}/server_info", params={"config_format": "json"}).json()["vllm_config"]
    assert info["model_config"]["dtype"] == "torch.float32" and info["lora_config"] is None


def test_completions_return_token_ids_and_the_processed_logprob_of_each_sampled_token(served):
    model, tokenizer, server = served
    prompts = [tokenizer(text)["input_ids"] for text in ("hello", "the quick brown fox")]
    response = complete(server, prompts, temperature=0.7, return_tokens_as_token_ids=True)
    assert response.status_code == 200, response.text
    choices = response.json()["choices"]
    for prompt, choice in zip(prompts, choices):
        assert choice["prompt_token_ids"] == prompt and len(choice["token_ids"]) <= 6
        assert choice["logprobs"]["tokens"] == [f"token_id:{t}" for t in choice["token_ids"]]
        forward = teacher_forced_logprobs(model, prompt, choice["token_ids"], temperature=0.7)
        assert torch.allclose(torch.tensor(choice["logprobs"]["token_logprobs"]), forward, atol=1e-4, rtol=0)


def test_bad_requests_are_answered_with_400_and_a_reason(served):
    _, _, server = served
    assert complete(server, [[1, 2]], n=2).status_code == 400
    assert complete(server, [[1, 2]], max_tokens=5000).json()["error"]["message"].startswith("This model's maximum")
    assert complete(server, [[1, 2]], temperature=0.0).status_code == 400
    assert complete(server, [[1, 2]], model="other").status_code == 404


def test_concurrent_requests_share_batches(served):
    _, _, server = served
    responses = []
    threads = [threading.Thread(target=lambda: responses.append(complete(server, [[5, 6, 7]]))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.status_code for r in responses] == [200] * 8
    stats = httpx.get(f"{server.base_url}/stats").json()
    assert stats["prompts"] == 8 and stats["batches"] < 8
    assert 0 < stats["busy_s"] <= stats["wall_s"]


def test_a_paused_server_holds_requests_until_it_resumes(served):
    _, _, server = served
    assert httpx.post(f"{server.base_url}/pause", params={"mode": "keep"}).status_code == 200
    held = []
    thread = threading.Thread(target=lambda: held.append(complete(server, [[5, 6, 7]])))
    thread.start()
    thread.join(timeout=1.0)
    assert thread.is_alive() and not held  # queued, not answered
    assert httpx.post(f"{server.base_url}/resume").status_code == 200
    thread.join(timeout=60)
    assert held[0].status_code == 200


def test_weights_load_only_while_paused(served):
    _, _, server = served
    assert httpx.post(f"{server.base_url}/start_weight_update").status_code == 409


def test_the_weight_transfer_makes_the_server_compute_the_trainers_logprobs(served):
    model, tokenizer, server = served
    trained = copy.deepcopy(model)
    with torch.no_grad():
        for parameter in trained.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    sequence = tokenizer("the quick brown fox jumps over")["input_ids"]

    def served_logprobs():
        body = {"model": "tiny", "prompt": [sequence], "max_tokens": 1, "prompt_logprobs": 0, "temperature": 0.8}
        entries = httpx.post(f"{server.base_url}/v1/completions", json=body).json()["choices"][0]["prompt_logprobs"]
        return torch.tensor([entry[str(token)]["logprob"] for token, entry in zip(sequence[1:], entries[1:])])

    expected = teacher_forced_logprobs(trained, sequence[:1], sequence[1:], temperature=0.8)
    assert (served_logprobs() - expected).abs().max() > 1e-3  # the server still has the old weights
    transfer = HTTPWeightTransfer(server.base_url, chunk_bytes=4096)  # several requests
    transfer.init_weight_transfer()
    transfer.pause()
    transfer.send_weights(iter(trained.named_parameters()))
    transfer.resume()
    transfer.destroy()
    assert torch.allclose(served_logprobs(), expected, atol=1e-4, rtol=0)
    assert httpx.get(f"{server.base_url}/stats").json()["weight_version"] == 1


def test_the_cpu_tree_attention_scores_packed_samples_as_separate_forward_passes(model_and_tokenizer):
    """TRL packs samples that share a prefix into one row; each token must see only its own sample's past."""
    from trl.experimental.async_grpo.async_grpo_trainer import add_fused_lm_head

    from wrappers.trl.async_grpo.cpu_trainer import CPU_TREE_ATTENTION, register_cpu_tree_attention

    model, _ = model_and_tokenizer
    packed_model = copy.deepcopy(model)
    register_cpu_tree_attention()
    packed_model.set_attn_implementation(CPU_TREE_ATTENTION)
    add_fused_lm_head(packed_model, temperature=0.7)
    prefix = list(range(20, 32))
    samples = [prefix + list(range(40, 45)), prefix + list(range(50, 59)), prefix[:5] + [7, 8], list(range(60, 67))]
    scored, forwarded = packed_logprobs(packed_model, samples, prompt_length=4)
    assert forwarded < sum(map(len, samples))  # the shared prefix is forwarded once
    separate = torch.cat([teacher_forced_logprobs(model, ids[:4], ids[4:], temperature=0.7) for ids in samples])
    assert torch.allclose(scored, separate, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_the_server_runs_as_its_own_process_from_a_model_directory(model_and_tokenizer, tmp_path):
    from wrappers.trl.serve.inference_server import ServerProcess

    model, tokenizer = model_and_tokenizer
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    with ServerProcess(tmp_path) as server:
        (card,) = httpx.get(f"{server.base_url}/v1/models").json()["data"]
        assert card["id"] == str(tmp_path)
        body = {"model": str(tmp_path), "prompt": [[5, 6, 7]], "max_tokens": 3, "logprobs": 0, "return_token_ids": True}
        assert len(httpx.post(f"{server.base_url}/v1/completions", json=body, timeout=60).json()["choices"]) == 1
    assert server.process.poll() is not None  # closed: the process has ended
