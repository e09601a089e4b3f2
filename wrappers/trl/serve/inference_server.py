"""A CPU inference server with the HTTP surface of `vllm serve` that TRL's async GRPO uses.

vLLM needs a GPU. This server serves a transformers model on CPU (the tiny offline model, say) on the
endpoints `AsyncGRPOTrainer`, its weight sync and our rollout worker call:

- `GET /health`, `GET /v1/models` (with `max_model_len`), `GET /server_info?config_format=json`,
  `GET /get_world_size`;
- `POST /v1/completions` with token-id (or text) prompts, `return_token_ids`, `logprobs=0` (the
  sampled token's logprob after temperature, top-k, top-p and min-p, as vLLM's
  `processed_logprobs` mode), `return_tokens_as_token_ids` and vLLM's `prompt_logprobs`;
- `POST /pause?mode=keep` (the running batch finishes, queued requests wait) and `POST /resume`;
- `POST /start_weight_update`, `POST /update_weights`, `POST /finish_weight_update`. vLLM moves the
  tensors over NCCL and `/update_weights` only describes them; here they travel in the request body
  as a safetensors file (see `wrappers.trl.serve.weight_transfer`), so no GPU and no process group is needed;
- `GET /stats`: generation busy time, batches, tokens and weight version, for benchmarks.

Not supported (answered with 400): `n > 1`, `logprobs > 0`, `echo`. A request's `seed` is ignored:
requests are batched together, so one cannot be seeded alone.

    python -m wrappers.trl.serve.inference_server MODEL_DIR [--host 127.0.0.1] [--port 8000]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ConfigDict, PositiveInt, model_validator

from wrappers.trl.generation.base import Completion, Sampling
from wrappers.trl.serve.client import ServerClient
from wrappers.trl.serve.inference_engine import InferenceEngine

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

TokenPrompt = list[int]
KEEP_ALIVE_S = 120


class CompletionRequest(Sampling):
    """The fields of vLLM's `/v1/completions` request this server reads (others are ignored): `Sampling`'s,
    checked the same way, and these. vLLM's `top_k=-1` (off) is taken as 0 and `min_p=0` as None."""

    model_config = ConfigDict(extra="ignore", strict=False, frozen=False)

    model: str
    prompt: TokenPrompt | list[TokenPrompt] | str | list[str]
    max_tokens: PositiveInt = 16
    n: int = 1
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    echo: bool = False
    return_token_ids: bool = False
    return_tokens_as_token_ids: bool = False
    seed: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _vllm_offs(cls, body: Any) -> Any:
        """vLLM's ways of saying "off" that `Sampling` spells 0 and None."""
        if isinstance(body, dict):
            body = dict(body)
            if body.get("top_k") == -1:
                body["top_k"] = 0
            if body.get("min_p") == 0:
                body["min_p"] = None
        return body

    def sampling(self) -> Sampling:
        """The request's sampling parameters alone."""
        return Sampling(**{name: getattr(self, name) for name in Sampling.model_fields})


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def create_app(engine: InferenceEngine, tokenizer: PreTrainedTokenizerBase, model_name: str, max_model_len: int) -> FastAPI:
    """The FastAPI app serving `engine` under `model_name`."""
    app = FastAPI(title="gymenvs CPU inference server")
    app.add_exception_handler(RequestValidationError, _invalid_request)  # type: ignore[arg-type]
    app.add_exception_handler(BadRequest, _bad_request)  # type: ignore[arg-type]
    routes = _Routes(engine, tokenizer, model_name, max_model_len)
    for method, path, endpoint in routes.table():
        app.add_api_route(path, endpoint, methods=[method])
    return app


def _error(status: int, message: str) -> JSONResponse:
    kind = {404: "NotFoundError", 409: "ConflictError"}.get(status, "BadRequestError")
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    return _error(400, str(exc.errors()))


async def _bad_request(request: Request, exc: BadRequest) -> JSONResponse:
    return _error(exc.status, str(exc))


class _Routes:
    """The server's endpoints, one method each, over one engine and its model's name and limits."""

    def __init__(self, engine: InferenceEngine, tokenizer: PreTrainedTokenizerBase, model_name: str, max_model_len: int):
        self.engine = engine
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.max_model_len = max_model_len

    def table(self) -> list[tuple[str, str, Callable[..., Any]]]:
        """(method, path, endpoint) for every route."""
        return [
            ("GET", "/health", self.health),
            ("GET", "/v1/models", self.models),
            ("GET", "/server_info", self.server_info),
            ("GET", "/get_world_size", self.world_size),
            ("GET", "/stats", self.stats),
            ("POST", "/pause", self.pause),
            ("POST", "/resume", self.resume),
            ("GET", "/is_paused", self.is_paused),
            ("POST", "/start_weight_update", self.start_weight_update),
            ("POST", "/update_weights", self.update_weights),
            ("POST", "/finish_weight_update", self.finish_weight_update),
            ("POST", "/v1/completions", self.completions),
        ]

    # -- model and server information --

    async def health(self) -> Response:
        return Response(status_code=200)

    async def models(self) -> dict:
        card = {"id": self.model_name, "object": "model", "owned_by": "gymenvs", "max_model_len": self.max_model_len}
        return {"object": "list", "data": [card]}

    async def server_info(self, config_format: str = "json") -> dict:
        dtype = str(next(self.engine.model.parameters()).dtype)
        model_config = {"model": self.model_name, "dtype": dtype, "max_model_len": self.max_model_len}
        parallel_config = {"data_parallel_size": 1, "tensor_parallel_size": 1, "pipeline_parallel_size": 1}
        return {"vllm_config": {"model_config": model_config, "parallel_config": parallel_config, "lora_config": None}}

    async def world_size(self) -> dict:
        return {"world_size": 1}

    async def stats(self) -> dict:
        return {**self.engine.stats.as_dict(), "paused": self.engine.paused}

    # -- pausing generation --

    async def pause(self, mode: Literal["keep", "wait"] = "keep") -> dict:
        await run_in_threadpool(self.engine.pause)
        return {"status": "paused"}

    async def resume(self) -> dict:
        self.engine.resume()
        return {"status": "resumed"}

    async def is_paused(self) -> dict:
        return {"is_paused": self.engine.paused}

    # -- weight sync --

    async def start_weight_update(self) -> dict:
        _conflict_on_runtime_error(self.engine.start_weight_update)
        return {"status": "ok"}

    async def update_weights(self, request: Request) -> dict:
        tensors = _safetensors(await request.body())
        try:
            count = await run_in_threadpool(self.engine.load_weights, tensors)
        except RuntimeError as exc:
            raise BadRequest(str(exc), 409) from exc
        except (KeyError, ValueError) as exc:
            raise BadRequest(str(exc)) from exc
        return {"status": "ok", "tensors": count}

    async def finish_weight_update(self) -> dict:
        _conflict_on_runtime_error(self.engine.finish_weight_update)
        return {"status": "ok", "weight_version": self.engine.stats.weight_version}

    # -- generation --

    async def completions(self, body: CompletionRequest) -> dict:
        if body.model != self.model_name:
            raise BadRequest(f"The model `{body.model}` does not exist.", 404)
        prompts = _token_prompts(body.prompt, self.tokenizer)
        sampling = _check_request(body, prompts, self.max_model_len)
        future = self.engine.submit(prompts, [body.max_tokens] * len(prompts), sampling)
        results = await asyncio.wrap_future(future)
        choices = [
            await self._choice_with_prompt_logprobs(index, prompt, completion, body)
            for index, (prompt, completion) in enumerate(zip(prompts, results))
        ]
        return {
            "id": f"cmpl-{time.monotonic_ns()}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": choices,
            "usage": _usage(prompts, results),
        }

    async def _choice_with_prompt_logprobs(
        self, index: int, prompt: list[int], completion: Completion, body: CompletionRequest
    ) -> dict[str, Any]:
        choice = _choice(index, prompt, completion, body, self.tokenizer)
        if body.prompt_logprobs is not None:
            logprobs = await run_in_threadpool(self.engine.prompt_logprobs, prompt, body.temperature)
            choice["prompt_logprobs"] = [
                None if value is None else {str(token): _logprob_entry(value, token, self.tokenizer)}
                for token, value in zip(prompt, logprobs)
            ]
        return choice


def _safetensors(body: bytes) -> dict[str, Any]:
    from safetensors.torch import load

    try:
        return load(body)
    except Exception as exc:
        raise BadRequest(f"the body is not a safetensors file: {exc}") from exc


def _usage(prompts: list[list[int]], results: list[Completion]) -> dict[str, int]:
    prompt_tokens = sum(len(p) for p in prompts)
    completion_tokens = sum(len(c.token_ids) for c in results)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _conflict_on_runtime_error(action: Any) -> None:
    try:
        action()
    except RuntimeError as exc:
        raise BadRequest(str(exc), 409) from exc


def _token_prompts(prompt: Any, tokenizer: PreTrainedTokenizerBase) -> list[list[int]]:
    if isinstance(prompt, str):
        prompt = [prompt]
    elif prompt and isinstance(prompt[0], int):
        prompt = [prompt]
    prompts = [tokenizer(p, add_special_tokens=False)["input_ids"] if isinstance(p, str) else list(p) for p in prompt]
    if not prompts or any(len(p) == 0 for p in prompts):
        raise BadRequest("every prompt needs at least one token")
    return prompts


def _check_request(body: CompletionRequest, prompts: list[list[int]], max_model_len: int) -> Sampling:
    if body.n != 1:
        raise BadRequest(f"n={body.n}: this server samples one completion per prompt (n=1)")
    if body.echo:
        raise BadRequest("echo is not supported; use prompt_logprobs")
    if body.logprobs not in (None, 0):
        raise BadRequest(f"logprobs={body.logprobs}: only the sampled token's logprob (logprobs=0) is supported")
    for prompt in prompts:
        if len(prompt) + body.max_tokens > max_model_len:
            raise BadRequest(
                f"This model's maximum context length is {max_model_len} tokens; the prompt has {len(prompt)} "
                f"tokens and max_tokens={body.max_tokens}"
            )
    return body.sampling()


def _logprob_entry(value: float, token: int, tokenizer: PreTrainedTokenizerBase) -> dict[str, Any]:
    return {"logprob": value, "decoded_token": tokenizer.decode([token])}


def _choice(
    index: int, prompt: list[int], completion: Completion, body: CompletionRequest, tokenizer: PreTrainedTokenizerBase
) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": index,
        "text": tokenizer.decode(completion.token_ids, skip_special_tokens=True),
        "finish_reason": completion.finish_reason,
        "stop_reason": None,
    }
    if body.return_token_ids:
        choice["token_ids"] = completion.token_ids
        choice["prompt_token_ids"] = prompt
    if body.logprobs is not None:
        tokens = [
            f"token_id:{token}" if body.return_tokens_as_token_ids else tokenizer.decode([token])
            for token in completion.token_ids
        ]
        choice["logprobs"] = {
            "tokens": tokens,
            "token_logprobs": completion.logprobs,
            "top_logprobs": [{token: value} for token, value in zip(tokens, completion.logprobs)],
            "text_offset": [0] * len(tokens),
        }
    return choice


class InferenceServer:
    """Serves a model on CPU over HTTP from a background thread of this process.

    Args:
        model: a causal LM, or a directory written by `save_pretrained` (loaded in fp32). The server
            keeps its own copy: pass `copy.deepcopy(model)` to share nothing with a trainer.
        tokenizer: its tokenizer (default: loaded from the model directory).
        model_name: the name clients request (default: the directory, or "model").
        host, port: where to listen (port 0: any free port; see `base_url`).
        max_batch_size: the most prompts one `generate` call takes.
        max_model_len: prompt + completion limit (default: the model's `max_position_embeddings`).
    """

    def __init__(
        self,
        model: PreTrainedModel | str | Path,
        tokenizer: PreTrainedTokenizerBase | None = None,
        *,
        model_name: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        max_batch_size: int = 64,
        max_model_len: int | None = None,
    ):
        import uvicorn

        if isinstance(model, str | Path):
            model_name = model_name or str(model)
            model, tokenizer = _load(Path(model), tokenizer)
        if tokenizer is None:
            raise ValueError("pass the model's tokenizer (it is loaded only when the model is a directory)")
        self.model_name = model_name or "model"
        self.max_model_len = max_model_len or model.config.max_position_embeddings
        self.engine = InferenceEngine(model, pad_token_id=tokenizer.pad_token_id, max_batch_size=max_batch_size)
        app = create_app(self.engine, tokenizer, self.model_name, self.max_model_len)
        self._socket = _bind(host, port)
        self.base_url = f"http://{host}:{self._socket.getsockname()[1]}"
        # Workers keep their connections; uvicorn's 5 s default closes idle ones under their feet.
        self.fastapi_app = app
        config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_keep_alive=KEEP_ALIVE_S)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def app(self) -> FastAPI:
        return self.fastapi_app

    def start(self, timeout_s: float = 30.0) -> InferenceServer:
        """Serve from a daemon thread; returns once the server accepts connections."""
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="inference-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the inference server at {self.base_url} did not start")
            time.sleep(0.01)
        return self

    def serve_forever(self) -> None:
        """Serve from this thread until interrupted (SIGINT / SIGTERM)."""
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self.engine.close()

    def close(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self._socket.close()
        self.engine.close()

    def __enter__(self) -> InferenceServer:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _load(path: Path, tokenizer: PreTrainedTokenizerBase | None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return model, tokenizer or AutoTokenizer.from_pretrained(path)


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


class ServerProcess:
    """The inference server in a child process (as `vllm serve` runs beside a trainer).

    Its own process keeps generation off the trainer's interpreter lock. `close()` terminates it.
    """

    def __init__(self, model_dir: str | Path, *, max_batch_size: int = 64, timeout_s: float = 120.0):
        command = [sys.executable, "-m", "wrappers.trl.serve.inference_server", str(model_dir), "--port", "0"]
        command += ["--max-batch-size", str(max_batch_size)]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self.model_name = str(model_dir)
        assert self.process.stdout is not None  # stdout=PIPE
        line = self.process.stdout.readline().strip()  # the child prints its URL once it listens
        if not line.startswith("http://"):
            self.close()
            raise RuntimeError(f"the inference server process did not start (it printed {line!r})")
        self.base_url = line
        with ServerClient(self.base_url) as client:
            client.wait_healthy(timeout_s)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", help="a directory written by save_pretrained (model and tokenizer)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0: any free port (the URL is printed)")
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--max-batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    server = InferenceServer(
        args.model_dir,
        model_name=args.served_model_name,
        host=args.host,
        port=args.port,
        max_batch_size=args.max_batch_size,
    )
    print(server.base_url, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
