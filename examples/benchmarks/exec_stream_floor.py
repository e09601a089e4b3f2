"""The floors under an intercepted call's round trip: the transport alone, and the agent's HTTP client alone.

    python examples/benchmarks/exec_stream_floor.py [--round-trips 2000] [--bytes 600]

Four rows, in one Docker task container (the first fixture task's image), each twice:

1. the engine's exec stream alone: this process writes `--bytes` bytes (about one of the benchmark agent's requests)
   to `cat`'s stdin over `Sandbox.open_exec` and reads them back from its stdout (timed here);
2. the transport an agent's call crosses, without HTTP: a python3 client in the container sends the bytes over TCP
   loopback to the in-container forwarder (gymenvs/container/agent/forwarder.py), which frames them onto its exec
   stream; one thread of this process reads the frames and sends each DATA frame's bytes back, as the bridge sends a
   reply (timed by the client, in the container): the transport where the runtime cannot listen in the container;
3. the transport an agent's call crosses on an engine of this host: the same client sends the bytes to a socket of
   this process listening on the container's loopback (`Sandbox.loopback_listener`), whose thread sends them back;
4. the agent's HTTP client alone: the client of examples/benchmarks/agents/wire_pinger.py (Chat Completions, whole
   replies) calling a server in its own container that answers each request with the bytes gymenvs sends for it
   (timed by the client).

The round trip of examples/benchmarks/agent_wire_roundtrip.py is about rows 3 (2 where the forwarder relays) and 4
plus the host's work: the
request's parsing and translation, the env's step, the reply's translation. Needs a Docker engine and the fixture
images. Prints median and p99 in ms with the load average; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import threading
import time
from importlib import resources
from pathlib import Path

import gymenvs
from gymenvs.container.agent.forwarder import DATA, EOF, FRAME, READY
from gymenvs.container.runtime import Sandbox, shared_runtime
from gymenvs.swe.images import WORKDIR, image_for
from gymenvs.swe.tasks import FIXTURES, load_tasks

CLIENT = """
import socket, statistics, sys, time
port, round_trips, size = (int(arg) for arg in sys.argv[1:])
sock = socket.create_connection(("127.0.0.1", port))
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
message, times = b"x" * size, []
for _ in range(round_trips):
    started = time.perf_counter()
    sock.sendall(message)
    received = 0
    while received < size:
        received += len(sock.recv(65536))
    times.append(time.perf_counter() - started)
print(" ".join(repr(t) for t in times))
"""
#: Answers each request on one connection with the same reply, in the container (for the agent's client alone).
SERVER = """
import socket, sys
reply = open(sys.argv[1], "rb").read()
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
print(listener.getsockname()[1], flush=True)
sock, _ = listener.accept()
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
buffer = b""
while True:
    while b"\\r\\n\\r\\n" not in buffer:
        data = sock.recv(65536)
        if not data:
            sys.exit(0)
        buffer += data
    head, _, buffer = buffer.partition(b"\\r\\n\\r\\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\\r\\n")[0])
    while len(buffer) < length:
        buffer += sock.recv(65536)
    buffer = buffer[length:]
    sock.sendall(reply)
"""
#: The benchmark agent's client (wire_pinger.py, Chat Completions, whole replies), each call timed.
TIMED_PINGER = """
import os, sys, time
os.environ.update(GYMENVS_WIRE="chat", GYMENVS_PINGS="0", GYMENVS_API_KEY="k", GYMENVS_ORIGIN="http://127.0.0.1:" + sys.argv[1])
sys.path.insert(0, "/tmp")
from floor_wire_pinger import connection, data, headers, path
times = []
for _ in range(int(sys.argv[2])):
    started = time.perf_counter()
    connection.request("POST", path, data, headers)
    response = connection.getresponse()
    assert response.status == 200 and b"bash" in response.read()
    times.append(time.perf_counter() - started)
print(" ".join(repr(t) for t in times))
"""
PINGER = Path(__file__).parent / "agents" / "wire_pinger.py"
_WARM_UP = 50


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"{name:<66} median {statistics.median(ms):6.3f} ms   p99 {p99:6.3f} ms   ({len(ms)} round trips)"


def bare_exec_stream(sandbox: Sandbox, round_trips: int, size: int) -> list[float]:
    """Each echo of `size` bytes through `cat` over the exec stream, timed on this host."""
    cat = sandbox.open_exec(["cat"], stdin=True)
    message, times = b"x" * size, []
    try:
        for _ in range(_WARM_UP + round_trips):
            started = time.perf_counter()
            cat.send(message)
            received = 0
            while received < size:
                received += len(cat.read(time.monotonic() + 10) or b"")
            times.append(time.perf_counter() - started)
    finally:
        cat.close()
    return times[_WARM_UP:]


def through_forwarder(sandbox: Sandbox, round_trips: int, size: int) -> list[float]:
    """Each echo of `size` bytes from a client in the container through the forwarder and back, timed by the client."""
    forwarder = resources.files("gymenvs.container.agent").joinpath("forwarder.py").read_bytes()
    sandbox.put_files("/tmp", {"floor_forwarder.py": forwarder, "floor_client.py": CLIENT.encode()})
    stream = sandbox.open_exec(["python3", "/tmp/floor_forwarder.py"], stdin=True)
    frames = _frames(stream)
    try:
        kind, _, payload = next(frames)
        assert kind == READY, payload
        port = int(payload.split()[0])
        threading.Thread(target=_echo, args=(stream, frames), daemon=True).start()
        result = sandbox.run(f"python3 /tmp/floor_client.py {port} {_WARM_UP + round_trips} {size}", timeout=600)
        assert result.exit_code == 0, result.output.text()
        return [float(t) for t in result.output.text().split()][_WARM_UP:]
    finally:
        stream.close()


def through_loopback_listener(sandbox: Sandbox, round_trips: int, size: int) -> list[float]:
    """Each echo of `size` bytes from a client in the container to a socket of this process on the container's loopback,
    timed by the client."""
    listener = sandbox.loopback_listener()
    assert listener is not None, "this engine's containers cannot be listened in from here (another host's engine?)"
    sandbox.put_files("/tmp", {"floor_client.py": CLIENT.encode()})

    def echo() -> None:
        connection, _ = listener.accept()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with connection:
            while data := connection.recv(65536):
                connection.sendall(data)

    with listener:
        threading.Thread(target=echo, daemon=True).start()
        result = sandbox.run(f"python3 /tmp/floor_client.py {listener.getsockname()[1]} {_WARM_UP + round_trips} {size}",
                             timeout=600)
    assert result.exit_code == 0, result.output.text()
    return [float(t) for t in result.output.text().split()][_WARM_UP:]


def chat_reply() -> bytes:
    """The body gymenvs answers the benchmark agent's Chat Completions request with (one tool call)."""
    from gymenvs.container.agent.wire import chat
    from gymenvs.container.agent.wire.common import reply_from_action

    raw = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "You are a benchmark agent."},
            {"role": "user", "content": "Fix the failing test."},
        ],
    }
    reply = reply_from_action({"name": "bash", "arguments": {"command": "ls"}})
    return json.dumps(chat.response(reply, chat.request(raw), "m", raw)).encode()


def agent_client_alone(sandbox: Sandbox, round_trips: int) -> list[float]:
    """Each call of the benchmark agent's HTTP client to a server in its own container that answers with the bytes of
    a Chat Completions reply gymenvs sends (no exec stream, no host), timed by the client."""
    body = chat_reply()
    reply = (
        b"HTTP/1.1 200 OK\r\nServer: gymenvs-agent-channel/1\r\nDate: Sat, 28 Nov 2026 16:00:00 GMT\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )
    sandbox.put_files(
        "/tmp",
        {
            "floor_server.py": SERVER.encode(),
            "floor_reply": reply,
            "floor_pinger.py": TIMED_PINGER.encode(),
            "floor_wire_pinger.py": PINGER.read_bytes(),
        },
    )
    server = sandbox.open_exec(["python3", "/tmp/floor_server.py", "/tmp/floor_reply"])
    try:
        port = b""
        while not port.endswith(b"\n"):
            port += server.read(time.monotonic() + 30) or b""
        result = sandbox.run(f"python3 /tmp/floor_pinger.py {int(port)} {_WARM_UP + round_trips}", timeout=600)
        assert result.exit_code == 0, result.output.text()
        return [float(t) for t in result.output.text().split()][_WARM_UP:]
    finally:
        server.close()


def _frames(stream):
    """The forwarder's frames, as (kind, connection number, payload), until its stream ends."""
    buffer = bytearray()
    while True:
        while len(buffer) >= FRAME.size and len(buffer) >= FRAME.size + FRAME.unpack_from(buffer)[2]:
            kind, number, size = FRAME.unpack_from(buffer)
            yield kind, number, bytes(buffer[FRAME.size : FRAME.size + size])
            del buffer[: FRAME.size + size]
        data = stream.read(time.monotonic() + 600)
        if not data:
            return
        buffer += data


def _echo(stream, frames) -> None:
    for kind, number, payload in frames:
        if kind in (DATA, EOF):
            stream.send(FRAME.pack(kind, number, len(payload)) + payload)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--round-trips", type=int, default=2000)
    parser.add_argument("--bytes", type=int, default=600)
    args = parser.parse_args()
    print("gymenvs:", gymenvs.__file__, "| load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    task = load_tasks(FIXTURES)[0]
    sandbox = shared_runtime("docker").start(image_for(task), role="benchmark", episode_id="benchmark", workdir=WORKDIR)
    try:
        rows = {
            "exec stream alone (cat echo, timed on the host)": lambda: bare_exec_stream(sandbox, args.round_trips, args.bytes),
            "forwarder + exec stream + host thread (client in the container)": lambda: through_forwarder(
                sandbox, args.round_trips, args.bytes
            ),
            "a listener of this process on its loopback (client in the container)": lambda: through_loopback_listener(
                sandbox, args.round_trips, args.bytes
            ),
            "the agent's HTTP client alone (its server in the container)": lambda: agent_client_alone(sandbox, args.round_trips),
        }
        for _ in range(2):
            for name, measure in rows.items():
                print(summary(name, measure()), flush=True)
    finally:
        sandbox.remove()
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
