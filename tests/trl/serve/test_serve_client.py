"""`ServerClient`, the one HTTP client of a vLLM-shaped server: which failures it retries, and how it waits."""

from __future__ import annotations

import httpx
import pytest

from wrappers.trl.serve.client import TRANSPORT_ATTEMPTS, ServerClient, ServerError


def client_failing(times: int, error: type[Exception], calls: list[str]) -> ServerClient:
    """A client whose first `times` requests fail with `error`; later ones get a 200."""

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if len(calls) <= times:
            raise error("broken", request=request)
        return httpx.Response(200, json={"data": [{"id": "tiny"}]})

    return ServerClient("http://server", transport=httpx.MockTransport(handle))


def test_a_request_whose_connection_broke_is_sent_again() -> None:
    calls: list[str] = []
    with client_failing(TRANSPORT_ATTEMPTS - 1, httpx.RemoteProtocolError, calls) as client:
        assert client.first_model() == "tiny"
    assert calls == ["/v1/models"] * TRANSPORT_ATTEMPTS


def test_a_connection_that_keeps_breaking_raises_after_the_last_attempt() -> None:
    calls: list[str] = []
    with client_failing(TRANSPORT_ATTEMPTS, httpx.ReadError, calls) as client, pytest.raises(httpx.ReadError):
        client.pause()
    assert len(calls) == TRANSPORT_ATTEMPTS


def test_a_timeout_is_not_retried() -> None:
    calls: list[str] = []
    with client_failing(1, httpx.ReadTimeout, calls) as client, pytest.raises(httpx.ReadTimeout):
        client.completions({"prompt": [[1]]})
    assert calls == ["/v1/completions"]


def test_an_error_status_names_the_endpoint_and_the_answer() -> None:
    client = ServerClient("http://server", transport=httpx.MockTransport(lambda request: httpx.Response(409, text="paused")))
    with pytest.raises(ServerError, match=r"POST http://server/update_weights answered 409: paused"):
        client.update_weights(b"")


def test_waiting_for_health_polls_until_200_and_times_out_otherwise() -> None:
    answers = iter([503, 503, 200])
    ready = ServerClient("http://server", transport=httpx.MockTransport(lambda request: httpx.Response(next(answers))))
    ready.wait_healthy(timeout_s=30, poll_s=0)
    never = ServerClient("http://server", transport=httpx.MockTransport(lambda request: httpx.Response(503)))
    with pytest.raises(TimeoutError, match="did not answer /health in 0.2s"):
        never.wait_healthy(timeout_s=0.2, poll_s=0.01)
