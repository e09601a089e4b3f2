"""Helpers for the TRL bridge tests."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from tests.json_server_support import LocalJSONServer


def env_runs(episode: Any) -> list[list[int]]:
    """The runs of env-written tokens (`env_mask` 0) between an episode's model turns, in order."""
    runs: list[list[int]] = []
    current: list[int] = []
    for token, mask in zip(episode.completion_ids, episode.env_mask):
        if not mask:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    return runs


def tool_call(name: str, **arguments: Any) -> str:
    """A tool call as the Qwen2.5 chat template writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def render_prompt(tokenizer, messages, tools):
    """The token ids of a chat prompt, ready for the assistant's turn."""
    return tokenizer.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]


def teach_tool_calls(model, tokenizer, prompt_messages, calls, tools):
    """The model after supervised steps towards `calls`: a random model almost never writes a
    well-formed tool call, and TRL's tool loop only goes on while the model calls tools."""
    from wrappers.trl.extras.tiny_model import imitate

    return imitate(
        model, tokenizer, [render_prompt(tokenizer, prompt_messages, tools)], calls, steps=100, learning_rate=1e-2
    )


def teacher_forced_logprobs(model, prompt_ids, completion_ids, temperature=1.0, top_k=0):
    """Each completion token's logprob under one forward pass over prompt + completion, from the
    distribution sampled from: logits / temperature, cut to the `top_k` largest (0: all), renormalised."""
    import torch

    ids = torch.tensor([list(prompt_ids) + list(completion_ids)])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt_ids) - 1 : -1].float() / temperature
    if top_k:
        kth_largest = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    return logits.log_softmax(-1).gather(-1, torch.tensor(completion_ids)[:, None]).squeeze(-1)


#: Request fields of `/v1/completions` that are not sampling parameters.
_PROTOCOL_FIELDS = {"model", "prompt", "return_token_ids", "return_tokens_as_token_ids"}


class CompletionsServer(LocalJSONServer):
    """A local HTTP server that speaks vLLM's OpenAI-compatible `/v1/completions` format for token-id
    prompts (`return_token_ids`, `logprobs`), generating with `llm` (a `StandInLLM`: the real tiny
    model through transformers' own `generate`) with the sampling parameters each request sends.
    vLLM itself needs a GPU; this stands in for its HTTP surface only.

    Every request body is kept in `requests`; choices come back in reverse order (clients must
    read `index`)."""

    def __init__(self, llm, model_name: str = "tiny-qwen2"):
        self.llm = llm
        self.model_name = model_name
        self.requests: list[dict] = []
        self.reverse_choices = True  # real servers answer in order; clients that read `index` must not care
        self.null_logprob_at: int | None = None  # answer this position's logprob with null, as a broken server might
        self.base_url = self.start()

    def route(self, method: str, path: str, body: dict | None) -> tuple[int, dict]:
        if method == "GET" and path == "/health":
            return 200, {}
        if method == "GET" and path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": self.model_name, "object": "model"}]}
        if method == "GET" and path.split("?")[0] == "/server_info":  # what TRL's VLLMClient reads
            return 200, {"vllm_config": {"model_config": {"logprobs_mode": "processed_logprobs"}, "weight_transfer_config": None}}
        if method == "POST":
            self.requests.append(body)
            if path == "/v1/completions":
                return self.complete(body)
        return 404, {"error": {"message": f"no route {path}", "code": 404}}

    def complete(self, body: dict) -> tuple[int, dict]:
        prompts = body.get("prompt")
        if body.get("model") != self.model_name:
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist.", "code": 404}}
        if not (
            isinstance(prompts, list)
            and prompts
            and all(isinstance(p, list) and all(isinstance(t, int) for t in p) for p in prompts)
        ):
            return 400, {"error": {"message": "prompt must be a list of token-id lists", "code": 400}}
        try:
            params = StandInSamplingParams(**{k: v for k, v in body.items() if k not in _PROTOCOL_FIELDS})
        except (TypeError, NotImplementedError) as error:
            return 400, {"error": {"message": str(error), "code": 400}}
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], [params] * len(prompts))
        choices = [self._choice(index, output, body) for index, output in enumerate(outputs)]
        choices = choices[::-1] if self.reverse_choices else choices
        return 200, {"id": "cmpl-test", "object": "text_completion", "model": self.model_name, "choices": choices}

    def _choice(self, index: int, output: Any, body: dict) -> dict:
        completion = output.outputs[0]
        token_ids = list(completion.token_ids)
        choice = {"index": index, "text": "", "finish_reason": completion.finish_reason, "stop_reason": None}
        if body.get("return_token_ids"):
            choice["token_ids"] = token_ids
            choice["prompt_token_ids"] = output.prompt_token_ids
        if completion.logprobs is not None:
            tokens = [f"token_id:{t}" if body.get("return_tokens_as_token_ids") else str(t) for t in token_ids]
            token_logprobs = [position[t].logprob for t, position in zip(token_ids, completion.logprobs)]
            if self.null_logprob_at is not None and self.null_logprob_at < len(token_logprobs):
                token_logprobs[self.null_logprob_at] = None
            choice["logprobs"] = {
                "tokens": tokens,
                "token_logprobs": token_logprobs,
                "top_logprobs": [{token: lp} for token, lp in zip(tokens, token_logprobs)],
                "text_offset": [0] * len(tokens),
            }
        return choice


# The keyword arguments `vllm.SamplingParams` accepts, read from vLLM's source (vllm/sampling_params.py,
# the msgspec fields of `SamplingParams` that are not private, at vLLM commit 00388f6, inside the
# range the `vllm` extra pins). The stand-in below refuses any other keyword, as vLLM does.
SAMPLING_PARAMS_KEYWORDS = frozenset(
    {
        "n", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p", "top_k",
        "min_p", "seed", "stop", "stop_token_ids", "ignore_eos", "max_tokens", "min_tokens", "logprobs",
        "prompt_logprobs", "prompt_logprob_token_ids", "prompt_logprob_start", "logprob_token_ids",
        "flat_logprobs", "detokenize", "skip_special_tokens", "spaces_between_special_tokens",
        "include_stop_str_in_output", "output_kind", "stream_interval", "skip_clone", "structured_outputs",
        "logit_bias", "allowed_token_ids", "extra_args", "bad_words", "skip_reading_prefix_cache",
        "thinking_token_budget", "repetition_detection", "routed_experts_prompt_start", "trace_decode_token_ids",
    }
)
# What the stand-in samples with (everything else must keep vLLM's default, or it refuses).
_HONOURED = {
    "n": 1, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0,
    "max_tokens": 16, "logprobs": None, "seed": None, "stop_token_ids": None,
}
_IGNORABLE = {"detokenize", "skip_special_tokens", "spaces_between_special_tokens", "output_kind", "skip_clone"}


class StandInSamplingParams:
    """`vllm.SamplingParams` as far as the stand-in needs: vLLM's keywords only, vLLM's defaults."""

    def __init__(self, **kwargs):
        unknown = sorted(set(kwargs) - SAMPLING_PARAMS_KEYWORDS)
        if unknown:
            raise TypeError(f"SamplingParams.__init__() got unexpected keyword arguments {unknown}")
        unsupported = sorted(set(kwargs) - set(_HONOURED) - _IGNORABLE)
        if unsupported:
            raise NotImplementedError(f"the vLLM stand-in cannot honour {unsupported}")
        for name, default in _HONOURED.items():
            setattr(self, name, kwargs.get(name, default))
        if self.n != 1:
            raise NotImplementedError("the vLLM stand-in samples n=1 only")


class StandInLLM:
    """Stands in for an in-process `vllm.LLM` (vLLM needs a GPU) with transformers' own code, none of the
    bridge's: each request is one `model.generate` call on the real tiny model with the temperature,
    top-p, top-k, min-p, repetition penalty, max_tokens, seed and stop tokens of its `SamplingParams`,
    and each sampled token's logprob is `compute_transition_scores` of the processed scores (vLLM's
    `processed_logprobs`). Answers are shaped like vLLM's `RequestOutput`: the prompt ids echoed, and
    with `logprobs=0` one `{sampled token: Logprob}` per position; a completion ends with its stop token."""

    def __init__(self, model, pad_token_id):
        self.model = model
        self.pad_token_id = pad_token_id
        self.calls = []

    def generate(self, prompts, sampling_params, use_tqdm=True):
        self.calls.append((prompts, sampling_params))
        return [self._one(list(request["prompt_token_ids"]), params) for request, params in zip(prompts, sampling_params)]

    def _one(self, prompt_ids, params):
        import torch
        from transformers import GenerationConfig

        eos = self.model.generation_config.eos_token_id
        stops = sorted(set(params.stop_token_ids or []) | set([eos] if isinstance(eos, int) else eos or []))
        config = GenerationConfig(
            do_sample=True,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=max(params.top_k, 0),  # vLLM's "off" is 0 or -1, transformers' is 0
            min_p=params.min_p or None,
            repetition_penalty=params.repetition_penalty,
            max_new_tokens=params.max_tokens,
            eos_token_id=stops,
            pad_token_id=self.pad_token_id,
            output_scores=True,
            return_dict_in_generate=True,
        )
        prompt = torch.tensor([prompt_ids])
        with torch.no_grad(), torch.random.fork_rng(devices=[], enabled=params.seed is not None):
            if params.seed is not None:
                torch.manual_seed(params.seed)
            output = self.model.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=config)
            scores = self.model.compute_transition_scores(output.sequences, output.scores, normalize_logits=True)
        token_ids = tuple(output.sequences[0, len(prompt_ids) :].tolist())
        logprobs = None
        if params.logprobs is not None:
            logprobs = [{t: SimpleNamespace(logprob=float(lp), rank=1)} for t, lp in zip(token_ids, scores[0].tolist())]
        finish_reason = "stop" if token_ids[-1] in stops else "length"
        completion = SimpleNamespace(index=0, token_ids=token_ids, logprobs=logprobs, finish_reason=finish_reason)
        return SimpleNamespace(prompt_token_ids=prompt_ids, outputs=[completion], finished=True)


def recorded_envs():
    """Wordle and Catch subclasses that record each episode's start state (the secret, the ball's
    column) in `starts`, in reset order, so tests can count distinct starts per group."""
    from gymenvs.envs.catch import CatchEnv
    from gymenvs.envs.wordle import WordleEnv

    starts: list[tuple[str, Any]] = []

    class RecordedWordle(WordleEnv):
        def _start_episode(self, options):
            observation = super()._start_episode(options)
            starts.append(("wordle", self.state()["secret"]))
            return observation

    class RecordedCatch(CatchEnv):
        def _start_episode(self, options):
            observation = super()._start_episode(options)
            starts.append(("catch", self.state()["ball"][1]))
            return observation

    return RecordedWordle, RecordedCatch, starts


def groups_of(states, size):
    return [tuple(states[i : i + size]) for i in range(0, len(states), size)]
