"""Options are pydantic models: a bad value or an unknown option is a ValueError naming it, at construction."""

from __future__ import annotations

import pytest

import gymenvs  # noqa: F401  (registers the envs)
from wrappers.trl import Sampling, environment_factory, make_rollout_func
from wrappers.trl.async_grpo.worker import WorkerOptions
from wrappers.trl.serve.inference_server import CompletionRequest


def test_an_unknown_option_names_itself_and_what_is_allowed() -> None:
    with pytest.raises(ValueError, match=r"unknown option\(s\) 'max_tokens_pre_turn'; allowed: .*max_tokens_per_turn"):
        make_rollout_func("gymenvs/Catch-v0", max_tokens_pre_turn=4)


def test_an_env_keyword_given_as_an_option_is_an_error_that_says_where_it_goes() -> None:
    with pytest.raises(ValueError, match=r"unknown option\(s\) 'rows'; allowed: .*env_kwargs.*"
                                         r"\(the env's own keywords go in env_kwargs=\{\.\.\.\}\)$"):
        make_rollout_func("gymenvs/Catch-v0", rows=2)
    rollout = make_rollout_func("gymenvs/Catch-v0", env_kwargs={"rows": 2})
    assert rollout.env_kwargs == {"rows": 2}
    rollout.close()


def test_with_several_envs_every_unknown_option_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown option.*'rows'"):
        make_rollout_func(["gymenvs/Catch-v0", "gymenvs/Echo-v0"], rows=2)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokens_per_turn": True}, "max_tokens_per_turn=True: expected a positive integer or None"),
        ({"group_size": 2.0}, "group_size=2.0: expected a positive integer or None"),
        ({"show_tools": "no"}, "show_tools='no'"),
    ],
)
def test_rollout_options_are_strict(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_rollout_func("gymenvs/Echo-v0", **options)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"top_p": 0.0}, "top_p=0.0: expected a probability mass in"),
        ({"top_k": -1}, "top_k=-1: expected an integer >= 0"),
        ({"min_p": 1.5}, "min_p=1.5"),
        ({"temperature": "hot"}, "temperature='hot'"),
        ({"temprature": 0.5}, "unknown option 'temprature'"),
    ],
)
def test_sampling_is_checked_when_built(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Sampling(**fields)


def test_a_completion_request_reads_sampling_as_sampling_does() -> None:
    request = CompletionRequest.model_validate({"model": "m", "prompt": [1], "top_k": -1, "min_p": 0, "temperature": 1})
    assert request.sampling() == Sampling(temperature=1.0)
    with pytest.raises(ValueError, match="greater than 0"):
        CompletionRequest.model_validate({"model": "m", "prompt": [1], "temperature": 0})


def test_worker_and_factory_options_name_the_bad_value() -> None:
    good = {"num_generations": 2, "groups_in_flight": 1, "max_staleness": 0, "seed": 0, "queue_maxsize": 0}
    with pytest.raises(ValueError, match="request_timeout_s=0: expected a positive number of seconds"):
        WorkerOptions(**good, request_timeout_s=0)
    with pytest.raises(ValueError, match="groups_in_flight=0: expected a positive integer"):
        WorkerOptions(**{**good, "groups_in_flight": 0}, request_timeout_s=1.0)
    with pytest.raises(ValueError, match="env_reward='yes'"):
        environment_factory("gymenvs/Catch-v0", env_reward="yes")
