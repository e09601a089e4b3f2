"""The options of an agent env (SWEAgent-v0, TerminalAgent-v0): which agent, how its calls are answered, and
how long it may take."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import ConfigDict, PositiveFloat, field_validator, model_validator

from gymenvs.container.agent.specs import AgentSpec, agent_spec
from gymenvs.container.agent.wire import SIDE_MODEL
from gymenvs.container.config import ContainerConfig


class AgentConfig(ContainerConfig):
    """The options of an agent env: `ContainerConfig`'s and the agent harness's. `command_timeout_s` and
    `output_limit` are told to the agent (GYMENVS_COMMAND_TIMEOUT, GYMENVS_OUTPUT_LIMIT), which enforces
    them itself."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

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
