"""One tool schema: TRL's `environment_factory` and `make_rollout_func` show a model the same prompt.

The factory path runs a real `GRPOTrainer`: TRL resets the env, appends its first observation to the
prompt and renders it with the tools it derives from the class's methods (`get_json_schema`). The
rollout path renders the env's `tool_schemas()` itself. For every built-in env the two token
sequences must be equal: same tools, same order, same first message.
"""

import os

os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1")

import gymnasium as gym  # noqa: E402
import pytest  # noqa: E402

import gymenvs  # noqa: E402

#: Each built-in env id with the kwargs it is rendered with.
RENDERED = {
    "gymenvs/Echo-v0": {},
    "gymenvs/ReasoningGym-v0": {},
    "gymenvs/Wordle-v0": {},
    "gymenvs/Sudoku-v0": {},
    "gymenvs/Catch-v0": {},
    "gymenvs/TextArena-v0": {},  # Tower of Hanoi: two typed tools
    "gymenvs/MiniWoB-v0": {},  # four tools, one `int | None`
    "gymenvs/SWE-v0": {},  # five tools; needs the engine and the fixture images
    "gymenvs/Terminal-v0": {},  # SWE-v0's five tools on a Harbor fixture task; needs the engine
}
#: Built-in envs whose prompt neither path renders from tools, and why.
NOT_RENDERED = {
    "gymenvs/SWEAgent-v0": "hosts an agent: no tools of its own; its prompts are the agent's requests, "
    "and environment_factory refuses it (test_swe_agent_env_has_no_factory_prompt)",
    "gymenvs/TerminalAgent-v0": "hosts an agent, as SWEAgent-v0 does",
}
DOCKER_ENVS = ("gymenvs/SWE-v0", "gymenvs/Terminal-v0")
PROMPT = [{"role": "system", "content": "You play games."}, {"role": "user", "content": "Play."}]
SEED = 7


class Rendered(Exception):
    """Raised from TRL's generation step to hand the prompt it rendered back to the test."""

    def __init__(self, prompt_ids):
        super().__init__("rendered")
        self.prompt_ids = prompt_ids


def test_every_built_in_env_is_covered():
    assert set(RENDERED) | set(NOT_RENDERED) == set(gymenvs.list_envs())


@pytest.fixture(scope="module")
def tiny():
    from wrappers.trl import tiny_model

    return tiny_model(seed=0)


@pytest.fixture
def env_kwargs(request):
    env_id = request.param
    if env_id == "gymenvs/SWE-v0":
        request.getfixturevalue("swe_images")
    if env_id == "gymenvs/Terminal-v0":
        request.getfixturevalue("terminal_images")
    return env_id, RENDERED[env_id]


def factory_prompt_ids(env_id, kwargs, tiny, tmp_path):
    """The prompt TRL's GRPOTrainer renders for the env's first observation, from `environment_factory`."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from wrappers.trl import CPU_TRAINING_ARGS, environment_factory

    model, tokenizer = tiny
    config = GRPOConfig(
        output_dir=str(tmp_path), **CPU_TRAINING_ARGS,
        per_device_train_batch_size=2, num_generations=2, max_completion_length=8, max_steps=1,
    )
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, args=config,
        environment_factory=environment_factory(env_id, **kwargs),
        train_dataset=Dataset.from_list([{"prompt": PROMPT, "seed": SEED}] * 2),
    )

    def stop_before_generating(prompt_ids, *args, **kwargs):
        raise Rendered(prompt_ids)

    trainer._generate_single_turn = stop_before_generating
    try:
        with pytest.raises(Rendered) as rendered:
            trainer.train()
    finally:
        for environment in trainer._environment_pool[None]:
            environment._close()
    return list(rendered.value.prompt_ids[0])


def rollout_prompt_ids(env_id, kwargs, tokenizer):
    """The prompt `make_rollout_func` renders for the env's first observation."""
    from wrappers.trl import Completion, make_rollout_func

    class EndAtOnce:
        def generate(self, prompts, max_tokens):
            return [Completion([tokenizer.eos_token_id], [0.0], "stop") for _ in prompts]

    rollout = make_rollout_func(env_id, env_kwargs=kwargs)
    try:
        (episode,) = rollout.run(
            [PROMPT], EndAtOnce(), tokenizer, rows=[{"prompt": PROMPT, "seed": SEED}], max_completion_length=512
        )
    finally:
        rollout.close()
    return episode.prompt_ids


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")
@pytest.mark.parametrize(
    "env_kwargs",
    [pytest.param(env_id, marks=[pytest.mark.docker] if env_id in DOCKER_ENVS else []) for env_id in RENDERED],
    indirect=True,
)
def test_environment_factory_and_make_rollout_func_render_the_same_prompt(env_kwargs, tiny, tmp_path):
    env_id, kwargs = env_kwargs
    tokenizer = tiny[1]
    through_trl = factory_prompt_ids(env_id, kwargs, tiny, tmp_path)
    through_rollout = rollout_prompt_ids(env_id, kwargs, tokenizer)
    assert tokenizer.decode(through_rollout) == tokenizer.decode(through_trl)
    assert through_rollout == through_trl
    tools = gym.make(env_id, **kwargs)
    try:
        names = [schema["function"]["name"] for schema in tools.unwrapped.tool_schemas()]
    finally:
        tools.close()
    assert names and all(f'"name": "{name}"' in tokenizer.decode(through_trl) for name in names)


def test_swe_agent_env_has_no_factory_prompt():
    from wrappers.trl import environment_factory

    with pytest.raises(ValueError, match="declares no tools"):
        environment_factory("gymenvs/SWEAgent-v0")


def test_the_reference_agents_hand_written_tools_are_what_tool_makes_for_their_signatures():
    """reference_agent.py runs in task containers on the stdlib alone, so its TOOLS are written out by hand:
    they must be exactly the schemas `@tool` makes for the same signatures and descriptions."""
    from gymenvs.container.agent import reference_agent
    from gymenvs.core.tools import function_schema, tool_docstring

    def bash(self, command: str): ...

    def submit(self): ...

    hand_written = {schema["function"]["name"]: schema for schema in reference_agent.TOOLS}
    assert sorted(hand_written) == ["bash", "submit"]
    for function in (bash, submit):
        function.__doc__ = tool_docstring(hand_written[function.__name__])
        assert hand_written[function.__name__] == function_schema(function)
