"""`AgentEnv`: an agent program runs inside the task's container; the env serves its LLM calls
(SWEAgent-v0 and TerminalAgent-v0).

`reset` starts the task's container and the agent in it, and returns the agent's first main-turn request
as the observation. The agent may speak Chat Completions, Responses or Anthropic Messages
(`gymenvs.container.agent.wire`), streamed or not: `info["request"]` is its request in the one internal
form (`gymenvs.container.agent.request.AgentRequest`) whatever it spoke. In interception mode
`step(action)` is the policy's reply (text, one tool call, several: parallel tool use;
`wire.reply_from_action`); the env delivers it to the waiting agent in the agent's own format and returns
the agent's next request. In black-box mode the env forwards each request to an OpenAI-compatible upstream
instead and the action is ignored. Side calls (titles, summaries, token counts, quota probes:
`wire.side_call_kind`) never reach the policy: the side responder answers them (`side_calls`), and
`info["trajectory"]` records them marked with their kind.

The episode ends when the agent exits (after submitting, or not); its container is then graded by the
task family, as in the tools env (`ContainerEnv._grade_and_end`).
"""

from __future__ import annotations

import json
import shlex
import time
from typing import Any

from pydantic import PositiveInt

from gymenvs.container.agent.ahead import Endpoint, StartAhead, StartedAhead
from gymenvs.container.agent.channel import AgentExited, AgentRequest, ChannelError, LLMChannel
from gymenvs.container.agent.connection import Call
from gymenvs.container.agent.messages import render
from gymenvs.container.agent.options import AgentConfig
from gymenvs.container.agent.process import AgentProcess
from gymenvs.container.agent.request import Message, agent_request
from gymenvs.container.agent.specs import MOUNT, derived_image
from gymenvs.container.agent.upstream import Upstream
from gymenvs.container.agent.wire import Reply, reply_from_action, respond
from gymenvs.container.agent.wire import anthropic as anthropic_wire
from gymenvs.container.background import in_thread
from gymenvs.container.env import ContainerEnv, FamilyLike, present, sandbox_ending
from gymenvs.container.family import Task, TaskFamily
from gymenvs.container.images import ensure_image
from gymenvs.container.runtime import Runtime, Sandbox, SandboxError
from gymenvs.container.tools_env import SHELL_ENVIRONMENT
from gymenvs.core import EndedBy, Outcome, ending

#: The side responder's minimal answer to a side call that wants text (a title, a summary).
SIDE_REPLY_TEXT = "ok"


class AgentStartError(RuntimeError):
    """The agent ended, or never called, before its first LLM request."""


class AgentEnv(ContainerEnv):
    """One task of `family` per episode, with an agent program running inside its container; its LLM calls are
    the env's observations (interception) or go to an upstream (black-box).

    Registered as gymenvs/SWEAgent-v0 (`family="gymenvs.swe.family:SWEFamily"`) and gymenvs/TerminalAgent-v0
    (`family="gymenvs.terminal.family:HarborFamily"`).

    Args:
        family: the task family (a `TaskFamily`, its class or "module:Class").
        runtime: "docker" (the default) or "podman", or a `Runtime` object: what every engine operation goes
            through (`ContainerEnv`).
        engine: with a runtime name, its engine's URL (default: the runtime's own default).
        max_turns: replies allowed; the work is graded when they run out (the step limit).
        render_mode: None or "ansi".
        **options: the family's options and the env's (`AgentConfig`: `agent=`, `mode=`, `upstream_url=`,
            `call_timeout_s=`, `warm_pool=`...).
    """

    default_max_turns = 100
    hosts_agent = True
    config_class = AgentConfig
    config: AgentConfig

    def __init__(self, family: FamilyLike, *, runtime: Runtime | str = "docker", engine: str | None = None,
                 max_turns: PositiveInt | None = None, render_mode: str | None = None, **options: Any):
        super().__init__(family, runtime=runtime, engine=engine, max_turns=max_turns, render_mode=render_mode, **options)
        self.agent = self.config.agent_spec
        self.mode = self.config.mode
        url = self.config.upstream_url
        self._upstream = (Upstream(url, api_key=self.config.upstream_api_key, model=self.config.upstream_model,
                                   timeout=self.config.call_timeout_s) if url else None)
        self.trajectory: list[dict[str, Any]] = []
        self.side_calls = 0
        self._channel: LLMChannel | None = None
        self._endpoint: Endpoint | None = None
        self._agent: AgentProcess | None = None
        self._call: Call | None = None
        self._request_info: dict[str, Any] = {}
        self._deadline = 0.0
        self._agent_turn_began = 0.0  # when the agent last got a reply (or was started): its turn's clock

    # -- episodes ----------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        info.update(agent=self.agent.name, **self._request_info)
        info["tools"] = info["request"]["tools"]
        return observation, info

    def close(self) -> None:
        super().close()
        if self._upstream is not None:
            self._upstream.close()

    def episode_timeout_s(self) -> float:
        """Seconds of wall-clock the episode may take, from reset: `episode_timeout_s`, or the task's own limit
        when it is shorter."""
        task_limit = self.family.agent_timeout_s(self.episode_task)
        return min(self.config.episode_timeout_s, task_limit) if task_limit else self.config.episode_timeout_s

    def _begin(self, task: Task) -> str:
        if self.step_index == 0:  # a later step's agent adds to the episode's trajectory
            self.trajectory, self.side_calls = [], 0
        self._call = None
        self._deadline = time.monotonic() + self.episode_timeout_s()
        image = self.episode_image.name if self.step_index else derived_image(self.episode_image.name, self.agent)
        try:
            channel, agent = self._start_agent(image)
            event = self._next_event(channel)
            if not isinstance(event, AgentRequest):
                raise AgentStartError(f"agent {self.agent.name!r} made no LLM request: {self._describe(event)}; "
                                      f"its log ends with:\n{agent.log_tail()}")
        except BaseException:
            self._release()
            raise
        return self._accept(event.call, previous=None).observation

    def _start_agent(self, image: str) -> tuple[LLMChannel, AgentProcess]:
        """Start the episode's container from `image` and the agent in it, talking to a new channel."""
        if self.agent.image_suffix is None:
            ensure_image(self.runtime, image, pull=self.config.pull, registry=self.config.registry)
        elif not self.runtime.image_exists(image):
            raise SandboxError(f"image {image!r} is not present: build it with `gymenvs swe install-agent {self.agent.name} "
                               f"{self.episode_image.name}`")
        if self._starts_ahead:
            warm = self._pool(image, shell=False, start_agent=self._start_ahead()).take(episode_id=self._episode_id or "")
            self._sandbox = warm.sandbox
            assert isinstance(warm.agent, StartedAhead)  # the pool of `_start_ahead` starts one in each container
            return self._continue_ahead(warm.agent)
        sandbox = self._sandbox = self._pooled_sandbox(image) if self._pooled else self._new_sandbox(image)
        self.family.prepare_step(self.episode_task, sandbox)
        endpoint = self._endpoint = Endpoint(sandbox, {**self.agent.file_contents(), "task.md": self._task_bytes()},
                                             setup=self.episode_image.setup)
        channel = self._channel = LLMChannel(model_name=self.config.model_name, side_model=self.config.side_model_name,
                                             listener=endpoint.listener)
        endpoint.bind(channel)
        script = f"{self.episode_image.setup}\nexec bash -c {shlex.quote(self.agent.command)}"
        self._agent_turn_began = time.monotonic()
        environment = {**self._agent_environment(), **endpoint.environment(channel.token)}
        stream = sandbox.open_exec(["bash", "-c", script], environment=environment)
        agent = self._agent = AgentProcess(stream, channel)
        return channel, agent

    @property
    def _starts_ahead(self) -> bool:
        """Whether the pool starts the agent ahead of its task: for a pooled container, an agent that reads its task
        on standard input, and a family whose `prepare_step` prepares nothing (a CLI reads the working directory
        at its start, before a preparation of the step would have run)."""
        return (self._pooled and self.agent.ahead_command is not None
                and type(self.family).prepare_step is TaskFamily.prepare_step)

    def _start_ahead(self) -> StartAhead:
        return StartAhead(command=str(self.agent.ahead_command), setup=self.episode_image.setup,
                          files=tuple(self.agent.file_contents().items()),
                          environment=tuple(sorted(self._agent_environment().items())))

    def _continue_ahead(self, started: StartedAhead) -> tuple[LLMChannel, AgentProcess]:
        """Open the episode's channel with the token of the container's agent, bind its endpoint to it, give it its
        task: the agent, started ahead, goes on from reading its standard input."""
        endpoint = self._endpoint = started.endpoint
        channel = self._channel = LLMChannel(model_name=self.config.model_name, side_model=self.config.side_model_name,
                                             token=started.token, listener=endpoint.listener)
        endpoint.bind(channel)
        agent = self._agent = AgentProcess(started.stream, channel)  # released with the episode from here on
        self._agent_turn_began = time.monotonic()
        started.give_task(self.agent.task_input(self.family.instruction(self.episode_task)), file=self._task_bytes())
        return channel, agent

    def _task_bytes(self) -> bytes:
        return self.family.instruction(self.episode_task).encode("utf-8", "surrogateescape")

    def _agent_environment(self) -> dict[str, str]:
        """The agent's variables but the endpoint's (`endpoint_environment`)."""
        config = self.config
        return {
            **SHELL_ENVIRONMENT, "OPENAI_MODEL": config.model_name, "ANTHROPIC_MODEL": config.model_name,
            "GYMENVS_SIDE_MODEL": config.side_model_name, "GYMENVS_TASK_FILE": f"{MOUNT}/task.md",
            "GYMENVS_WORKDIR": self.workdir, "GYMENVS_COMMAND_TIMEOUT": f"{config.command_timeout_s:g}",
            "GYMENVS_OUTPUT_LIMIT": str(config.output_limit), **self.family.agent_environment, **self.agent.environment,
        }

    def _new_sandbox(self, image: str) -> Sandbox:
        return self.runtime.start(image, role="agent", episode_id=self._episode_id or "", limits=self.limits,
                                  workdir=self.workdir)

    def _pooled_sandbox(self, image: str) -> Sandbox:
        """A started container of `image` from the warm pool."""
        return self._pool(image, shell=False).take(episode_id=self._episode_id or "").sandbox

    # -- a step: the policy's reply to the waiting request --------------------------------------

    def _act(self, action: Any) -> Outcome:
        """Answer the agent's waiting request with the policy's reply (`action`; in black-box mode, with the
        upstream's), then wait for its next request. A reply that cannot be read is an `ActionError` (the
        invalid-action observation), and the request keeps waiting."""
        pending = self._pending_call
        reply = self._policy_reply(action, pending.body) if self.mode == "interception" else None
        self._call = None
        started = time.monotonic()
        answered: Message | None
        if reply is not None:
            status, (payload, answered) = 200, self._respond(pending, reply)
        else:
            assert self._upstream is not None  # black-box mode always has one
            status, payload, answered = self._upstream.answer(pending, self._respond)
        replied = time.monotonic()  # the agent's turn begins as the reply leaves, not after (it may be done before)
        pending.answer(status, payload)
        self._record(pending, status, payload, started, replied)
        if status != 200:
            error = f"the upstream failed: HTTP {status}: {payload.get('error', payload)}"
            return self._finish(error=error, ended_as=ending(EndedBy.INFRA, "upstream_error", error))
        return self._await_agent(previous=(pending.body["messages"], answered))

    def _policy_reply(self, action: Any, request: dict[str, Any]) -> Reply:
        reply = reply_from_action(action)
        if reply.tool_calls and not request.get("tools"):  # the agent reads text only: hand it the action as written
            return Reply(content=action if isinstance(action, str) else json.dumps(action))
        return reply

    def _respond(self, call: Call, reply: Reply) -> tuple[dict[str, Any], Message]:
        """`reply` in the format `call` came in, and as an assistant message of the internal form."""
        channel = self._episode_channel
        if not reply.prompt_tokens:  # the usage the agent is told, where the policy gave none
            reply.prompt_tokens = channel.prompt_pieces.count(call.body.get("messages") or [])
        return respond(call.wire, call.body, call.raw or {}, reply, self.config.model_name, channel.conversations)

    def _record(self, call: Call, status: int, payload: dict[str, Any], started: float, replied: float) -> None:
        """Keep the call and its answer, with how long the agent took to send it (since its previous reply, or its
        start) and how long the answer took to begin (the policy's, or the upstream's, time); the agent's next turn
        is timed from `replied`."""
        self.trajectory.append({"request": call.body, "response": payload, "status": status, "wire": call.wire.NAME,
                                "side": call.side, "agent_seconds": call.received_at - self._agent_turn_began,
                                "policy_seconds": started - call.received_at})
        self._agent_turn_began = replied

    def _end_at_turn_limit(self) -> Outcome:
        error = f"the step limit ({self.max_turns} replies) was reached"
        return self._finish(error=error, ended_as=ending(EndedBy.MODEL, "turn_limit", error))

    # -- the agent's side ----------------------------------------------------------------------

    def _await_agent(self, previous: tuple[list[Message], Message | None]) -> Outcome:
        event = self._next_event(self._episode_channel)
        if isinstance(event, AgentRequest):
            try:
                # Where the engine cannot cap the layer: the watch's last verdict (it looks about once a second).
                self.episode_sandbox.check_disk()
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
            assert self._upstream is not None  # checked by the config
            status, payload, _ = self._upstream.answer(call, self._respond)
        else:
            status, (payload, _) = 200, self._respond(call, Reply(content=SIDE_REPLY_TEXT))
        replied = time.monotonic()
        call.answer(status, payload)
        self._record(call, status, payload, started, replied)

    def _accept(self, call: Call, previous: tuple[list[Message], Message | None] | None) -> Outcome:
        """The agent's request `call` as the observation: its new messages, and `info["request"]`."""
        self._call = call
        request = agent_request(call.body, call.wire.NAME, previous)
        self._request_info = {"request": request, "side_calls": self.side_calls}
        return Outcome(render(request["new_messages"]) or "(the agent sent no new message)", info=dict(self._request_info))

    def _describe(self, event: Any) -> str:
        if isinstance(event, ChannelError):
            return event.message
        if isinstance(event, AgentExited):
            return f"the agent exited with code {event.exit_code}"
        if time.monotonic() >= self._deadline:
            return f"the episode's wall-clock limit ({self.episode_timeout_s():g} s) was reached"
        return f"the agent sent no request within the call limit ({self.config.call_timeout_s:g} s)"

    # -- the end of an episode -------------------------------------------------------------------

    def _finish(self, *, error: str | None, exit_code: int | None = None, ended_as: dict[str, str] | None = None) -> Outcome:
        """Stop the agent, have the family grade its container, and end the episode; `ended_as`: who ended it
        (`gymenvs.container.env.grade_ending`), None when the agent finished by itself."""
        info: dict[str, Any] = {"exit_code": exit_code, "agent_log": self._agent.log_tail() if self._agent else "",
                                "trajectory": self.trajectory, "side_calls": self.side_calls}
        grade, graded, next_step = self._grade_and_end(ended_as)
        info.update(graded)
        if next_step is not None:  # the agent runs again, on the next step's instruction: its first request
            return Outcome(next_step, info={**info, **self._request_info})
        if graded["outcome"] != EndedBy.MODEL:
            error = error or grade.detail
        if error:
            info["error"] = error
        ended = f"The episode ended: {error}." if error else "The agent finished."
        return Outcome(f"{ended} {grade.summary}", reward=grade.reward, terminated=error is None,
                       truncated=error is not None, info=info)

    @property
    def _episode_channel(self) -> LLMChannel:
        return present(self._channel, "the episode has no channel: it has ended, or none started")

    @property
    def _pending_call(self) -> Call:
        return present(self._call, "no request of the agent is waiting for a reply")

    def _release(self, wait: bool = True) -> None:
        """Close the channel (removing its directory), stop the agent and remove its container (`wait=False`:
        the container's removal, the endpoint's close and the agent's thread's join (a forwarder's bridge and that
        thread poll their streams every 0.2 s) in the background, as a reset does, so that it need not wait for them;
        `close` does)."""
        if self._channel is not None:
            self._channel.close()
        endpoint, agent = self._endpoint, self._agent
        if agent is not None:
            agent.stop()
        self._discard_sandbox(wait)

        def join() -> None:
            if endpoint is not None:
                endpoint.close()
            if agent is not None:
                agent.join()

        if wait:
            join()
        else:
            self._removals.append(in_thread(join, "gymenvs-release"))
        self._channel = self._endpoint = self._agent = self._call = None

    def _episode_state(self) -> dict[str, Any]:
        return {
            **super()._episode_state(),
            "agent": self.agent.name,
            "mode": self.mode,
            "calls": len(self.trajectory) - self.side_calls,
            "side_calls": self.side_calls,
        }


def _ending_of(event: Any, error: str) -> dict[str, str]:
    """Who ended an episode whose agent broke off with `event` (None: no request in time)."""
    if isinstance(event, ChannelError):
        return ending(EndedBy.INFRA, "channel_error", error) if event.infra else ending(EndedBy.MODEL, "protocol_error", error)
    return ending(EndedBy.MODEL, "time_limit", error)
