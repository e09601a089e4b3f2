"""The SWE environment: a coding agent in a Docker container, graded host-side.

`gymnasium.make("gymenvs/SWE-v0")` builds `gymenvs.swe.env.SWEEnv`. The modules, one job each:
`tasks` (dataset rows), `images` (names and offline builds), `sandbox` (containers), `shell` (the
persistent shell), `output` (capping and decoding), `patches` (diff filtering), `logparsers`,
`grading`, `env` and `cli` (`gymenvs swe ...`). Nothing here is imported by `import gymenvs`.
"""
