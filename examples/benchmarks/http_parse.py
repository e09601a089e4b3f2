"""The cost of reading one agent request's HTTP alone: a POST with seven headers and a JSON body, read into
its method, target, headers by lowercase name and body by three parsers, in this process, no I/O:

- h11 (pure Python), one `h11.Connection` per request, as the channel read it before httptools;
- httptools (llhttp, compiled), one parser per connection fed the bytes, its callbacks collecting the parts
  as `gymenvs.container.agent.connection` does;
- the stdlib server's reading: the request line, `http.client.parse_headers` and a read of Content-Length
  bytes, from a buffered file, as `http.server.BaseHTTPRequestHandler` reads a request.

    python examples/benchmarks/http_parse.py [--number 20000] [--repeat 7]

Prints the best and median of `--repeat` timings, in µs per request; nothing is asserted.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import statistics
import timeit

import h11
import httptools

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi " * 200}], "stream": False}).encode()
REQUEST = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nUser-Agent: OpenAI/Python 2.8.1\r\n"
           b"Accept: application/json\r\nContent-Type: application/json\r\nAuthorization: Bearer 0123456789abcdef\r\n"
           b"Connection: keep-alive\r\nContent-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)


def with_h11() -> tuple:
    connection = h11.Connection(h11.SERVER)
    connection.receive_data(REQUEST)
    request = connection.next_event()
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in request.headers.raw_items()}
    body = bytearray()
    while not isinstance(event := connection.next_event(), h11.EndOfMessage):
        body += event.data
    return request.method, request.target, headers, bytes(body)


class Collector:
    """httptools' callbacks, collecting a request's parts."""

    def __init__(self):
        self.parser = httptools.HttpRequestParser(self)
        self.target, self.headers, self.body, self.whole = bytearray(), {}, bytearray(), False

    def on_url(self, url: bytes) -> None:
        self.target += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, data: bytes) -> None:
        self.body += data

    def on_message_complete(self) -> None:
        self.whole = True


def with_httptools() -> tuple:
    collector = Collector()
    collector.parser.feed_data(REQUEST)
    return collector.parser.get_method(), bytes(collector.target), collector.headers, bytes(collector.body)


def with_stdlib() -> tuple:
    rfile = io.BufferedReader(io.BytesIO(REQUEST))  # as socket.makefile("rb") gives http.server
    method, target, _ = rfile.readline(65537).decode("iso-8859-1").split()
    message = http.client.parse_headers(rfile)
    headers = {name.lower(): value for name, value in message.items()}
    return method, target, headers, rfile.read(int(headers["content-length"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"a {len(REQUEST)}-byte POST, 7 headers | load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for name, read in [("h11", with_h11), ("httptools", with_httptools), ("http.client.parse_headers", with_stdlib)]:
        assert read()[2]["content-length"] == str(len(BODY)) and read()[3] == BODY
        times = [t / args.number * 1e6 for t in timeit.repeat(read, number=args.number, repeat=args.repeat)]
        print(f"{name:26} best {min(times):6.1f} µs, median {statistics.median(times):6.1f} µs per request")
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
