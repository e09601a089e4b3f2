"""The floor under an intercepted call's round trip: the transport alone, with no HTTP, translation or env step.

    python examples/benchmarks/exec_stream_floor.py [--round-trips 2000] [--bytes 600]

Two rows, each `--round-trips` echoes of `--bytes` bytes (about a request of examples/benchmarks/agents/wire_pinger.py)
in one Docker task container (the first fixture task's image):

1. the engine's exec stream alone: this process writes the bytes to `cat`'s stdin over `Sandbox.open_exec` and reads
   them back from its stdout (timed here);
2. the transport an agent's call crosses: a python3 client in the container sends the bytes over TCP loopback to the
   in-container forwarder (gymenvs/container/agent/forwarder.py), which frames them onto its exec stream; one thread of
   this process reads the frames and sends each DATA frame's bytes back, as the bridge sends a reply (timed by the
   client, in the container).

The round trip of examples/benchmarks/agent_wire_roundtrip.py is row 2 plus the HTTP both ways (the agent's client in
the container, the channel's parsing on the host), the translation both ways and the env's step. Needs a Docker engine
and the fixture images. Prints median and p99 in ms with the load average; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from importlib import resources

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
        for _ in range(2):
            print(
                summary(
                    "exec stream alone (cat echo, timed on the host)", bare_exec_stream(sandbox, args.round_trips, args.bytes)
                ),
                flush=True,
            )
            print(
                summary(
                    "forwarder + exec stream + host thread (client in the container)",
                    through_forwarder(sandbox, args.round_trips, args.bytes),
                ),
                flush=True,
            )
    finally:
        sandbox.remove()
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
