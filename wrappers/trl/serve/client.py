"""`ServerClient`: the one HTTP client of a vLLM-shaped inference server.

It is the single place that knows the server's HTTP API: readiness (`/health`), the served models
(`/v1/models`), completions (`/v1/completions`), pause and resume, and the weight-update endpoints
of this package's CPU server. `VLLMServerGenerator` and `HTTPWeightTransfer` use it; each holds one
`httpx.Client`, so connections are kept alive between requests.

`TRANSPORT_RETRY` is the one retry policy: a request whose connection broke (a kept-alive connection
the server had just closed, a reset) is sent again, at most `TRANSPORT_ATTEMPTS` times in all. A
timeout is not retried: the server is slow, not gone, and a second wait would only double it.
"""

from __future__ import annotations

import weakref
from typing import Any

import httpx
import tenacity

#: Attempts of one request whose connection broke, the first included.
TRANSPORT_ATTEMPTS = 3
#: Errors of a connection, not of the server's answer: safe to send the same request again.
TRANSPORT_ERRORS = (httpx.NetworkError, httpx.RemoteProtocolError)

TRANSPORT_RETRY = tenacity.Retrying(
    retry=tenacity.retry_if_exception_type(TRANSPORT_ERRORS),
    stop=tenacity.stop_after_attempt(TRANSPORT_ATTEMPTS),
    wait=tenacity.wait_incrementing(start=0.0, increment=0.5),
    reraise=True,
)


class ServerError(RuntimeError):
    """The server answered with a status other than 200."""


class ServerClient:
    """HTTP calls to one vLLM-shaped server at `base_url` (such as `http://127.0.0.1:8000`).

    Args:
        base_url: the server's root.
        timeout_s: seconds allowed for each request.
        transport: an `httpx` transport to send requests through (default: the network).
    """

    def __init__(self, base_url: str, *, timeout_s: float = 600.0, transport: httpx.BaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(base_url=self.base_url, timeout=timeout_s, transport=transport)
        self._finalizer = weakref.finalize(self, self._client.close)

    # -- readiness and introspection -------------------------------------------------------

    def wait_healthy(self, timeout_s: float, *, poll_s: float = 0.1) -> None:
        """Return once `/health` answers 200; a `TimeoutError` after `timeout_s` seconds without."""
        waiting = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(httpx.TransportError) | tenacity.retry_if_result(lambda ok: not ok),
            stop=tenacity.stop_after_delay(timeout_s),
            wait=tenacity.wait_fixed(poll_s),
        )
        try:
            waiting(lambda: self._client.get("/health", timeout=min(5.0, timeout_s)).status_code == 200)
        except tenacity.RetryError:
            raise TimeoutError(f"the inference server at {self.base_url} did not answer /health in {timeout_s}s") from None

    def first_model(self) -> str:
        """The first model `/v1/models` lists."""
        models = self.request("GET", "/v1/models").json().get("data") or []
        if not models:
            raise RuntimeError(f"the server at {self.base_url} lists no model under /v1/models")
        return models[0]["id"]

    def server_info(self) -> dict[str, Any]:
        return self.request("GET", "/server_info", params={"config_format": "json"}).json()

    # -- generation -------------------------------------------------------------------------

    def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` to `/v1/completions` and return the answer's JSON."""
        return self.request("POST", "/v1/completions", json=body).json()

    # -- weights -----------------------------------------------------------------------------

    def pause(self) -> None:
        """Stop serving new requests, keeping those in flight (`mode=keep`)."""
        self.request("POST", "/pause", params={"mode": "keep"})

    def resume(self) -> None:
        self.request("POST", "/resume")

    def start_weight_update(self) -> None:
        self.request("POST", "/start_weight_update")

    def update_weights(self, safetensors: bytes) -> None:
        """Load one chunk of weights (a safetensors file's bytes)."""
        self.request("POST", "/update_weights", content=safetensors)

    def finish_weight_update(self) -> None:
        self.request("POST", "/finish_weight_update")

    # -- plumbing ----------------------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, sent again if its connection broke; a `ServerError` unless the answer is 200."""
        response = TRANSPORT_RETRY(self._client.request, method, path, **kwargs)
        if response.status_code != 200:
            raise ServerError(f"{method} {self.base_url}{path} answered {response.status_code}: {response.text[:500]}")
        return response

    def close(self) -> None:
        """Close the connections (also done when the client is collected)."""
        self._finalizer()

    @property
    def is_closed(self) -> bool:
        return self._client.is_closed

    def __enter__(self) -> ServerClient:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
