"""Agent programs inside the task container, their LLM calls served by the env (SWEAgent-v0).

`gymnasium.make("gymenvs/SWEAgent-v0", agent=...)` builds `env.SWEAgentEnv`. The modules, one job
each: `channel` (the host end: an HTTP endpoint on a per-episode unix socket), `forwarder` (the
in-container end, stdlib only), `messages` (chat-completions payloads), `specs` (which agents and
how they start), `reference_agent` (the shipped stdlib-only agent), `install` (agents installed
offline into derived images) and `env`. Tasks, sandboxes, grading and reaping come from
`gymenvs.swe`.
"""
