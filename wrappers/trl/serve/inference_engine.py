"""The model side of the CPU inference server: batched sampling on one thread, pause/resume, weight loads.

Requests that arrive while a batch runs wait in a queue; the next batch takes every waiting prompt
that samples with the same parameters (up to `max_batch_size`), so concurrent clients share one
`generate` call, as they share a step of vLLM's continuous batching. Pausing lets the running batch
finish and holds the queue until `resume`; weights are loaded only while paused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from wrappers.trl.generation.base import Sampling
from wrappers.trl.generation.transformers import TransformersGenerator

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel


@dataclass
class _Request:
    prompts: list[list[int]]
    max_tokens: list[int]
    sampling: Sampling
    future: Future = field(default_factory=Future)


@dataclass
class EngineStats:
    """What the engine did since it started: `busy_s` is the time spent inside `generate`."""

    started_at: float = field(default_factory=time.monotonic)
    busy_s: float = 0.0  # finished batches; `as_dict` adds the running one
    running_since: float | None = None
    batches: int = 0
    prompts: int = 0
    completion_tokens: int = 0
    weight_version: int = 0

    def as_dict(self) -> dict[str, float]:
        now = time.monotonic()
        running_since = self.running_since
        busy_s = self.busy_s + (now - running_since if running_since is not None else 0.0)
        wall_s = now - self.started_at
        return {
            "wall_s": wall_s,
            "busy_s": busy_s,
            "busy_share": busy_s / wall_s if wall_s else 0.0,
            "batches": self.batches,
            "prompts": self.prompts,
            "completion_tokens": self.completion_tokens,
            "weight_version": self.weight_version,
        }


class InferenceEngine:
    """Samples from `model` in batches on a background thread.

    Args:
        model: a causal LM, used in eval mode; the engine owns it (weights are loaded into it).
        pad_token_id: pads left-padded batches.
        stop_token_ids: tokens that end a completion (default: the model's `eos_token_id`s).
        max_batch_size: the most prompts one `generate` call takes.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        *,
        pad_token_id: int,
        stop_token_ids: Sequence[int] | None = None,
        max_batch_size: int = 64,
    ):
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size={max_batch_size}: expected a positive integer")
        self.model = model.eval()
        self.pad_token_id = pad_token_id
        self.stop_token_ids = stop_token_ids
        self.max_batch_size = max_batch_size
        self.stats = EngineStats()
        self._queue: list[_Request] = []
        self._wakeup = threading.Condition()
        self._model_lock = threading.Lock()  # held while a batch runs or weights load
        self._paused = False
        self._updating = False
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="inference-engine", daemon=True)
        self._thread.start()

    # -- sampling -------------------------------------------------------------------------

    def submit(self, prompts: Sequence[Sequence[int]], max_tokens: Sequence[int], sampling: Sampling) -> Future:
        """Queue a request; the future resolves to one `Completion` per prompt."""
        request = _Request([list(p) for p in prompts], list(max_tokens), sampling)
        with self._wakeup:
            if self._closed:
                raise RuntimeError("the inference engine is closed")
            self._queue.append(request)
            self._wakeup.notify()
        return request.future

    def prompt_logprobs(self, prompt: Sequence[int], temperature: float = 1.0) -> list[float | None]:
        """Each prompt token's logprob given the tokens before it (None for the first), at `temperature`."""
        import torch

        with self._model_lock, torch.no_grad():
            ids = torch.tensor([list(prompt)], device=self.model.device)
            logits = self.model(ids).logits[0, :-1].float() / temperature
            values = logits.log_softmax(-1).gather(-1, ids[0, 1:, None]).squeeze(-1)
        return [None, *values.tolist()]

    def _serve(self) -> None:
        while True:
            with self._wakeup:
                self._wakeup.wait_for(lambda: self._closed or (self._queue and not self._paused))
                if self._closed:
                    return
                batch = self._take_batch()
            with self._model_lock:
                self._run(batch)

    def _take_batch(self) -> list[_Request]:
        """The oldest request and the queued ones that sample like it, up to `max_batch_size` prompts."""
        first = self._queue[0]
        batch: list[_Request] = []
        size = 0
        for request in list(self._queue):
            if request.sampling != first.sampling or (batch and size + len(request.prompts) > self.max_batch_size):
                continue
            batch.append(request)
            size += len(request.prompts)
            self._queue.remove(request)
        return batch

    def _run(self, batch: list[_Request]) -> None:
        generator = TransformersGenerator(
            self.model,
            pad_token_id=self.pad_token_id,
            stop_token_ids=self.stop_token_ids,
            sampling=batch[0].sampling,
        )
        prompts = [prompt for request in batch for prompt in request.prompts]
        budgets = [budget for request in batch for budget in request.max_tokens]
        started = self.stats.running_since = time.monotonic()
        try:
            completions = generator.generate(prompts, budgets)
        except Exception as error:  # a bad request fails its batch, never the engine
            for request in batch:
                request.future.set_exception(error)
            return
        finally:
            self.stats.busy_s += time.monotonic() - started
            self.stats.running_since = None
        self.stats.batches += 1
        self.stats.prompts += len(prompts)
        self.stats.completion_tokens += sum(len(c.token_ids) for c in completions)
        for request in batch:
            request.future.set_result(completions[: len(request.prompts)])
            completions = completions[len(request.prompts) :]

    # -- pause, resume, weights -----------------------------------------------------------

    def pause(self) -> None:
        """Let the running batch finish, then hold the queued requests until `resume`."""
        with self._wakeup:
            self._paused = True
        with self._model_lock:  # waits for the running batch
            pass

    def resume(self) -> None:
        with self._wakeup:
            self._paused = False
            self._wakeup.notify()

    @property
    def paused(self) -> bool:
        return self._paused

    def start_weight_update(self) -> None:
        if not self._paused:
            raise RuntimeError("pause the server before updating its weights")
        self._updating = True

    def load_weights(self, tensors: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]) -> int:
        """Copy named tensors into the model's parameters (names as `named_parameters` gives them)."""
        import torch

        if not self._updating:
            raise RuntimeError("call start_weight_update before sending weights")
        parameters = dict(self.model.named_parameters())
        items = tensors.items() if isinstance(tensors, Mapping) else tensors
        count = 0
        with self._model_lock, torch.no_grad():
            for name, tensor in items:
                if name not in parameters:
                    raise KeyError(f"the served model has no parameter {name!r}")
                if parameters[name].shape != tensor.shape:
                    raise ValueError(f"{name}: shape {tuple(tensor.shape)} != {tuple(parameters[name].shape)}")
                parameters[name].copy_(tensor)
                count += 1
        return count

    def finish_weight_update(self) -> None:
        if not self._updating:
            raise RuntimeError("no weight update is in progress")
        self._updating = False
        self.stats.weight_version += 1

    def close(self) -> None:
        with self._wakeup:
            self._closed = True
            pending, self._queue = self._queue, []
            self._wakeup.notify_all()
        for request in pending:
            request.future.set_exception(RuntimeError("the inference engine closed"))
        self._thread.join(timeout=30)

