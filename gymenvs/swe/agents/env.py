"""SWEAgent-v0: an agent program runs inside the task container; the env serves its LLM calls.

`reset` starts the task container and the agent in it, and returns the agent's first main-turn
request as the observation. The agent may speak Chat Completions, Responses or Anthropic Messages
(`gymenvs.swe.agents.wire`), streamed or not: `info["request"]` is its request in the one internal
form (an OpenAI-style message list, function-schema tools, sampling parameters) whatever it spoke.
In interception mode `step(action)` is the policy's reply (text, one tool call, several: parallel
tool use; `wire.reply_from_action`); the env delivers it to the waiting agent in the agent's own
format and returns the agent's next request. In black-box mode the env forwards each request to an
OpenAI-compatible upstream instead and the action is ignored. Side calls (titles, summaries, token
counts, quota probes: `wire.side_call_kind`) never reach the policy: the side responder answers them
(`side_calls`), and `info["trajectory"]` records them marked with their kind.

The episode ends when the agent exits (after submitting, or not); its changes are then graded
host-side exactly as in SWE-v0: the engine reads them from the container the agent ran in and a
fresh container from the task image runs the tests (`SWEBaseEnv._grade_and_end`).
"""

from __future__ import annotations

import collections
import json
import shlex
import shutil
import threading
import time
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, PositiveFloat, PositiveInt, field_validator, model_validator

from gymenvs.core import ActionError, EndedBy, Outcome, ToolCall, ending
from gymenvs.swe.agents.channel import (
    SOCKET_NAME,
    AgentExited,
    AgentRequest,
    Call,
    ChannelError,
    LLMChannel,
    new_channel_directory,
    reap_channel_directories_once,
)
from gymenvs.swe.agents.messages import extends, render
from gymenvs.swe.agents.specs import MOUNT, AgentSpec, agent_spec, derived_image
from gymenvs.swe.agents.wire import SIDE_MODEL, Reply, reply_from_action, reply_from_message, respond
from gymenvs.swe.agents.wire import anthropic as anthropic_wire
from gymenvs.swe.agents.wire import chat as chat_wire
from gymenvs.swe.base import EpisodeConfig, SWEBaseEnv, SWEConfig, sandbox_ending
from gymenvs.swe.env import SHELL_ENVIRONMENT
from gymenvs.swe.sandbox import (
    DockerSandbox,
    ExecProcess,
    PrivateDirectory,
    Sandbox,
    SandboxError,
    WarmPool,
    discard,
    install_sigterm_cleanup,
    reap_orphans_once,
)
from gymenvs.swe.sandbox.images import ensure_image, image_exists

_TEXT = "__text__"  # the tool-call name free text is wrapped in on its way through TextEnv
_REPLY = "__reply__"  # the tool-call name standing for the parsed reply on its way through TextEnv
#: The side responder's minimal answer to a side call that wants text (a title, a summary).
SIDE_REPLY_TEXT = "ok"
_LOG_TAIL_BYTES = 16 << 10
_FORWARDER = "forwarder.py"


class AgentStartError(RuntimeError):
    """The agent ended, or never called, before its first LLM request."""


class AgentOptions(BaseModel):
    """The agent harness's options, which SWEAgent-v0 and TerminalAgent-v0 add to their env's config.
    `command_timeout_s` and `output_limit` are told to the agent (GYMENVS_COMMAND_TIMEOUT,
    GYMENVS_OUTPUT_LIMIT), which enforces them itself."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, use_attribute_docstrings=True,
                              arbitrary_types_allowed=True)

    agent: str | AgentSpec = "reference"
    """"reference" (a stdlib-only bash-tool agent shipped here), "mini-swe-agent" (2.4.6), the coding-agent
    CLIs "claude-code" (2.1.331), "codex" (0.169.0), "opencode" (1.18.33), "pi" (0.73.1) (each installed into
    derived images by `gymenvs swe install-agent NAME`), or an `AgentSpec`."""
    mode: Literal["interception", "black-box"] = "interception"
    """"interception" (step's action is the reply) or "black-box" (calls go to `upstream_url`)."""
    upstream_url: str | None = None
    """The OpenAI-compatible (Chat Completions) base URL of the black-box upstream, e.g. http://host:8000/v1.
    Requests in the other formats are sent there in the internal form and the answer translated back."""
    upstream_model: str | None = None
    """The model name sent upstream (default: the agent's own)."""
    upstream_api_key: str | None = None
    """The upstream's key."""
    model_name: str = "gymenvs-policy"
    """The model name agents are told to ask for (OPENAI_MODEL)."""
    side_model_name: str = SIDE_MODEL
    """The model name agents are told to use for their small/background model (GYMENVS_SIDE_MODEL): calls
    naming it are side calls."""
    side_calls: Literal["minimal", "upstream"] | None = None
    """Who answers side calls: "minimal" (a minimal valid answer; the default in interception mode) or
    "upstream" (forwarded to `upstream_url`; the default in black-box mode). Token counts are always
    answered here."""
    call_timeout_s: PositiveFloat = 600.0
    """Seconds the env waits for the agent's next request (its own work between calls), and seconds
    one upstream call may take in black-box mode."""
    episode_timeout_s: PositiveFloat = 3600.0
    """Seconds of wall-clock an episode may take, from reset."""

    @field_validator("agent")
    @classmethod
    def _known_agent(cls, value: str | AgentSpec) -> AgentSpec:
        return agent_spec(value)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.mode == "black-box" and self.upstream_url is None:
            raise ValueError(f"mode={self.mode!r} with upstream_url=None: black-box mode needs an upstream_url")
        if self.side_responder == "upstream" and self.upstream_url is None:
            raise ValueError("side_calls='upstream' with upstream_url=None: forwarding side calls needs an upstream_url")
        if self.mode == "interception" and self.upstream_url is not None and self.side_responder != "upstream":
            raise ValueError(f"mode={self.mode!r} with upstream_url={self.upstream_url!r}: interception mode takes none "
                             "unless side_calls='upstream'")
        return self

    @property
    def side_responder(self) -> Literal["minimal", "upstream"]:
        return self.side_calls or ("upstream" if self.mode == "black-box" else "minimal")

    @property
    def agent_spec(self) -> AgentSpec:
        return agent_spec(self.agent)


class SWEAgentConfig(SWEConfig, AgentOptions):
    """`SWEConfig` plus the agent harness's options (`AgentOptions`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)


class SWEAgentEnv(SWEBaseEnv):
    """SWEAgent-v0. One task per episode, with an agent program running inside its container.

    Args:
        config: an `SWEAgentConfig`, or an `SWEConfig` (the options shared with SWE-v0: tasks,
            container limits, timeouts, grading); its fields, and the agent's (`agent=`, `mode=`,
            `upstream_url=`, `call_timeout_s=`...), may also be given as keyword arguments, which
            override `config`'s. With `warm_pool=N` each pooled container has its own channel
            directory, bind-mounted when the pool starts it (docs/swe-warm-pool.md).
        max_turns: replies allowed; the work is graded when they run out (the step limit).
        render_mode: None or "ansi".
    """

    default_max_turns = 100
    hosts_agent = True
    config_class: ClassVar[type[EpisodeConfig]] = SWEAgentConfig

    def __init__(self, config: EpisodeConfig | None = None, *, max_turns: PositiveInt | None = None,
                 render_mode: str | None = None, **options: Any):
        super().__init__(config, max_turns=max_turns, render_mode=render_mode, **options)
        self.agent = self.config.agent_spec
        self.mode = self.config.mode
        upstream_url = self.config.upstream_url
        self._upstream = (_upstream_client(upstream_url, self.config.upstream_api_key, self.config.call_timeout_s)
                          if upstream_url else None)
        install_sigterm_cleanup()
        self.trajectory: list[dict[str, Any]] = []
        self._channel: LLMChannel | None = None
        self._agent: _AgentProcess | None = None
        self._call: Call | None = None
        self._deadline = 0.0
        self._action: Any = None
        self._reply: Reply | ActionError = ActionError("no reply")
        self.side_calls = 0

    @property
    def reaped(self) -> list[str]:
        """Containers and channel directories of dead processes this process removed at its first reset (once)."""
        return reap_orphans_once(self.client) + reap_channel_directories_once()

    # -- episodes ----------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        request = self._pending_call.body
        info.update(instance_id=self.episode_task.instance_id, image=self.episode_sandbox.image, agent=self.agent.name,
                    request=request, tools=request.get("tools") or [], wire=self._pending_call.wire.NAME,
                    side_calls=self.side_calls)
        return observation, info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._action = action
        if self.mode != "interception":
            return super().step("")
        try:
            self._reply = reply_from_action(action)
        except ActionError as error:
            self._reply = error  # raised by _run, inside TextEnv.step, which reports it as an invalid action
        return super().step({"name": _REPLY})

    def close(self) -> None:
        self._end_agent()
        self._release_containers()
        if self._upstream is not None:
            self._upstream.close()
        super().close()

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._end_agent(wait=False)
        self.task = self.pick_task(options)
        self.report, self.trajectory, self._call, self.side_calls = None, [], None, 0
        image = derived_image(self.task_image(), self.agent)
        reap_orphans_once(self.client)
        reap_channel_directories_once()
        self._deadline = time.monotonic() + self.episode_timeout_s()
        try:
            channel, agent = self._start_agent(image)
            event = self._next_event(channel)
            if not isinstance(event, AgentRequest):
                raise AgentStartError(f"agent {self.agent.name!r} made no LLM request: {self._describe(event)}; "
                                      f"its log ends with:\n{agent.log_tail()}")
        except BaseException:
            self._end_agent()
            raise
        return self._accept(event.call, previous=None).observation

    def episode_timeout_s(self) -> float:
        """Seconds of wall-clock the episode may take, from reset."""
        return self.config.episode_timeout_s

    def _start_agent(self, image: str) -> tuple[LLMChannel, _AgentProcess]:
        """Start the episode's container from `image` and the agent in it, talking to a new channel."""
        if self.agent.image_suffix is None:
            ensure_image(self.client, image, pull=self.config.pull)
        elif not image_exists(self.client, image):
            raise SandboxError(f"image {image!r} is not present: build it with `gymenvs swe install-agent {self.agent.name} "
                               f"{self.task_image()}`")
        channel, sandbox = self._pooled_channel(image) if self.config.warm_pool else self._new_channel(image)
        files = {_FORWARDER: _package_file(_FORWARDER), **self.agent.file_contents(),
                 "task.md": self.task_text().encode("utf-8", "surrogateescape")}
        for name, data in files.items():  # a pooled container sees them appear in its bind mount
            (channel.directory / name).write_bytes(data)
        environment = {
            **SHELL_ENVIRONMENT, "OPENAI_API_KEY": channel.token, "OPENAI_MODEL": self.config.model_name,
            "GYMENVS_API_KEY": channel.token, "ANTHROPIC_AUTH_TOKEN": channel.token, "ANTHROPIC_MODEL": self.config.model_name,
            "GYMENVS_SIDE_MODEL": self.config.side_model_name,
            "GYMENVS_TASK_FILE": f"{MOUNT}/task.md", "GYMENVS_WORKDIR": self.workdir,
            "GYMENVS_COMMAND_TIMEOUT": f"{self.config.command_timeout_s:g}",
            "GYMENVS_OUTPUT_LIMIT": str(self.config.output_limit), **self.task_environment(), **self.agent.environment,
        }
        script = (f"{self.shell_setup}\nexec python3 {MOUNT}/{_FORWARDER} {MOUNT}/{SOCKET_NAME} -- "
                  f"bash -c {shlex.quote(self.agent.command)}")
        stream = sandbox.open_exec(["bash", "-c", script], environment=environment)
        agent = self._agent = _AgentProcess(stream, channel)
        return channel, agent

    def _new_channel(self, image: str) -> tuple[LLMChannel, Sandbox]:
        """A new channel, then a container started from `image` with its directory bound at MOUNT."""
        channel = self._channel = LLMChannel(model_name=self.config.model_name, side_model=self.config.side_model_name)
        sandbox = self._sandbox = DockerSandbox(self.client, image, role="agent", episode_id=self._episode_id or "",
                                                limits=self.limits, read_only_binds={str(channel.directory): MOUNT},
                                                workdir=self.workdir)
        return channel, sandbox

    def _pooled_channel(self, image: str) -> tuple[LLMChannel, Sandbox]:
        """A container of `image` from the warm pool, and a channel opened in its own directory."""
        sandbox, _, directory = self._pool_for(image).take(episode_id=self._episode_id or "")
        assert directory is not None  # this env's pools give every container its own directory
        self._sandbox = sandbox
        try:
            channel = self._channel = LLMChannel(model_name=self.config.model_name, directory=directory,
                                                 side_model=self.config.side_model_name)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        return channel, sandbox

    def _pool_for(self, image: str) -> WarmPool:
        pool = WarmPool.for_image(self.client, image, size=self.config.warm_pool, limits=self.limits, shell=False,
                                  directory=PrivateDirectory(new_channel_directory, MOUNT), pull=self.config.pull,
                                  workdir=self.workdir)
        if pool not in self._pools:
            pool.join()
            self._pools.append(pool)
        return pool

    def _parse_text(self, text: str) -> ToolCall:
        return ToolCall(_TEXT, {"content": text})

    def _run(self, call: ToolCall) -> Outcome:
        if self.mode == "interception" and isinstance(self._reply, ActionError):
            raise self._reply
        pending, self._call = self._pending_call, None
        started = time.monotonic()
        reply: dict[str, Any] | None
        if self.mode == "interception":
            assert isinstance(self._reply, Reply)
            status, (payload, reply) = 200, self._respond(pending, self._policy_reply(self._reply, pending.body))
        else:
            status, payload, reply = self._upstream_answer(pending)
        pending.answer(status, payload)
        self._record(pending, status, payload, started)
        if status != 200:
            error = f"the upstream failed: HTTP {status}: {payload.get('error', payload)}"
            return self._finish(error=error, ended_as=ending(EndedBy.INFRA, "upstream_error", error))
        return self._await_agent(previous=(pending.body["messages"], reply))

    def _respond(self, call: Call, reply: Reply) -> tuple[dict[str, Any], dict[str, Any]]:
        """`reply` in the format `call` came in, and as an assistant message of the internal form."""
        return respond(call.wire, call.body, call.raw or {}, reply, self.config.model_name, self._episode_channel.conversations)

    def _record(self, call: Call, status: int, payload: dict[str, Any], started: float) -> None:
        self.trajectory.append({"request": call.body, "response": payload, "status": status, "wire": call.wire.NAME,
                                "side": call.side, "policy_seconds": started - call.received_at})

    def _end_at_turn_limit(self) -> Outcome:
        error = f"the step limit ({self.max_turns} replies) was reached"
        return self._finish(error=error, ended_as=ending(EndedBy.MODEL, "turn_limit", error))

    # -- the agent's side ----------------------------------------------------------------------

    def _await_agent(self, previous: tuple[list, dict | None]) -> Outcome:
        event = self._next_event(self._episode_channel)
        if isinstance(event, AgentRequest):
            try:
                self.episode_sandbox.check_disk()  # the engine cannot cap the layer here: check at each call
            except SandboxError as exc:
                event.call.answer(503, {"error": {"message": str(exc), "type": "episode_ended"}})
                return self._finish(error=str(exc), ended_as=sandbox_ending(exc))
            return self._accept(event.call, previous)
        if isinstance(event, AgentExited):
            error = None if event.exit_code == 0 else f"the agent exited with code {event.exit_code}"
            # Exiting without a verdict is the agent's doing; its container dying is caught when grading.
            return self._finish(error=error, exit_code=event.exit_code,
                                ended_as=None if error is None else ending(EndedBy.MODEL, "agent_exited", error))
        return self._finish(error=self._describe(event), ended_as=_ending_of(event, self._describe(event)))

    def _next_event(self, channel: LLMChannel) -> AgentRequest | ChannelError | AgentExited | None:
        """The agent's next main-turn request (or why none came), answering the side calls before it."""
        while True:
            event = channel.next_event(min(self.config.call_timeout_s, self._deadline - time.monotonic()))
            if not (isinstance(event, AgentRequest) and event.call.side is not None):
                return event
            self._answer_side_call(event.call)

    def _answer_side_call(self, call: Call) -> None:
        """The side responder: a side call never reaches the policy; it is recorded and counted."""
        started = time.monotonic()
        self.side_calls += 1
        if call.side == "count_tokens":
            status, payload = 200, anthropic_wire.count_tokens(call.body)
        elif self.config.side_responder == "upstream":
            status, payload, _ = self._upstream_answer(call)
        else:
            status, (payload, _) = 200, self._respond(call, Reply(content=SIDE_REPLY_TEXT))
        call.answer(status, payload)
        self._record(call, status, payload, started)

    def _accept(self, call: Call, previous: tuple[list, dict | None] | None) -> Outcome:
        self._call = call
        messages = call.body["messages"]
        kept_history = previous is not None and extends(previous[0], previous[1], messages)
        new = messages[len(previous[0]) + 1:] if previous is not None and kept_history else messages
        info = {"request": call.body, "wire": call.wire.NAME, "side_calls": self.side_calls,
                "history_rewritten": previous is not None and not kept_history}
        return Outcome(render(new) or "(the agent sent no new message)", info=info)

    def _describe(self, event: Any) -> str:
        if isinstance(event, ChannelError):
            return event.message
        if isinstance(event, AgentExited):
            return f"the agent exited with code {event.exit_code}"
        if time.monotonic() >= self._deadline:
            return f"the episode's wall-clock limit ({self.episode_timeout_s():g} s) was reached"
        return f"the agent sent no request within the call limit ({self.config.call_timeout_s:g} s)"

    def _policy_reply(self, reply: Reply, request: dict[str, Any]) -> Reply:
        if reply.tool_calls and not request.get("tools"):  # the agent reads text only: hand it the action as written
            return Reply(content=self._action if isinstance(self._action, str) else json.dumps(self._action))
        return reply

    def _upstream_answer(self, call: Call) -> tuple[int, dict[str, Any], dict[str, Any] | None]:
        """The upstream's answer to `call` in the agent's format (a chat completion passed on as it came), and
        its assistant message."""
        status, completion = self._upstream_reply(call.body)
        message = chat_wire.reply_of(completion) if status == 200 else None
        if call.wire is chat_wire:
            return status, completion, message
        if status != 200 or message is None:
            error = completion.get("error", completion) if status != 200 else "the upstream sent no assistant message"
            return status if status != 200 else 502, call.wire.error(f"the upstream failed: {error}", "api_error"), None
        reply = reply_from_message(message)
        usage = completion.get("usage") or {}
        reply.prompt_tokens, reply.completion_tokens = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
        finish = (completion.get("choices") or [{}])[0].get("finish_reason")
        reply.finish_reason = finish if finish in ("stop", "tool_calls", "length") else None
        payload, message = self._respond(call, reply)
        return 200, payload, message

    def _upstream_reply(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The upstream's answer to the agent's request, passed through as it came (status, JSON body)."""
        import openai

        model = self.config.upstream_model
        body = {**request, "stream": False, **({"model": model} if model else {})}
        body.pop("stream_options", None)
        try:
            assert self._upstream is not None  # black-box mode always has one
            payload = self._upstream.post("/chat/completions", body=body, cast_to=object)
        except openai.APIStatusError as exc:
            return exc.status_code, _error_body(exc)
        except openai.APIError as exc:  # no connection, a timeout, or a body that is no JSON
            return 502, {"error": {"message": f"the upstream failed: {exc}", "type": "upstream_error"}}
        return 200, payload if isinstance(payload, dict) else {"error": {"message": str(payload)}}

    # -- the end of an episode -------------------------------------------------------------------

    def _finish(self, *, error: str | None, exit_code: int | None = None, ended_as: dict[str, str] | None = None) -> Outcome:
        """Stop the agent, grade what changed in its container, and end the episode; `ended_as`: who ended
        it (`gymenvs.swe.base.grade_ending`), None when the agent finished by itself."""
        info: dict[str, Any] = {"exit_code": exit_code, "agent_log": self._agent.log_tail() if self._agent else "",
                                "trajectory": self.trajectory, "side_calls": self.side_calls}
        # The channel is closed (its directory removed) only once grading has read the container: the
        # engine re-creates a missing bind-mount source when it copies files out of a container.
        report, graded = self._grade_and_end(ended_as)
        info.update(graded)
        if graded["outcome"] != EndedBy.MODEL:
            error = error or report.error
        if error:
            info["error"] = error
        ended = f"The episode ended: {error}." if error else "The agent finished."
        return Outcome(f"{ended} {report.summary()}", reward=report.reward, terminated=error is None,
                       truncated=error is not None, info=info)

    @property
    def _episode_channel(self) -> LLMChannel:
        if self._channel is None:
            raise RuntimeError("the episode has no channel: it has ended, or none started")
        return self._channel

    @property
    def _pending_call(self) -> Call:
        if self._call is None:
            raise RuntimeError("no request of the agent is waiting for a reply")
        return self._call

    def _release(self) -> None:
        self._end_agent()

    def _end_agent(self, wait: bool = True) -> None:
        """Close the channel (removing its directory), stop the agent and remove its container (`wait=False`:
        in the background, as a reset does, so that it need not wait for the engine)."""
        if self._channel is not None:
            self._channel.close()
        if self._agent is not None:
            self._agent.stop()
        if self._sandbox is not None:
            removal = discard(self._sandbox, wait=wait)
            self._removals = [r for r in self._removals if not r.done()] + ([removal] if removal else [])
        if self._agent is not None:
            self._agent.join()
        self._channel = self._sandbox = self._agent = self._call = None

    def _episode_state(self) -> dict[str, Any]:
        return {
            **super()._episode_state(),
            "agent": self.agent.name,
            "mode": self.mode,
            "calls": len(self.trajectory) - self.side_calls,
            "side_calls": self.side_calls,
        }


class _AgentProcess:
    """The agent's process in the container: a thread keeps the tail of its output and reports its exit."""

    def __init__(self, stream: ExecProcess, channel: LLMChannel):
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


def _ending_of(event: Any, error: str) -> dict[str, str]:
    """Who ended an episode whose agent broke off with `event` (None: no request in time)."""
    if isinstance(event, ChannelError):
        return ending(EndedBy.INFRA, "channel_error", error) if event.infra else ending(EndedBy.MODEL, "protocol_error", error)
    return ending(EndedBy.MODEL, "time_limit", error)


def _upstream_client(url: str, api_key: str | None, timeout: float) -> Any:
    import openai

    # The SDK insists on a key; an upstream that checks none ignores this one.
    return openai.OpenAI(base_url=url, api_key=api_key or "unused", timeout=timeout, max_retries=2)


def _error_body(error: Any) -> dict[str, Any]:
    """The upstream's error response as it sent it, or an OpenAI-shaped error if it sent no JSON object."""
    try:
        body = error.response.json()
    except ValueError:
        body = None
    return body if isinstance(body, dict) else {"error": {"message": str(error), "type": "upstream_error"}}


def _package_file(name: str) -> bytes:
    from importlib import resources

    return resources.files("gymenvs.swe.agents").joinpath(name).read_bytes()
