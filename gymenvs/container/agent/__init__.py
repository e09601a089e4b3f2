"""The agent harness: an agent program inside the task's container, its LLM calls served by the env
(`AgentEnv`: SWEAgent-v0, TerminalAgent-v0).

One job per module: `env` (`AgentEnv`), `options` (its config), `request` (`info["request"]`, and which
messages are new), `channel` (the host end: the episode's endpoint, and its unix socket), `connection` (one HTTP/1.1
connection of the agent, whatever carries it), `wire/` (the
three LLM wire formats), `process` (the agent's process), `upstream` (black-box mode), `messages`
(messages as text), `ahead` (the agent's endpoint in its container, and the CLI started ahead of its task),
`forwarder` (the in-container relay, stdlib only, where the channel cannot listen in the container: the agent's
connections over its exec stream), `bridge` (their host end, served by the channel), `specs` (which agents and how they
start), `reference_agent` (the shipped stdlib-only agent), `install` (agents installed offline into
derived images).
"""
