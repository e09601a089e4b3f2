"""`AsyncGRPOTrainer` on a machine without a GPU: the two GPU-only pieces of TRL 1.16's trainer, replaced.

TRL's `AsyncGRPOTrainer` trains on packed prefix trees of samples, with a FlashAttention-3 kernel
fetched from the Hub (`attn_implementation="tree_fa3"`), and probes the CUDA device's peak FLOPs for
its MFU metric. Neither exists on a CPU. `CPUAsyncGRPOTrainer` is the same trainer (same loss,
batching, packing, weight-sync schedule and staleness rule) with:

- the tree attention computed by `torch.nn.functional.scaled_dot_product_attention` under an explicit
  mask (each packed token sees the tokens on its own root-to-token path), registered with
  transformers' `AttentionInterface` under its own name, so TRL's kernel is left alone;
- the MFU probe answering "unknown" off CUDA (TRL then skips the MFU metric, as for an unknown GPU).

Everything else is TRL's code, unchanged. Generation and weight sync go through the documented
seams: a `rollout_worker` (`wrappers.trl.async_grpo.worker`) and a `weight_transfer`
(`wrappers.trl.serve.weight_transfer`) that talk to a CPU inference server (`wrappers.trl.serve.inference_server`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from trl.experimental.async_grpo import AsyncGRPOTrainer
from trl.experimental.async_grpo import async_grpo_trainer as _trainer_module

if TYPE_CHECKING:
    import torch

CPU_TREE_ATTENTION = "tree_sdpa"


def tree_attention_sdpa(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    *,
    tree_kv_index: torch.Tensor,
    tree_cu_seqlens_q: torch.Tensor,
    tree_cu_seqlens_k: torch.Tensor,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """TRL's packed-tree attention (`trl.experimental.async_grpo.packing.tree_attention`) in plain torch.

    Segment s of the packed row holds queries `cu_q[s]:cu_q[s+1]`; the keys it may see are the packed
    positions `kv_index[cu_k[s]:cu_k[s+1]]`, its root-to-segment path, which ends with the segment itself.
    Causality is aligned at the bottom right, as in FlashAttention's varlen kernel.
    """
    import torch

    if sliding_window or softcap:
        raise NotImplementedError("the CPU tree attention supports neither sliding windows nor logit soft-capping")
    mask = _tree_mask(query.shape[2], tree_kv_index, tree_cu_seqlens_q, tree_cu_seqlens_k, query.device)
    output = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=scaling, enable_gqa=query.shape[1] != key.shape[1]
    )
    return output.transpose(1, 2).contiguous(), None


def _tree_mask(
    length: int, kv_index: torch.Tensor, cu_q: torch.Tensor, cu_k: torch.Tensor, device: torch.device
) -> torch.Tensor:
    """(length, length) booleans: may packed position q attend to packed position k."""
    import torch

    mask = torch.zeros(length, length, dtype=torch.bool, device=device)
    for s in range(len(cu_q) - 1):
        q_start, q_end, k_start, k_end = (int(v) for v in (cu_q[s], cu_q[s + 1], cu_k[s], cu_k[s + 1]))
        path = kv_index[k_start:k_end]
        queries, keys = q_end - q_start, k_end - k_start
        visible = torch.arange(keys, device=device)[None, :] <= torch.arange(queries, device=device)[:, None] + (
            keys - queries
        )
        mask[torch.arange(q_start, q_end, device=device)[:, None], path[None, :]] = visible
    return mask


def register_cpu_tree_attention() -> None:
    """Make `attn_implementation="tree_sdpa"` available to transformers models."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(CPU_TREE_ATTENTION, tree_attention_sdpa)
    AttentionMaskInterface.register(CPU_TREE_ATTENTION, lambda **kwargs: None)  # the tree kwargs are the mask


@contextlib.contextmanager
def _peak_flops_unknown_off_cuda() -> Iterator[None]:
    probe = _trainer_module.get_peak_flops_per_device

    def peak_flops(accelerator: Any, dtype: str) -> float | None:
        return probe(accelerator, dtype) if accelerator.device.type == "cuda" else None

    _trainer_module.get_peak_flops_per_device = peak_flops
    try:
        yield
    finally:
        _trainer_module.get_peak_flops_per_device = probe


class CPUAsyncGRPOTrainer(AsyncGRPOTrainer):
    """`trl.experimental.async_grpo.AsyncGRPOTrainer` that trains on CPU; see the module docstring.

    Takes AsyncGRPOTrainer's arguments. `model` is a directory written by `save_pretrained` (TRL loads
    the model itself). With a `rollout_worker` that owns its episodes, `train_dataset` may be left out
    (then `args.max_steps` must be set): the worker, not the dataset, decides what is played.
    """

    def __init__(self, model: str, *args: Any, train_dataset: Any = None, **kwargs: Any):
        if train_dataset is None and kwargs.get("rollout_worker") is not None:
            training_args = kwargs.get("args")
            if training_args is None or training_args.max_steps <= 0:
                raise ValueError("without a train_dataset, set AsyncGRPOConfig(max_steps=...) to a positive number")
            from datasets import Dataset

            train_dataset = Dataset.from_dict({"prompt": [""]})  # never read: the worker makes the episodes
        register_cpu_tree_attention()
        with _peak_flops_unknown_off_cuda():
            super().__init__(model, *args, **{**kwargs, "train_dataset": train_dataset})
        self.accelerator.unwrap_model(self.model).set_attn_implementation(CPU_TREE_ATTENTION)
