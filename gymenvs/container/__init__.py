"""The container platform: envs whose episode runs in a container, for any task family, on any runtime.

A container env is one of two ways of acting crossed with a task family:

- `tools_env.ToolsEnv`: the policy acts through tools (bash, file tools, submit): SWE-v0, Terminal-v0;
- `agent/`: `AgentEnv`, an agent program acts and its LLM calls are the observations: SWEAgent-v0,
  TerminalAgent-v0;

each handed a `family.TaskFamily` object (SWE-bench rows: `gymenvs.swe`; Harbor folders:
`gymenvs.terminal`; a user's own: docs/writing-task-families.md) and a `runtime.Runtime`, through which
every engine operation goes. The rest, one job per module: `env` (the base: task, container, grading),
`config` (the env's options), `shell` (the persistent shell), `pool` (warm containers), `images` (the
offline base image), `output` (capping command output), `reaper` (what dead processes left),
`validation` (the verdict machinery every family's validation shares).

This package imports no task family, and nothing here is imported by `import gymenvs`.
"""
