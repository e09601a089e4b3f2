"""The coding-agent CLIs as the tests drive them: each one's wire format, system prompt, shell tool and compaction
switch, and calls of its own shell tool. Imported as `container.agent.cli_support` (pytest puts tests/ on the path);
tests/trl/rollout trains through the same CLIs."""

from __future__ import annotations

from dataclasses import dataclass

from .agent_support import TASKS, apply_patch


@dataclass(frozen=True)
class CLI:
    agent: str
    #: The wire format it speaks with its config (`info["request"]["wire"]`): a fallback to another would fail the test.
    wire: str
    #: Text the agent's own system prompt holds.
    system_prompt: str
    #: Its shell tool's name and the argument holding the command.
    shell_tool: str
    command_argument: str
    extra_arguments: tuple[tuple[str, str], ...] = ()
    #: A shell command run through the agent's own tool that prints "compaction-off" when the config or environment
    #: the agent was started with turns its history compaction off ("" for Codex, whose compaction is a side call).
    compaction_probe: str = ""

    def shell(self, command: str) -> dict:
        return {"name": self.shell_tool, "arguments": {self.command_argument: command, **dict(self.extra_arguments)}}


def json_setting_probe(path: str, keys: tuple[str, ...], off: object) -> str:
    """Prints compaction-off when the JSON file at `path` (shell-expanded) holds `off` under `keys` (the words are
    split in the command, which the agent may echo)."""
    lookup = "".join(f"[{key!r}]" for key in keys)
    test = f"json.load(open(sys.argv[1])){lookup} == {off!r}"
    return f"""python3 -c "import json, sys; print('compaction-' + 'off' if {test} else 'on')" {path}"""


CLIS = {
    cli.agent: cli
    for cli in (
        CLI("opencode", "chat", "You are opencode, an interactive CLI tool", "bash", "command",
            (("description", "Run a command"),), json_setting_probe('"$OPENCODE_CONFIG"', ("compaction", "auto"), False)),
        CLI("pi", "chat", "You are an expert coding assistant operating inside pi", "bash", "command", (),
            json_setting_probe('"$PI_CODING_AGENT_DIR/settings.json"', ("compaction", "enabled"), False)),
        CLI("claude-code", "anthropic", "You are a Claude agent, built on Anthropic's Claude Agent SDK.", "Bash", "command",
            (("description", "Run a command"),), 'test "$DISABLE_AUTO_COMPACT" = 1 && echo compaction-"off"'),
        CLI("codex", "responses", "You are a coding agent running in the Codex CLI", "exec_command", "cmd"),
    )
}
#: The fixture dataset's instance ids.
FIXTURES = sorted(TASKS)


def gold_patch_call(cli: CLI, instance_id: str) -> dict:
    """A call of the agent's own shell tool applying the gold patch of `instance_id`."""
    return cli.shell(apply_patch(TASKS[instance_id].patch)["arguments"]["command"])
