"""The SWE-bench task family: repositories at a base commit with an issue to resolve, graded host-side as
the SWE-bench harness resolves an instance.

`gymnasium.make("gymenvs/SWE-v0")` is the container platform's tools env (`gymenvs.container`) with this
family, `gymenvs/SWEAgent-v0` its agent env. The rooms, one job each:

- `family.py`: `SWEFamily` and its options, what the container envs ask of the family;
- `tasks/`: dataset rows as `Task`s, fixture tasks and their upstream releases;
- `images.py`: each task's image name, and the fixture images built offline;
- `grading/`: grading in a fresh container, how tests run, log parsers, the harness's verdict,
  protected paths, validation, the predictions-file grader;
- `cli.py`: `gymenvs swe ...`.

Nothing here is imported by `import gymenvs`.
"""
