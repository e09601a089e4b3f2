"""An agent started ahead of its task: what a warm pool starts in each container of an agent env whose CLI can read
its task on standard input (`AgentSpec.ahead_command`), so that `reset` is left only what the CLI does after reading
the task.

In each pooled container `StartAhead` opens the agent's endpoint with its files (`Endpoint`: bound to no channel
yet), makes the container's token (in the agent's environment and config) and starts the agent under a small
wrapper: the agent reads its standard input from a FIFO whose write end the wrapper holds, and the wrapper reads the
episode's task file and the task, each as one base64 line, from its own exec stream. `reset` opens the episode's
`LLMChannel` with that token and the endpoint's listener, binds the endpoint to it, then sends both
(`StartedAhead.give_task`): the wrapper writes the task file, then the task to the FIFO, and closes it, so the agent
sees its end. A token is made for one container, which serves one episode and is removed after it.

`Endpoint` is where an agent in its container reaches its episode's channel, whether started ahead or not: on the
container's own loopback, where this process listens in the container's network namespace
(`Sandbox.loopback_listener`: the agent's bytes cross no relay); where the runtime cannot make that listener (its
engine on another host), at the forwarder's port, every byte relayed over the forwarder's exec stream (`ExecBridge`).
"""

from __future__ import annotations

import base64
import shlex
import socket
from dataclasses import dataclass
from importlib import resources

from gymenvs.container.agent.bridge import ExecBridge
from gymenvs.container.agent.channel import LLMChannel, new_token
from gymenvs.container.agent.specs import MOUNT
from gymenvs.container.runtime import ExecProcess, Sandbox
from gymenvs.container.runtime.commands import entries_archive

FORWARDER = "forwarder.py"
_FIFO = f"{MOUNT}/task.fifo"
# fd 4 holds the FIFO both ways: the agent's open of its read end does not block, and it sees the end of its input
# only once the task is written and fd 4 closed. The wrapper exits with the agent's exit code.
_WRAPPER = f"""mkfifo -m 600 {_FIFO}
exec 4<>{_FIFO}
bash -c {{command}} <{_FIFO} 4>&- &
agent=$!
IFS= read -r file && printf '%s' "$file" | base64 -d > {MOUNT}/task.md
IFS= read -r task && printf '%s' "$task" | base64 -d >&4
exec 4>&-
wait "$agent"
"""


class Endpoint:
    """The agent's endpoint in `sandbox`, opened with `files` written into MOUNT (and the forwarder, where it relays),
    bound to no channel yet: a connection made before `bind` waits for the channel (the listener) or is refused (the
    forwarder). `listener` is for the channel to serve (`LLMChannel(listener=...)`)."""

    def __init__(self, sandbox: Sandbox, files: dict[str, bytes], *, setup: str):
        self.listener: socket.socket | None = sandbox.loopback_listener()
        self.bridge: ExecBridge | None = None
        try:
            if self.listener is not None:
                put_files(sandbox, files)
                self.port = self.listener.getsockname()[1]
            else:
                forwarder = resources.files("gymenvs.container.agent").joinpath(FORWARDER).read_bytes()
                put_files(sandbox, {**files, FORWARDER: forwarder})
                self.bridge = ExecBridge(sandbox, f"{MOUNT}/{FORWARDER}", None, setup=setup)
                self.port = self.bridge.port
        except BaseException:
            self.close()
            raise

    def bind(self, channel: LLMChannel) -> None:
        """Serve the agent from `channel`, made with this endpoint's `listener`."""
        if self.bridge is not None:
            self.bridge.bind(channel)

    def environment(self, token: str) -> dict[str, str]:
        """The variables naming the endpoint (its port on the container's loopback) and the episode's token (and where
        the forwarder relays it, its pid in the container)."""
        origin = f"http://127.0.0.1:{self.port}"
        relay = {"GYMENVS_FORWARDER_PID": str(self.bridge.pid)} if self.bridge is not None else {}
        return {"OPENAI_API_KEY": token, "GYMENVS_API_KEY": token, "ANTHROPIC_AUTH_TOKEN": token,
                "OPENAI_BASE_URL": f"{origin}/v1", "OPENAI_API_BASE": f"{origin}/v1", "GYMENVS_BASE_URL": f"{origin}/v1",
                "ANTHROPIC_BASE_URL": origin, "GYMENVS_ORIGIN": origin, **relay}

    def close(self) -> None:
        """Stop relaying and close the listener (its channel closes it too); safe to call twice."""
        if self.bridge is not None:
            self.bridge.close()
        if self.listener is not None:
            self.listener.close()


def put_files(sandbox: Sandbox, files: dict[str, bytes]) -> None:
    """`files` written into MOUNT through the engine's API."""
    entries: list[tuple[str, str, str | bytes]] = [(MOUNT, "dir", ""), *((f"{MOUNT}/{name}", "file", data)
                                                                         for name, data in files.items())]
    sandbox.put_archive("/", entries_archive(entries))


@dataclass(frozen=True)
class StartAhead:
    """How a warm pool starts the agent in each container (part of the pool's key: all of it is compared).
    `environment`: the agent's variables but the endpoint's (`Endpoint.environment`)."""

    command: str
    setup: str
    files: tuple[tuple[str, bytes], ...]
    environment: tuple[tuple[str, str], ...]

    def __call__(self, sandbox: Sandbox) -> StartedAhead:
        return StartedAhead(sandbox, self)


class StartedAhead:
    """The agent's endpoint opened and the agent started in `sandbox`, waiting for an episode's channel and task."""

    def __init__(self, sandbox: Sandbox, start: StartAhead):
        self.token = new_token()
        self.endpoint = Endpoint(sandbox, dict(start.files), setup=start.setup)
        try:
            script = f"{start.setup}\n{_WRAPPER.format(command=shlex.quote(start.command))}"
            environment = {**dict(start.environment), **self.endpoint.environment(self.token)}
            self.stream: ExecProcess = sandbox.open_exec(["bash", "-c", script], stdin=True, environment=environment)
        except BaseException:
            self.endpoint.close()
            raise

    def alive(self) -> bool:
        return not self.stream.closed()

    def give_task(self, task: bytes, *, file: bytes) -> None:
        """Write `file`, the task as the episode's task file (MOUNT/task.md), then send the agent `task` (its whole
        standard input): both through the wrapper's stream, with no call to the engine."""
        self.stream.send(base64.b64encode(file) + b"\n" + base64.b64encode(task) + b"\n")

    def close(self) -> None:
        self.stream.close()
        self.endpoint.close()
