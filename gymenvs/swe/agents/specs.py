"""Agents the env can run inside a task container, and how each is started.

Every agent gets these environment variables (plus its spec's own `environment`):

    OPENAI_BASE_URL, OPENAI_API_BASE   http://127.0.0.1:<port>/v1, the episode's endpoint (set by the forwarder)
    OPENAI_API_KEY                      the episode's token; any other key is refused
    OPENAI_MODEL                        the model name the env asks agents to use
    GYMENVS_TASK_FILE                   a file holding the problem statement
    GYMENVS_WORKDIR                     where the agent works (/testbed for SWE tasks, the image's WORKDIR for Harbor tasks)
    GYMENVS_COMMAND_TIMEOUT             seconds an agent should let one command run

`command` is a bash command line run in the repository after the task's Python environment is
activated; the forwarder execs it, so the agent's exit ends the episode.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

#: Where the episode's directory (socket, task file, agent files) appears inside the container.
MOUNT = "/run/gymenvs"
#: Where `gymenvs swe install-agent` puts agents' virtual environments inside derived images.
AGENTS_ROOT = "/opt/gymenvs-agents"


@dataclass(frozen=True)
class AgentSpec:
    """How to run one agent. `files` are placed in MOUNT: a name is a resource of `gymenvs.swe.agents`,
    an absolute path a file of the host (placed under its base name);
    `requirements` and `image_suffix` describe an agent installed into a derived image (see install.py)."""

    name: str
    command: str
    environment: Mapping[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    #: pip requirements installed offline into the derived image's virtual environment.
    requirements: tuple[str, ...] = ()
    #: The derived image is the task image's name with "-<image_suffix>" added to its tag.
    image_suffix: str | None = None

    def file_contents(self) -> dict[str, bytes]:
        package = resources.files("gymenvs.swe.agents")
        return {Path(name).name: Path(name).read_bytes() if Path(name).is_absolute() else package.joinpath(name).read_bytes()
                for name in self.files}

    @property
    def venv(self) -> str:
        return f"{AGENTS_ROOT}/{self.name}"


REFERENCE = AgentSpec(
    name="reference",
    command=f"exec python3 {MOUNT}/reference_agent.py",
    files=("reference_agent.py",),
)

MINI_SWE_AGENT = AgentSpec(
    name="mini-swe-agent",
    command=(f'exec {AGENTS_ROOT}/mini-swe-agent/bin/mini --yolo --exit-immediately --model "openai/$OPENAI_MODEL" '
             f'--config mini.yaml --config {MOUNT}/mini-swe-agent.yaml '
             '--config "environment.timeout=${GYMENVS_COMMAND_TIMEOUT%.*}" --config "environment.cwd=$GYMENVS_WORKDIR" '
             '--task "$(cat "$GYMENVS_TASK_FILE")" --output /tmp/mini-swe-agent.traj.json'),
    environment={
        "MSWEA_CONFIGURED": "true",  # no first-run set-up prompt
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_GLOBAL_CONFIG_DIR": "/tmp/mini-swe-agent",
        "MSWEA_COST_TRACKING": "ignore_errors",  # the policy has no price
        "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",  # a refused call ends the run, as the episode has ended
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm would otherwise fetch its price list at import
    },
    files=("mini-swe-agent.yaml",),
    # litellm releases from 1.100 on import the optional `mcp` package whenever tools are passed.
    requirements=("mini-swe-agent==2.4.6", "litellm==1.83.0"),
    image_suffix="mini-swe-agent-2.4.6",
)

AGENTS: dict[str, AgentSpec] = {spec.name: spec for spec in (REFERENCE, MINI_SWE_AGENT)}


def agent_spec(agent: str | AgentSpec) -> AgentSpec:
    if isinstance(agent, AgentSpec):
        return agent
    if agent not in AGENTS:
        raise ValueError(f"agent={agent!r}: known agents are {sorted(AGENTS)}, or pass an AgentSpec")
    return AGENTS[agent]


def derived_image(image: str, spec: AgentSpec) -> str:
    """The image `spec` runs in for a task whose image is `image`."""
    if spec.image_suffix is None:
        return image
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:  # no tag given: docker's implicit "latest"
        name, tag = image, "latest"
    return f"{name}:{tag}-{spec.image_suffix}"
