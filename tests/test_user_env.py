"""A user's own env works everywhere a built-in one does.

examples/user_env/guess_number is copied into a temporary folder outside gymenvs, which is put on
`sys.path` (never on PYTHONPATH: worker processes and Ray actors must find it by themselves), and
run through every entry point: `gymnasium.make` with a `module:EnvId` id, `check_env`, the CLI
(`list` and `eval` with `--import`, `module:EnvId` and `--policy module:name`), `make_vec` and
`ConcurrentVectorEnv` on every backend, and both TRL paths. examples/benchmarks/user_env_matrix.py
prints the same matrix as a table.
"""

from __future__ import annotations

import os

os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1")

import copy  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import gymnasium as gym  # noqa: E402
import pytest  # noqa: E402
from backend_support import backend_params  # noqa: E402

import gymenvs  # noqa: E402
from gymenvs.cli import main  # noqa: E402
from gymenvs.core import check_env  # noqa: E402
from wrappers.vector import ConcurrentVectorEnv  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "user_env" / "guess_number"
PACKAGE = "guess_number"
ENV_ID = "guess_number/GuessNumber-v0"
MODULE_ID = f"{PACKAGE}:{ENV_ID}"  # gymnasium.make imports the package, which registers ENV_ID
#: (backend, its own settings): every way a vector env runs its slots.
BACKENDS = {
    "thread": {"backend": "thread"},
    "spawn": {"backend": "process", "start_method": "spawn"},
    "forkserver": {"backend": "process", "start_method": "forkserver"},
    "ray": {"backend": "ray"},
}
GUESS_50 = json.dumps({"name": "guess", "arguments": {"number": 50}})


@pytest.fixture(scope="module")
def user_package(tmp_path_factory):
    """The example package in a folder of its own, importable from this process only; unregistered afterwards."""
    folder = tmp_path_factory.mktemp("user_code")
    shutil.copytree(EXAMPLE, folder / PACKAGE)
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))
    for name in [name for name in sys.modules if name == PACKAGE or name.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]
    gym.registry.pop(ENV_ID, None)


@pytest.fixture
def backend_settings(request, user_package):
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return BACKENDS[request.param]


def test_gymnasium_make_with_a_module_id_imports_the_users_module(user_package):
    assert PACKAGE not in sys.modules
    env = gym.make(MODULE_ID, high=100)
    env.reset(seed=0, options={"secret": 50})
    _, reward, terminated, _, _ = env.step(GUESS_50)
    assert (reward, terminated, env.unwrapped.state()["guesses"]) == (1.0, True, [50])


def test_the_users_constructor_names_a_misspelled_argument_and_the_accepted_ones(user_package):
    expected = r"unknown argument hihg=3 \(did you mean 'high'\?\)\. Accepted: high, max_turns, render_mode"
    with pytest.raises(ValueError, match=expected):
        gym.make(MODULE_ID, hihg=3)


def test_check_env_passes_the_users_env(user_package):
    check_env(gym.make(MODULE_ID), skip_render_check=False)


def test_cli_lists_and_evaluates_the_users_env_with_the_users_policy(user_package, capsys):
    assert main(["list", "--import", PACKAGE]) == 0
    # the column is as wide as the longest id listed (other packages imported in this session register ids too)
    listed = capsys.readouterr().out
    assert re.search(r"^guess_number/GuessNumber-v0 +Guess a secret number between 1 and `high`\.$", listed, re.M)
    assert main(["eval", MODULE_ID, "--policy", f"{PACKAGE}.policy:bisect", "-n", "10", "--no-progress"]) == 0
    table = capsys.readouterr().out
    assert "success rate     100.0%" in table and "failed episodes  0" in table
    assert main(["eval", ENV_ID, "--import", PACKAGE, "--policy", f"{PACKAGE}.policy:bisect", "-n", "2", "--no-progress"]) == 0


def test_the_gymenvs_command_finds_the_users_module_in_its_working_directory(user_package):  # eval and play
    """As `python -m` does, though a console script's own folder is on its path, not the working directory."""
    command = Path(sys.executable).with_name("gymenvs")
    result = subprocess.run(
        [str(command), "eval", MODULE_ID, "--policy", f"{PACKAGE}.policy:bisect", "-n", "3", "--no-progress"],
        cwd=user_package, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "success rate     100.0%" in result.stdout
    played = subprocess.run(
        [str(command), "play", ENV_ID, "--import", PACKAGE, "--seed", "0"],
        cwd=user_package, input='{"name": "guess", "arguments": {"number": 50}}\n:quit\n', capture_output=True, text=True,
        timeout=120,
    )
    assert played.returncode == 0, played.stderr
    assert "I am thinking of a whole number from 1 to 100." in played.stdout and "50: " in played.stdout


@pytest.mark.parametrize("backend_settings", backend_params(BACKENDS), indirect=True)
def test_make_vec_and_concurrent_vector_env_build_the_users_env_in_every_worker(backend_settings):
    """Workers find the user's module although it is on no path they start with: they register the parent's ids."""
    vector_env = gymenvs.make_vec(MODULE_ID, num_envs=2, **backend_settings)
    try:
        with pytest.raises(gymenvs.ResetOptionsError, match=r"^reset option secret='x': expected a whole number from 1 to 100"):
            vector_env.reset(options={"secret": "x"})  # the user's env says so; no slot is rebuilt
        vector_env.reset(seed=0, options={"secret": 50})
        _, rewards, terminated, _, infos = vector_env.step([GUESS_50, GUESS_50])
        assert (list(rewards), list(terminated), "error" in infos) == ([1.0, 1.0], [True, True], False)
    finally:
        vector_env.close()
    # A factory that makes the env by its plain id, as a user writes one for ConcurrentVectorEnv.
    vector_env = ConcurrentVectorEnv([functools.partial(gym.make, ENV_ID, high=10)], **backend_settings)
    try:
        observations, infos = vector_env.reset(seed=0)
        assert "error" not in infos, observations
        assert observations[0].startswith("I am thinking of a whole number from 1 to 10.")
    finally:
        vector_env.close()


def test_worker_registrations_carry_the_users_ids_and_folder_as_plain_names(user_package):
    """What a worker installs: the ids it lacks, a class entry point named by its module, the folder it lacks."""
    from guess_number.env import GuessNumberEnv

    from gymenvs.env_ids import worker_registrations

    gym.register("mine/Guess-v0", entry_point=GuessNumberEnv, kwargs={"high": 7})
    try:
        registrations = worker_registrations()
    finally:
        del gym.registry["mine/Guess-v0"]
    assert str(user_package) in registrations.search_path
    sys.path.remove(str(user_package))
    try:
        registrations.install()
        assert sys.path[-1] == str(user_package)  # appended: it never shadows the worker's own modules
        assert gym.spec("mine/Guess-v0").entry_point == "guess_number.env:GuessNumberEnv"
        assert gym.make("mine/Guess-v0").reset(seed=0)[0].startswith("I am thinking of a whole number from 1 to 7.")
    finally:
        sys.path.remove(str(user_package))
        sys.path.insert(0, str(user_package))
        del gym.registry["mine/Guess-v0"]


@pytest.fixture
def tiny(_tiny, user_package):
    """A copy of the session's tiny model (training changes it), and its tokenizer."""
    model, tokenizer = _tiny
    return copy.deepcopy(model), tokenizer


@pytest.mark.parametrize("backend_settings", backend_params(BACKENDS), indirect=True)
def test_make_rollout_func_plays_the_users_env_on_every_backend(tiny, backend_settings):
    from wrappers.trl import TransformersGenerator, evaluate_rollouts

    model, tokenizer = tiny
    settings = dict(backend_settings)
    backend = settings.pop("backend")
    [episode] = evaluate_rollouts(
        MODULE_ID, TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id), tokenizer,
        num_episodes=1, max_completion_length=24, max_tokens_per_turn=8, backend=backend, vector_kwargs=settings,
    )
    assert (episode.outcome, episode.error) == ("model", None), episode.messages
    assert episode.turns >= 1
    assert any("I am thinking of a whole number" in str(message["content"]) for message in episode.messages)


def test_environment_factory_trains_on_the_users_env(tiny, tmp_path):
    """TRL's own tool loop builds the env in the trainer's process: one training step with a real GRPOTrainer."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from wrappers.trl import CPU_TRAINING_ARGS, environment_factory

    model, tokenizer = tiny
    Environment = environment_factory(MODULE_ID, high=10)
    config = GRPOConfig(
        output_dir=str(tmp_path), **CPU_TRAINING_ARGS, per_device_train_batch_size=2, num_generations=2,
        max_completion_length=16, max_steps=1, max_tool_calling_iterations=1, logging_steps=1,
    )
    prompt = [{"role": "user", "content": "Play."}]
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, args=config, environment_factory=Environment,
        train_dataset=Dataset.from_list([{"prompt": prompt, "seed": 0}] * 2),
    )
    trainer.train()
    assert [type(environment.env.unwrapped).__name__ for environment in trainer.environments] == ["GuessNumberEnv"] * 2
    assert all(environment.trainable for environment in trainer.environments)
