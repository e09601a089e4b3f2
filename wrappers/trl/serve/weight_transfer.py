"""`HTTPWeightTransfer`: TRL's `WeightTransferProtocol` over plain HTTP, for the CPU inference server.

TRL's own `WeightTransferClient` broadcasts the trainer's tensors to vLLM's GPU workers over NCCL,
which needs CUDA on both sides. This one sends them in the body of `POST /update_weights`, as
safetensors files of at most `chunk_bytes` each, between `/start_weight_update` and
`/finish_weight_update`, to `wrappers.trl.serve.inference_server` (which loads only while paused). The
call sequence is TRL's: `init_weight_transfer` once, then per sync `pause`, `send_weights`, `resume`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from wrappers.trl.serve.client import ServerClient

if TYPE_CHECKING:
    import torch


class HTTPWeightTransfer:
    """Moves the trainer's weights into an inference server that speaks `wrappers.trl.serve.inference_server`'s API,
    through `ServerClient` (which sends a request again when its connection broke).

    Args:
        base_url: the server's root, such as `http://127.0.0.1:8000`.
        chunk_bytes: the largest request body; bigger models go in several requests.
        timeout_s: seconds allowed for each request.
    """

    def __init__(self, base_url: str, *, chunk_bytes: int = 256 * 2**20, timeout_s: float = 300.0):
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes={chunk_bytes}: expected a positive number of bytes")
        self.base_url = base_url.rstrip("/")
        self.chunk_bytes = chunk_bytes
        self._client = ServerClient(self.base_url, timeout_s=timeout_s)
        self.syncs = 0

    def init_weight_transfer(self) -> None:
        """Check that the server answers and holds fp32 weights (the trainer's precision on CPU)."""
        dtype = self._client.server_info()["vllm_config"]["model_config"]["dtype"]
        if dtype != "torch.float32":
            raise RuntimeError(f"the server at {self.base_url} serves {dtype}; CPU training syncs torch.float32")

    def pause(self) -> None:
        self._client.pause()

    def send_weights(self, iterator: Iterator[tuple[str, torch.Tensor]]) -> None:
        self._client.start_weight_update()
        for chunk in _chunks(iterator, self.chunk_bytes):
            self._client.update_weights(_safetensors(chunk))
        self._client.finish_weight_update()
        self.syncs += 1

    def resume(self) -> None:
        self._client.resume()

    def destroy(self) -> None:
        self._client.close()


def _chunks(iterator: Iterator[tuple[str, torch.Tensor]], chunk_bytes: int) -> Iterator[dict[str, torch.Tensor]]:
    chunk: dict[str, torch.Tensor] = {}
    size = 0
    for name, tensor in iterator:
        nbytes = tensor.numel() * tensor.element_size()
        if chunk and size + nbytes > chunk_bytes:
            yield chunk
            chunk, size = {}, 0
        chunk[name] = tensor.detach().to("cpu").contiguous()
        size += nbytes
    if chunk:
        yield chunk


def _safetensors(tensors: dict[str, torch.Tensor]) -> bytes:
    from safetensors.torch import save

    return save(tensors)
