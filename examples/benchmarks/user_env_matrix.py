"""Which entry points a user's own env works on, per backend: the matrix of docs/writing-envs.md.

Copies examples/user_env/guess_number into a temporary folder outside gymenvs, puts that folder on
`sys.path` only (no PYTHONPATH: workers must find the module by themselves), and runs the env
through every entry point on every backend it has, printing one row per entry point:

    python examples/benchmarks/user_env_matrix.py

A cell is "pass", or "FAIL (n)" with the error's first line under the table; "-" where an entry point has no backend choice
(TRL's `environment_factory` builds its envs in the trainer's process). tests/test_user_env.py asserts the same.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1")

EXAMPLE = Path(__file__).resolve().parents[1] / "user_env" / "guess_number"
ENV_ID = "guess_number/GuessNumber-v0"
MODULE_ID = f"guess_number:{ENV_ID}"
GUESS_50 = json.dumps({"name": "guess", "arguments": {"number": 50}})
BACKENDS = {
    "in-process": None,
    "thread": {"backend": "thread"},
    "process (spawn)": {"backend": "process", "start_method": "spawn"},
    "process (forkserver)": {"backend": "process", "start_method": "forkserver"},
    "ray": {"backend": "ray"},
}


def gym_make(_: None) -> None:
    import gymnasium as gym

    env = gym.make(MODULE_ID)
    env.reset(seed=0, options={"secret": 50})
    assert env.step(GUESS_50)[1] == 1.0


def check_env(_: None) -> None:
    import gymnasium as gym

    from gymenvs.core import check_env

    check_env(gym.make(MODULE_ID))


def cli(_: None) -> None:
    from gymenvs.cli import main

    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(["list", "--import", "guess_number"]) == 0
        assert main(["eval", MODULE_ID, "--policy", "guess_number.policy:bisect", "-n", "5", "--no-progress"]) == 0
    assert ENV_ID in out.getvalue() and "success rate     100.0%" in out.getvalue()


class NotApplicable(Exception):
    """The entry point has no way to choose this backend setting: the cell is "-"."""


def cli_bench(settings: dict | None) -> None:
    from gymenvs.cli import main

    if settings is not None and settings.get("start_method") == "spawn":
        raise NotApplicable  # `gymenvs bench --backend process` takes the default start method (forkserver)
    vector = [] if settings is None else ["--num-envs", "2", "--backend", settings["backend"]]
    policy = ["--policy", "guess_number.policy:bisect", "-n", "4", *vector]
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(["bench", ENV_ID, "--import", "guess_number", *policy]) == 0
        assert main(["bench", MODULE_ID, *policy]) == 0
    assert len(re.findall(r"^episodes +[4-9]$", out.getvalue(), re.M)) == 2, out.getvalue()


def make_vec(settings: dict) -> None:
    import gymenvs

    with contextlib.closing(gymenvs.make_vec(MODULE_ID, num_envs=2, **settings)) as envs:
        envs.reset(seed=0, options={"secret": 50})
        rewards = envs.step([GUESS_50, GUESS_50])[1]
    assert list(rewards) == [1.0, 1.0], rewards


def concurrent_vector_env(settings: dict) -> None:
    import gymnasium as gym

    from wrappers.vector import ConcurrentVectorEnv

    with contextlib.closing(ConcurrentVectorEnv([functools.partial(gym.make, ENV_ID)], **settings)) as envs:
        observations, infos = envs.reset(seed=0)
    assert "error" not in infos, observations[0]


def make_rollout_func(settings: dict) -> None:
    from wrappers.trl import TransformersGenerator, evaluate_rollouts

    model, tokenizer = _tiny()
    settings = dict(settings)
    [episode] = evaluate_rollouts(
        MODULE_ID, TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id), tokenizer, num_episodes=1,
        max_completion_length=24, max_tokens_per_turn=8, backend=settings.pop("backend"), vector_kwargs=settings,
    )
    assert episode.outcome == "model" and episode.error is None, episode.error


def environment_factory(_: None) -> None:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from wrappers.trl import CPU_TRAINING_ARGS, environment_factory

    model, tokenizer = _tiny()
    with tempfile.TemporaryDirectory() as output:
        config = GRPOConfig(output_dir=output, **CPU_TRAINING_ARGS, per_device_train_batch_size=2, num_generations=2,
                            max_completion_length=16, max_steps=1, max_tool_calling_iterations=1)
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config,
                              environment_factory=environment_factory(MODULE_ID, high=10),
                              train_dataset=Dataset.from_list([{"prompt": [{"role": "user", "content": "Play."}]}] * 2))
        trainer.train()
    assert all(environment.trainable for environment in trainer.environments)


@functools.cache
def _tiny():
    from wrappers.trl import tiny_model

    return tiny_model(seed=0)


#: Entry point -> (how to run it, whether it runs on a vector backend: True, False, or None for both).
ENTRY_POINTS: dict[str, tuple[Callable[[dict | None], None], bool | None]] = {
    "gymnasium.make('module:EnvId')": (gym_make, False),
    "check_env": (check_env, False),
    "CLI list/eval --import, module:EnvId, --policy": (cli, False),
    "CLI bench --import, module:EnvId, --policy": (cli_bench, None),
    "gymenvs.make_vec / gymnasium.make_vec": (make_vec, True),
    "ConcurrentVectorEnv(partial(gym.make, id))": (concurrent_vector_env, True),
    "make_rollout_func": (make_rollout_func, True),
    "environment_factory (GRPOTrainer, 1 step)": (environment_factory, False),
}


#: The first line of each failure, printed under the table.
FAILURES: list[str] = []


def cell(run: Callable[[dict | None], None], settings: dict | None, on_backends: bool | None) -> str:
    if on_backends is not None and (settings is not None) != on_backends:
        return "-"
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            run(settings)
    except NotApplicable:
        return "-"
    except (Exception, SystemExit) as exc:  # a cell reports any failure (argparse exits), and the matrix goes on
        FAILURES.append(f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:150]}")
        return f"FAIL ({len(FAILURES)})"
    return "pass"


def main() -> int:
    import ray

    folder = tempfile.mkdtemp(prefix="user_code_")
    shutil.copytree(EXAMPLE, Path(folder) / "guess_number")
    sys.path.insert(0, folder)
    # A plain local Ray: nothing tells its workers where the folder is.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    rows = []
    try:
        for name, (run, on_backends) in ENTRY_POINTS.items():
            cells = {backend: cell(run, settings, on_backends) for backend, settings in BACKENDS.items()}
            rows.append((name, cells))
    finally:
        ray.shutdown()
        shutil.rmtree(folder)
    width = max(len(name) for name, _ in rows)
    columns = {backend: max(len(backend), *(len(cells[backend]) for _, cells in rows)) for backend in BACKENDS}
    print(f"| {'entry point':<{width}} | " + " | ".join(f"{backend:<{columns[backend]}}" for backend in BACKENDS) + " |")
    print(f"|{'-' * (width + 2)}|" + "|".join("-" * (columns[backend] + 2) for backend in BACKENDS) + "|")
    for name, cells in rows:
        print(f"| {name:<{width}} | " + " | ".join(f"{cells[backend]:<{columns[backend]}}" for backend in BACKENDS) + " |")
    for number, failure in enumerate(FAILURES, 1):
        print(f"({number}) {failure}")
    failed = len(FAILURES)
    print(f"\ncells: {sum(value == 'pass' for _, cells in rows for value in cells.values())} pass, {failed} fail")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
