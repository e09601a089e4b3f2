"""SWEAgent-v0: an agent program runs inside the task container; the env serves its LLM calls.

`reset` starts the task container and the agent in it, and returns the agent's first chat request
as the observation (`info["request"]` is the raw request). In interception mode `step(action)`
is the policy's reply (text, or a tool call in any form the core parses); the env delivers it to
the waiting agent as a chat-completions response and returns the agent's next request. In
black-box mode the env forwards each request to an OpenAI-compatible upstream instead and the
action is ignored. The episode ends when the agent exits (after submitting, or not); its changes
are then graded host-side exactly as in SWE-v0 (`gymenvs.swe.grading`).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import shlex
import threading
import time
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, PositiveFloat, PositiveInt

from gymenvs.core import Outcome, TextEnv, ToolCall, validate_config
from gymenvs.swe.agents.channel import (
    SOCKET_NAME,
    AgentExited,
    AgentRequest,
    Call,
    ChannelError,
    LLMChannel,
    reap_channel_directories_once,
)
from gymenvs.swe.agents.messages import chat_completion, extends, render, reply_message, tool_call
from gymenvs.swe.agents.specs import MOUNT, AgentSpec, agent_spec, derived_image
from gymenvs.swe.env import (
    SHELL_ENVIRONMENT,
    _select,  # SWE-v0's choice of tasks by instance_ids, shared
)
from gymenvs.swe.grading import GradeReport, extract_diff, grade
from gymenvs.swe.sandbox import DockerSandbox as Sandbox
from gymenvs.swe.sandbox import ExecStream, Limits, SandboxError, install_sigterm_cleanup, reap_orphans_once, shared_client
from gymenvs.swe.sandbox.images import ENV_SETUP, WORKDIR, check_template, ensure_image, image_exists, image_for
from gymenvs.swe.tasks import FIXTURES, Task, load_tasks

_TEXT = "__text__"  # the tool-call name free text is wrapped in on its way through TextEnv
_LOG_TAIL_BYTES = 16 << 10
_FORWARDER = "forwarder.py"


class AgentStartError(RuntimeError):
    """The agent ended, or never called, before its first LLM request."""


class SWEAgentEnv(TextEnv):
    """SWEAgent-v0. One task per episode, with an agent program running inside its container.

    Args:
        agent: "reference" (a stdlib-only bash-tool agent shipped here), "mini-swe-agent" (2.4.6,
            installed into derived images by `gymenvs swe install-agent`) or an `AgentSpec`.
        mode: "interception" (step's action is the reply) or "black-box" (calls go to `upstream_url`).
        upstream_url: the OpenAI-compatible base URL of the black-box upstream, e.g. http://host:8000/v1.
        upstream_model: the model name sent upstream (default: the agent's own).
        upstream_api_key: the upstream's key.
        model_name: the model name agents are told to ask for (OPENAI_MODEL).
        dataset, split, instance_ids, image_template, pull: the tasks and their images, as in SWE-v0.
        call_timeout: seconds the env waits for the agent's next request (its own work between calls).
        episode_timeout: seconds of wall-clock an episode may take, from reset.
        command_timeout: seconds an agent is told one command may run (GYMENVS_COMMAND_TIMEOUT).
        grading_timeout: seconds the tests may run when grading.
        mem_limit, cpus, pids_limit: resources of each container.
        max_turns: replies allowed; the work is graded when they run out (the step limit).
    """

    default_max_turns = 100
    reset_option_keys = frozenset({"instance_id"})
    hosts_agent = True

    @validate_config
    def __init__(
        self,
        *,
        agent: str | AgentSpec = "reference",
        mode: Literal["interception", "black-box"] = "interception",
        upstream_url: str | None = None,
        upstream_model: str | None = None,
        upstream_api_key: str | None = None,
        model_name: str = "gymenvs-policy",
        dataset: str = FIXTURES,
        split: str | None = None,
        instance_ids: Sequence[str] | None = None,
        image_template: str | None = None,
        pull: bool = False,
        call_timeout: PositiveFloat = 600.0,
        episode_timeout: PositiveFloat = 3600.0,
        command_timeout: PositiveFloat = 60.0,
        grading_timeout: PositiveFloat = 1800.0,
        mem_limit: Annotated[str, Field(pattern=r"^[0-9]+[bkmgBKMG]?$")] = "2g",
        cpus: PositiveFloat = 1.0,
        pids_limit: PositiveInt = 512,
        max_turns: PositiveInt | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        self.agent = agent_spec(agent)
        self.mode = mode
        if (mode == "black-box") != (upstream_url is not None):
            raise ValueError(f"mode={mode!r} with upstream_url={upstream_url!r}: black-box mode needs an upstream_url, "
                             "interception mode takes none")
        self.model_name = model_name
        self.upstream_model = upstream_model
        self.tasks = _select(load_tasks(dataset, split=split), instance_ids)
        self.image_template = check_template(image_template) if image_template is not None else None
        self.pull = pull
        self.call_timeout = call_timeout
        self.episode_timeout = episode_timeout
        self.command_timeout = command_timeout
        self.grading_timeout = grading_timeout
        self.limits = Limits(mem_limit=mem_limit, cpus=cpus, pids_limit=pids_limit, network=False)
        self._upstream = _upstream_client(upstream_url, upstream_api_key, call_timeout) if upstream_url else None
        install_sigterm_cleanup()
        self.task: Task | None = None
        self.report: GradeReport | None = None
        self.trajectory: list[dict[str, Any]] = []
        self._sandbox: Sandbox | None = None
        self._channel: LLMChannel | None = None
        self._agent: _AgentProcess | None = None
        self._call: Call | None = None
        self._deadline = 0.0
        self._action: Any = None

    @property
    def client(self) -> Any:
        """The process's docker client, created at the first reset (constructing an env touches no engine)."""
        return shared_client()

    @property
    def reaped(self) -> list[str]:
        """Containers and channel directories of dead processes this process removed at its first reset (once)."""
        return reap_orphans_once(self.client) + reap_channel_directories_once()

    # -- episodes ----------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        info.update(instance_id=self.task.instance_id, image=self._sandbox.image, agent=self.agent.name,
                    request=self._call.body, tools=self._call.body.get("tools") or [])
        return observation, info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._action = action
        return super().step(action if self.mode == "interception" else "")

    def close(self) -> None:
        self._end_agent()
        if self._upstream is not None:
            self._upstream.close()
        super().close()

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._end_agent()
        self.task = self._pick_task(options)
        self.report, self.trajectory, self._call = None, [], None
        image = derived_image(image_for(self.task, self.image_template), self.agent)
        reap_orphans_once(self.client)
        reap_channel_directories_once()
        self._deadline = time.monotonic() + self.episode_timeout
        try:
            self._start_agent(image)
            event = self._channel.next_event(min(self.call_timeout, self.episode_timeout))
            if not isinstance(event, AgentRequest):
                raise AgentStartError(f"agent {self.agent.name!r} made no LLM request: {self._describe(event)}; "
                                      f"its log ends with:\n{self._agent.log_tail()}")
        except BaseException:
            self._end_agent()
            raise
        return self._accept(event.call, previous=None).observation

    def _start_agent(self, image: str) -> None:
        if self.agent.image_suffix is None:
            ensure_image(self.client, image, pull=self.pull)
        elif not image_exists(self.client, image):
            raise SandboxError(f"image {image!r} is not present: build it with `gymenvs swe install-agent {self.agent.name}`")
        self._channel = LLMChannel(model_name=self.model_name)
        files = {_FORWARDER: _package_file(_FORWARDER), **self.agent.file_contents(),
                 "task.md": self.task.problem_statement.encode("utf-8", "surrogateescape")}
        for name, data in files.items():
            (self._channel.directory / name).write_bytes(data)
        self._sandbox = Sandbox(self.client, image, role="agent", episode_id=self._episode_id, limits=self.limits,
                                read_only_binds={str(self._channel.directory): MOUNT})
        environment = {
            **SHELL_ENVIRONMENT, "OPENAI_API_KEY": self._channel.token, "OPENAI_MODEL": self.model_name,
            "GYMENVS_TASK_FILE": f"{MOUNT}/task.md", "GYMENVS_WORKDIR": WORKDIR,
            "GYMENVS_COMMAND_TIMEOUT": f"{self.command_timeout:g}", **self.agent.environment,
        }
        script = (f"{ENV_SETUP}\nexec python3 {MOUNT}/{_FORWARDER} {MOUNT}/{SOCKET_NAME} -- "
                  f"bash -c {shlex.quote(self.agent.command)}")
        stream = self._sandbox.open_exec(["bash", "-c", script], environment=environment)
        self._agent = _AgentProcess(stream, self._channel)

    def _pick_task(self, options: dict[str, Any]) -> Task:
        if "instance_id" not in options:
            return self.tasks[int(self.np_random.integers(len(self.tasks)))]
        for task in self.tasks:
            if task.instance_id == options["instance_id"]:
                return task
        raise ValueError(f"instance_id={options['instance_id']!r} is not a task of this env")

    def _parse_text(self, text: str) -> ToolCall:
        return ToolCall(_TEXT, {"content": text})

    def _run(self, call: ToolCall) -> Outcome:
        pending, self._call = self._call, None
        started = time.monotonic()
        if self.mode == "interception":
            status, payload = 200, self._policy_reply(call, pending.body)
        else:
            status, payload = self._upstream_reply(pending.body)
        pending.answer(status, payload)
        self.trajectory.append({"request": pending.body, "response": payload, "status": status,
                                "policy_seconds": started - pending.received_at})
        if status != 200:
            return self._finish(error=f"the upstream failed: HTTP {status}: {payload.get('error', payload)}")
        return self._await_agent(previous=(pending.body["messages"], reply_message(payload)))

    def _at_turn_limit(self, outcome: Outcome) -> Outcome:
        ended = self._finish(error=f"the step limit ({self.max_turns} replies) was reached")
        ended.observation = outcome.observation + "\n" + ended.observation
        ended.info = {**outcome.info, **ended.info}
        return ended

    # -- the agent's side ----------------------------------------------------------------------

    def _await_agent(self, previous: tuple[list, dict | None]) -> Outcome:
        left = self._deadline - time.monotonic()
        event = self._channel.next_event(min(self.call_timeout, left))
        if isinstance(event, AgentRequest):
            return self._accept(event.call, previous)
        if isinstance(event, AgentExited):
            error = None if event.exit_code == 0 else f"the agent exited with code {event.exit_code}"
            return self._finish(error=error, exit_code=event.exit_code)
        return self._finish(error=self._describe(event))

    def _accept(self, call: Call, previous: tuple[list, dict | None] | None) -> Outcome:
        self._call = call
        messages = call.body["messages"]
        kept_history = previous is not None and extends(previous[0], previous[1], messages)
        new = messages[len(previous[0]) + 1:] if kept_history else messages
        info = {"request": call.body, "history_rewritten": previous is not None and not kept_history}
        return Outcome(render(new) or "(the agent sent no new message)", info=info)

    def _describe(self, event: Any) -> str:
        if isinstance(event, ChannelError):
            return event.message
        if isinstance(event, AgentExited):
            return f"the agent exited with code {event.exit_code}"
        if time.monotonic() >= self._deadline:
            return f"the episode's wall-clock limit ({self.episode_timeout:g} s) was reached"
        return f"the agent sent no request within the call limit ({self.call_timeout:g} s)"

    def _policy_reply(self, call: ToolCall, request: dict[str, Any]) -> dict[str, Any]:
        if call.name == _TEXT:
            return chat_completion(model=self.model_name, content=call.arguments["content"])
        if not request.get("tools"):  # the agent reads text only: hand it the action as written
            text = self._action if isinstance(self._action, str) else json.dumps(self._action)
            return chat_completion(model=self.model_name, content=text)
        return chat_completion(model=self.model_name, content=None, tool_calls=[tool_call(call.name, call.arguments)])

    def _upstream_reply(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        import httpx

        body = {**request, "stream": False, **({"model": self.upstream_model} if self.upstream_model else {})}
        body.pop("stream_options", None)
        try:
            response = self._upstream.post("chat/completions", json=body)
            payload = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            return 502, {"error": {"message": f"the upstream failed: {exc}", "type": "upstream_error"}}
        return response.status_code, payload if isinstance(payload, dict) else {"error": {"message": str(payload)}}

    # -- the end of an episode -------------------------------------------------------------------

    def _finish(self, *, error: str | None, exit_code: int | None = None) -> Outcome:
        """Stop the agent, grade its changes in a fresh container, and end the episode."""
        info: dict[str, Any] = {"exit_code": exit_code, "agent_log": self._agent.log_tail() if self._agent else "",
                                "trajectory": self.trajectory}
        try:
            diff = extract_diff(self._sandbox, self.task.base_commit)
        except SandboxError as exc:
            self._end_agent()
            message = f"{error}; " if error else ""
            return Outcome(f"The episode ended ({message}the agent's changes could not be read: {exc}).", truncated=True,
                           info={**info, "error": message + str(exc)})
        finally:
            self._end_agent()
        image = image_for(self.task, self.image_template)
        self.report = grade(self.client, self.task, diff, image=image, timeout=self.grading_timeout,
                            limits=dataclasses.replace(self.limits, network=False), episode_id=self._episode_id)
        info.update(report=self.report.to_dict(), status=self.report.status, patch=diff)
        if self.report.status == "error":
            error = error or self.report.error
        if error:
            info["error"] = error
        ended = f"The episode ended: {error}." if error else "The agent finished."
        return Outcome(f"{ended} {self.report.summary()}", reward=self.report.reward, terminated=error is None,
                       truncated=error is not None, info=info)

    def _end_agent(self) -> None:
        if self._channel is not None:
            self._channel.close()
        if self._agent is not None:
            self._agent.stop()
        if self._sandbox is not None:
            self._sandbox.remove()
        if self._agent is not None:
            self._agent.join()
        self._channel = self._sandbox = self._agent = self._call = None

    def _episode_state(self) -> dict[str, Any]:
        return {
            "instance_id": self.task.instance_id if self.task else None,
            "agent": self.agent.name,
            "mode": self.mode,
            "container": self._sandbox.name if self._sandbox else None,
            "calls": len(self.trajectory),
            "status": self.report.status if self.report else None,
        }


class _AgentProcess:
    """The agent's process in the container: a thread keeps the tail of its output and reports its exit."""

    def __init__(self, stream: ExecStream, channel: LLMChannel):
        self._stream = stream
        self._channel = channel
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_bytes = 0
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="gymenvs-agent-watcher", daemon=True)
        self._thread.start()

    def log_tail(self) -> str:
        return b"".join(self._tail).decode("utf-8", "replace")

    def stop(self) -> None:
        self._stopped.set()

    def join(self) -> None:
        self._thread.join(timeout=10)
        self._stream.close()

    def _watch(self) -> None:
        while not self._stopped.is_set():
            data = self._stream.read(time.monotonic() + 0.2)
            if data == b"":
                break
            if data:
                self._keep(data)
        if self._stopped.is_set():
            return
        exit_code = None
        for _ in range(50):  # the engine may report the exec as running for a moment after its output closed
            exit_code = self._stream.exit_code()
            if exit_code is not None or self._stopped.wait(0.05):
                break
        self._channel.post(AgentExited(exit_code, self.log_tail()))

    def _keep(self, data: bytes) -> None:
        self._tail.append(data)
        self._tail_bytes += len(data)
        while self._tail_bytes - len(self._tail[0]) >= _LOG_TAIL_BYTES:
            self._tail_bytes -= len(self._tail.popleft())


def _upstream_client(url: str, api_key: str | None, timeout: float):
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=url.rstrip("/") + "/", headers=headers, timeout=timeout)


def _package_file(name: str) -> bytes:
    from importlib import resources

    return resources.files("gymenvs.swe.agents").joinpath(name).read_bytes()
