"""Everything the bridge reads from `trl.GRPOTrainer` beyond its documented API, in one place.

TRL gives `rollout_func(prompts, trainer)` the prompts but not the dataset rows (their `seed`,
`options` and `environment` columns), and gives `environment_factory` instances no group id.
These helpers recover both from the trainer that is generating, and reach the trainer's private
generation helpers. `tests/trl/test_trl_internals.py` checks each against the installed TRL,
so a TRL release that moves one fails there, loudly, instead of silently changing training data.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

#: The GRPOTrainer method whose local `inputs` holds the batch's dataset rows while it generates.
GENERATING_METHOD = "_generate_and_score_completions"
ROWS_VARIABLE = "inputs"


def generating_trainer() -> Any | None:
    """The `trl.GRPOTrainer` whose generation step is on the call stack, or None."""
    frame = _generating_frame()
    return None if frame is None else frame.f_locals["self"]


def batch_rows(trainer: Any) -> list[dict[str, Any]] | None:
    """The dataset rows `trainer` is generating for (one per rollout, group members consecutive),
    or None when no generation step of that trainer is on the call stack."""
    frame = _generating_frame()
    if frame is None or frame.f_locals["self"] is not trainer:
        return None
    rows = frame.f_locals.get(ROWS_VARIABLE)
    return list(rows) if isinstance(rows, list) else None


def group_size(trainer: Any) -> int:
    """Rollouts per prompt in the trainer's current mode (TRL repeats each prompt this many times)."""
    training = trainer.model.training
    return int(trainer.num_generations if training else trainer.num_generations_eval)


def colocated_llm(trainer: Any) -> Any:
    """The in-process `vllm.LLM` of a trainer in vLLM colocate mode."""
    return trainer.vllm_generation.llm


def server_client(trainer: Any) -> Any:
    """The `trl` `VLLMClient` a trainer in vLLM server mode talks to (and syncs weights through)."""
    return trainer.vllm_generation.vllm_client


def log_metric(trainer: Any, name: str, value: float) -> None:
    """Log `value` under `name` in the trainer's logs, as a reward function's `log_metric` kwarg does (TRL averages
    the values logged in one logging step); nothing when `trainer` has no such hook (not a GRPOTrainer)."""
    log = getattr(trainer, "_log_metric", None)
    if callable(log):
        log(name, value)


@contextlib.contextmanager
def full_parameters(trainer: Any) -> Iterator[None]:
    """Gather sharded parameters for generation, as GRPOTrainer's own generation does."""
    with trainer._dist.summon_full_params(trainer.model_wrapped, recurse=False):
        yield


def _generating_frame() -> Any | None:
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == GENERATING_METHOD and _is_grpo_trainer(frame.f_locals.get("self")):
            return frame
        frame = frame.f_back
    return None


def _is_grpo_trainer(value: Any) -> bool:
    trl = sys.modules.get("trl")
    if trl is None or value is None:
        return False
    from trl import GRPOTrainer

    return isinstance(value, GRPOTrainer)
