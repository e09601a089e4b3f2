"""An agent env with no engine, for the quick lane: the wire test agent (tests/container/agent/wire_agent.py) runs
on this host, speaking one wire format to a real `LLMChannel` over its unix socket, and runs its shell commands
here. What the agent rollout does with the agent's requests (the internal form, the family's rendering of them,
the reply in the agent's format) is gymenvs' own code, as in `AgentEnv`; what this leaves out is the container,
the forwarder and the bridge, which tests/trl/rollout/test_agent_families.py covers with the real CLIs.

The env id is `tests.trl.rollout.host_agent_support:HostAgent-v0` (importing this module registers it)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import gymnasium as gym

from gymenvs.container.agent.channel import AgentExited, AgentRequest, LLMChannel
from gymenvs.container.agent.connection import Call
from gymenvs.container.agent.messages import render
from gymenvs.container.agent.request import Message, agent_request
from gymenvs.container.agent.wire import Reply, reply_from_action, respond
from gymenvs.container.agent.wire import anthropic as anthropic_wire
from gymenvs.core import Outcome, TextEnv

ENV_ID = "tests.trl.rollout.host_agent_support:HostAgent-v0"
WIRE_AGENT = Path(__file__).parents[2] / "container" / "agent" / "wire_agent.py"
TASK = "Print the two markers."
MODEL = "policy"
SIDE_MODEL = "side"
CALL_TIMEOUT_S = 30.0


class HostAgentEnv(TextEnv):
    """The wire test agent on the host, each of its main-turn requests an observation (`info["request"]`), each
    action the policy's reply; the episode ends, with reward 1, when the agent exits 0."""

    hosts_agent = True

    def __init__(self, *, wire: str = "chat", stream: bool = False, max_turns: int | None = None):
        super().__init__(max_turns=max_turns)
        self.wire, self.stream = wire, stream
        self._channel: LLMChannel | None = None
        self._agent: subprocess.Popen | None = None
        self._call: Call | None = None
        self._request_info: dict[str, Any] = {}
        self._folder = tempfile.TemporaryDirectory(prefix="gymenvs-host-agent-")

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._stop_agent()
        channel = self._channel = LLMChannel(model_name=MODEL, side_model=SIDE_MODEL)
        task_file = Path(self._folder.name) / "task.md"
        task_file.write_text(TASK)
        environment = {"GYMENVS_WIRE": self.wire, "GYMENVS_STREAM": "1" if self.stream else "0",
                       "GYMENVS_SOCKET": str(channel.socket_path), "GYMENVS_API_KEY": channel.token,
                       "GYMENVS_SIDE_MODEL": SIDE_MODEL, "GYMENVS_TASK_FILE": str(task_file), "PATH": "/usr/bin:/bin"}
        agent = self._agent = subprocess.Popen([sys.executable, str(WIRE_AGENT)], env=environment, cwd=self._folder.name,
                                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        threading.Thread(target=lambda: channel.post(AgentExited(agent.wait(), "")), daemon=True).start()
        return self._accept(self._next_request(), previous=None).observation

    def _act(self, action: Any) -> Outcome:
        call = self._call
        assert call is not None
        payload, answered = respond(call.wire, call.body, call.raw or {}, reply_from_action(action), MODEL,
                                    self._channel.conversations)
        call.answer(200, payload)
        event = self._next_request()
        if isinstance(event, AgentExited):
            output = self._agent.stdout.read().decode() if self._agent and self._agent.stdout else ""
            return Outcome(f"The agent exited with code {event.exit_code}.", reward=float(event.exit_code == 0),
                           terminated=True, info={"exit_code": event.exit_code, "agent_log": output})
        return self._accept(event, previous=(call.body["messages"], answered))

    def _next_request(self) -> Call | AgentExited:
        """The agent's next main-turn request, or its exit; side calls are answered as `AgentEnv` answers them."""
        while True:
            event = self._channel.next_event(CALL_TIMEOUT_S)
            if isinstance(event, AgentExited):
                return event
            if not isinstance(event, AgentRequest):
                raise RuntimeError(f"the host agent sent no request: {event}")
            if event.call.side is None:
                return event.call
            self._answer_side_call(event.call)

    def _answer_side_call(self, call: Call) -> None:
        if call.side == "count_tokens":
            call.answer(200, anthropic_wire.count_tokens(call.body))
        else:
            call.answer(200, respond(call.wire, call.body, call.raw or {}, Reply(content="ok"), MODEL,
                                     self._channel.conversations)[0])

    def _accept(self, call: Call, previous: tuple[list[Message], Message | None] | None) -> Outcome:
        self._call = call
        request = agent_request(call.body, call.wire.NAME, previous)
        self._request_info = {"request": request, "tools": request["tools"]}
        return Outcome(render(request["new_messages"]), info=dict(self._request_info))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        info.update(self._request_info)
        return observation, info

    def close(self) -> None:
        self._stop_agent()
        self._folder.cleanup()
        super().close()

    def _stop_agent(self) -> None:
        if self._agent is not None:
            self._agent.kill()
            self._agent.wait()
            self._agent.stdout.close()
        if self._channel is not None:
            self._channel.close()
        self._agent = self._channel = self._call = None


gym.register(ENV_ID.split(":")[1], entry_point=HostAgentEnv)
