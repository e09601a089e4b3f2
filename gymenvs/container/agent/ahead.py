"""An agent started ahead of its task: what a warm pool starts in each container of an agent env whose CLI can read
its task on standard input (`AgentSpec.ahead_command`), so that `reset` is left only what the CLI does after reading
the task.

In each pooled container `StartAhead` puts the forwarder and the agent's files, starts the forwarder bridged to no
channel yet (a connection the agent opens is refused), makes the container's token (in the agent's environment and
config) and starts the agent under a small wrapper: the agent reads its standard input from a FIFO whose write end
the wrapper holds, and the wrapper reads the task, as one base64 line, from its own exec stream. `reset` opens the
episode's `LLMChannel` with that token, binds the bridge to it, then sends the task (`StartedAhead.give_task`): the
wrapper writes it to the FIFO and closes it, so the agent sees its end. A token is made for one container, which
serves one episode and is removed after it.
"""

from __future__ import annotations

import base64
import shlex
from dataclasses import dataclass

from gymenvs.container.agent.bridge import ExecBridge
from gymenvs.container.agent.channel import new_token
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
IFS= read -r task && printf '%s' "$task" | base64 -d >&4
exec 4>&-
wait "$agent"
"""


def endpoint_environment(token: str, bridge: ExecBridge) -> dict[str, str]:
    """The variables naming the episode's endpoint (the forwarder's port in the container) and its token."""
    origin = f"http://127.0.0.1:{bridge.port}"
    return {"OPENAI_API_KEY": token, "GYMENVS_API_KEY": token, "ANTHROPIC_AUTH_TOKEN": token,
            "OPENAI_BASE_URL": f"{origin}/v1", "OPENAI_API_BASE": f"{origin}/v1", "GYMENVS_BASE_URL": f"{origin}/v1",
            "ANTHROPIC_BASE_URL": origin, "GYMENVS_ORIGIN": origin, "GYMENVS_FORWARDER_PID": str(bridge.pid)}


def put_files(sandbox: Sandbox, files: dict[str, bytes]) -> None:
    """`files` written into MOUNT through the engine's API."""
    entries: list[tuple[str, str, str | bytes]] = [(MOUNT, "dir", ""), *((f"{MOUNT}/{name}", "file", data)
                                                                         for name, data in files.items())]
    sandbox.put_archive("/", entries_archive(entries))


@dataclass(frozen=True)
class StartAhead:
    """How a warm pool starts the agent in each container (part of the pool's key: all of it is compared).
    `environment`: the agent's variables but the endpoint's (`endpoint_environment`)."""

    command: str
    setup: str
    files: tuple[tuple[str, bytes], ...]
    environment: tuple[tuple[str, str], ...]

    def __call__(self, sandbox: Sandbox) -> StartedAhead:
        return StartedAhead(sandbox, self)


class StartedAhead:
    """The forwarder and the agent started in `sandbox`, waiting for an episode's channel and task."""

    def __init__(self, sandbox: Sandbox, start: StartAhead):
        put_files(sandbox, dict(start.files))
        self.token = new_token()
        self.bridge = ExecBridge(sandbox, f"{MOUNT}/{FORWARDER}", None, setup=start.setup)
        try:
            script = f"{start.setup}\n{_WRAPPER.format(command=shlex.quote(start.command))}"
            environment = {**dict(start.environment), **endpoint_environment(self.token, self.bridge)}
            self.stream: ExecProcess = sandbox.open_exec(["bash", "-c", script], stdin=True, environment=environment)
        except BaseException:
            self.bridge.close()
            raise

    def alive(self) -> bool:
        return not self.stream.closed()

    def give_task(self, task: bytes) -> None:
        """Send the agent its task (its whole standard input)."""
        self.stream.send(base64.b64encode(task) + b"\n")

    def close(self) -> None:
        self.stream.close()
        self.bridge.close()
