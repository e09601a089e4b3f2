"""A local Docker engine against a remote one, and the agent channel's two transports.

    python examples/benchmarks/remote_engine.py [--calls 1000] [--commands 300] [--rounds 3]

The remote engine is a Docker engine nested in a container of the local one and reached only over TCP
(`gymenvs.container.runtime.docker.nested`); it is started here, given the base and fixture images, and removed
at the end. Measured, in rounds that alternate so that other work on the machine weighs on all alike:

1. The channel's transport alone, on the local engine: the pinger agent (it only calls) in a task container, a
   driver answering each call with a fixed reply; the time from an answer to the next request, for
   - "exec stream": what gymenvs uses where it cannot listen on the container's loopback itself (a remote engine,
     rootless Podman), the forwarder carrying the agent's connections over its `docker exec` session's stdin and
     stdout (`gymenvs.container.agent.bridge`);
   - "bind mount": the transport before it, rebuilt here for comparison: the channel's directory bind-mounted
     into the container and a relay from TCP to its unix socket in it (`BIND_RELAY`).
2. For each engine (Docker local and remote, and the rootful and rootless Podman services .ci/setup starts, where
   they answer): the intercepted-call round trip through SWEAgent-v0 (`env.step`, with the pinger: on the
   container's loopback for Docker local and rootful Podman, `Sandbox.loopback_listener`; through the forwarder
   for the others), and `true` through SWE-v0's `bash` (the persistent shell) and as `Sandbox.run` (one engine
   exec).

Needs the local engine with the base image (`gymenvs swe build-images`), root (the nested engine mounts the cgroup
hierarchies), and the apt mirror reachable from a container (to build the nested engine's image once). Prints
medians and 99th percentiles with the load average; nothing is asserted.
"""

from __future__ import annotations

import argparse
import functools
import os
import pwd
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym

import gymenvs  # noqa: F401  (registers the envs)
from gymenvs.container.agent.bridge import ExecBridge
from gymenvs.container.agent.channel import AgentRequest, LLMChannel
from gymenvs.container.agent.env import AgentEnv
from gymenvs.container.agent.specs import MOUNT, AgentSpec
from gymenvs.container.images import BASE_IMAGE, build_base_image
from gymenvs.container.runtime import Limits, SandboxError, shared_runtime
from gymenvs.container.runtime.commands import entries_archive
from gymenvs.container.runtime.docker.exec import ExecStream
from gymenvs.container.runtime.docker.nested import NestedEngine, build_nested_image
from gymenvs.container.runtime.owners import labels_for
from gymenvs.swe.family import SWEFamily
from gymenvs.swe.images import WORKDIR, build_fixture_images, image_for
from gymenvs.swe.tasks import FIXTURES, load_tasks

PINGER = Path(__file__).parent / "agents" / "pinger.py"
#: The ordinary user whose rootless Podman service .ci/setup starts.
ROOTLESS_USER = "gymenvs-rootless"
FORWARDER = Path(gymenvs.__file__).parent / "container" / "agent" / "forwarder.py"
PONG = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "pong"}, "finish_reason": "stop"}]}
#: The transport before the exec stream: a TCP listener in the container relaying each connection to the channel's
#: unix socket, bind-mounted from this host at /run/gymenvs-host (it prints its port, then serves).
BIND_RELAY = """
import socket, sys, threading
def pump(a, b):
    while True:
        data = a.recv(65536)
        if not data:
            break
        b.sendall(data)
    b.shutdown(socket.SHUT_WR)
def bridge(client):
    upstream = socket.socket(socket.AF_UNIX)
    upstream.connect("/run/gymenvs-host/llm.sock")
    threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
    pump(client, upstream)
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(8)
print(listener.getsockname()[1], flush=True)
while True:
    client = listener.accept()[0]
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=bridge, args=(client,), daemon=True).start()
"""


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"{name:<62} median {statistics.median(ms):8.3f} ms   p99 {p99:8.3f} ms   ({len(ms)})"


def seconds(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


# -- 1. the transport alone -------------------------------------------------------------------------


def driven(channel: LLMChannel, calls: int) -> list[float]:
    """Answer the pinger's calls on `channel`; the time from each answer to the next request."""
    event = channel.next_event(60)
    times = []
    for _ in range(calls):
        assert isinstance(event, AgentRequest), event
        started = time.perf_counter()
        event.call.answer(200, PONG)
        event = channel.next_event(60)
        times.append(time.perf_counter() - started)
    assert isinstance(event, AgentRequest), event
    event.call.answer(200, PONG)
    return times


def pinger_environment(channel: LLMChannel, port: int, calls: int) -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": channel.token,
            "GYMENVS_PINGS": str(calls + 1)}


def exec_stream_transport(image: str, calls: int) -> list[float]:
    runtime = shared_runtime("docker")
    sandbox = runtime.start(image, role="agent", episode_id="bench", workdir=WORKDIR)
    channel = LLMChannel(model_name="m")
    try:
        sandbox.put_archive("/", entries_archive([(MOUNT, "dir", ""), (f"{MOUNT}/forwarder.py", "file", FORWARDER.read_bytes()),
                                                  (f"{MOUNT}/pinger.py", "file", PINGER.read_bytes())]))
        bridge = ExecBridge(sandbox, f"{MOUNT}/forwarder.py", channel)
        agent = sandbox.open_exec(["python3", f"{MOUNT}/pinger.py"], environment=pinger_environment(channel, bridge.port, calls))
        try:
            return driven(channel, calls)
        finally:
            agent.close()
            bridge.close()
    finally:
        channel.close()
        sandbox.remove()


def bind_mount_transport(image: str, calls: int) -> list[float]:
    runtime = shared_runtime("docker")
    channel = LLMChannel(model_name="m")
    container = runtime.client.containers.run(image, ["sleep", "3600"], detach=True, network_mode="none", init=True,
                                              labels=labels_for("agent"), working_dir=WORKDIR,
                                              volumes={str(channel.directory): {"bind": "/run/gymenvs-host", "mode": "ro"}})
    try:
        container.put_archive("/", entries_archive([("/run/bench", "dir", ""),
                                                    ("/run/bench/pinger.py", "file", PINGER.read_bytes())]))
        relay = ExecStream(runtime.client.api, container.id, ["python3", "-c", BIND_RELAY])
        output = b""
        while not output.endswith(b"\n"):
            output += relay.read(time.monotonic() + 30) or b""
        agent = ExecStream(runtime.client.api, container.id, ["python3", "/run/bench/pinger.py"],
                           environment=pinger_environment(channel, int(output), calls))
        try:
            return driven(channel, calls)
        finally:
            agent.close()
            relay.close()
    finally:
        channel.close()
        container.remove(force=True)


# -- 2. local against remote ------------------------------------------------------------------------


def waived(runtime: str, engine: str | None) -> dict[str, str]:
    """The env option a runtime that cannot enforce resource limits (rootless Podman on cgroup v1) needs to run."""
    return {"unenforced_limits": "run_without"} if shared_runtime(runtime, engine).unenforced else {}


def podman_engines() -> dict[str, tuple[str, str | None]]:
    """The Podman engines .ci/setup starts that answer: rootful, and its rootless user's."""
    candidates: dict[str, str | None] = {"Podman, local": None}
    try:
        candidates["Podman rootless, local"] = f"unix:///run/user/{pwd.getpwnam(ROOTLESS_USER).pw_uid}/podman/podman.sock"
    except KeyError:
        print(f"Podman rootless: left out (no user {ROOTLESS_USER})")
    found: dict[str, tuple[str, str | None]] = {}
    for name, engine in candidates.items():
        try:
            shared_runtime("podman", engine)
        except SandboxError as exc:
            print(f"{name}: left out ({exc})")
        else:
            found[name] = ("podman", engine)
    return found


def agent_env_calls(runtime: str, engine: str | None, task, calls: int) -> list[float]:
    pinger = AgentSpec("pinger", command=f"exec python3 {MOUNT}/pinger.py", files=(str(PINGER),),
                       environment={"GYMENVS_PINGS": str(calls + 1)})
    env = AgentEnv(family=SWEFamily, runtime=runtime, engine=engine, agent=pinger, max_turns=calls + 10,
                   **waived(runtime, engine))
    try:
        env.reset(options={"instance_id": task.instance_id})
        return [seconds(functools.partial(env.step, "pong")) for _ in range(calls)]
    finally:
        env.close()


def shell_steps(runtime: str, engine: str | None, task, repeats: int) -> list[float]:
    env = gym.make("gymenvs/SWE-v0", runtime=runtime, engine=engine, max_turns=1_000_000, **waived(runtime, engine))
    try:
        env.reset(options={"instance_id": task.instance_id})
        step = functools.partial(env.step, {"name": "bash", "arguments": {"command": "true"}})
        return [seconds(step) for _ in range(repeats)]
    finally:
        env.close()


def engine_execs(runtime: str, engine: str | None, task, repeats: int) -> list[float]:
    limits = Limits(unenforced_limits=waived(runtime, engine).get("unenforced_limits", "refuse"))
    sandbox = shared_runtime(runtime, engine).start(image_for(task), role="agent", episode_id="bench", workdir=WORKDIR,
                                                    limits=limits)
    try:
        run = functools.partial(sandbox.run, "true", timeout=30)
        return [seconds(run) for _ in range(repeats)]
    finally:
        sandbox.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000, help="intercepted calls per measurement")
    parser.add_argument("--commands", type=int, default=300, help="trivial commands per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    task = load_tasks(FIXTURES)[0]
    local = shared_runtime("docker")
    build_base_image(local, progress=False)
    build_fixture_images(local, base=BASE_IMAGE, progress=False)
    build_nested_image(local)
    print("load average before:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    with NestedEngine(local) as nested:
        remote = shared_runtime("docker", nested.url)
        remote.client.api.load_image(local.client.api.get_image(BASE_IMAGE))
        build_fixture_images(remote, base=BASE_IMAGE, progress=False)
        engines = {"Docker, local": ("docker", None), "Docker, remote": ("docker", nested.url), **podman_engines()}
        results: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for name, measure in [("channel transport: exec stream (local)", exec_stream_transport),
                                  ("channel transport: bind mount (local)", bind_mount_transport)]:
                results.setdefault(name, []).extend(measure(image_for(task), args.calls))
            for where, (runtime, engine) in engines.items():
                for what, measure, count in [("intercepted call, SWEAgent-v0 env.step", agent_env_calls, args.calls),
                                             ("`true` in SWE-v0 bash (the shell)", shell_steps, args.commands),
                                             ("`true` as Sandbox.run (an engine exec)", engine_execs, args.commands)]:
                    results.setdefault(f"{what} ({where})", []).extend(measure(runtime, engine, task, count))
            print("load average after a round:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
        for name, times in results.items():
            print(summary(name, times))


if __name__ == "__main__":
    main()
