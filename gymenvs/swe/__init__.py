"""The SWE environments: a coding agent in a Docker container, graded host-side.

`gymnasium.make("gymenvs/SWE-v0")` builds `gymenvs.swe.env.SWEEnv`; `gymenvs/SWEAgent-v0` runs an
agent CLI in the container (`gymenvs.swe.agents`). The rooms, one job each:

- `tasks/`: dataset rows as `Task`s, fixture tasks and their upstream releases;
- `sandbox/`: the `Sandbox` protocol and its Docker backend, the persistent shell, the warm pool,
  image names and offline builds, output capping;
- `grading/`: grading in a fresh container, how tests run, log parsers, the harness's verdict,
  protected paths, the predictions-file grader;
- `agents/`: SWEAgent-v0; `env.py`: SWE-v0; `cli.py`: `gymenvs swe ...`.

Nothing here is imported by `import gymenvs`.
"""
