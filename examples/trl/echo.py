"""TRL's echo example (examples/scripts/openenv/echo.py) on gymenvs' Echo env, on CPU with the tiny model.

    python examples/trl/echo.py
"""

from common import print_rewards, train
from datasets import Dataset

from wrappers.trl import environment_factory


def reward_func(environments, **kwargs):  # as TRL's example writes it
    return [env.reward for env in environments]


def main() -> None:
    prompts = ["Try to echo 'Hello World!' in the environment.", "Make the environment echo 'Goodbye World!'"]
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in prompts]})
    # env_reward=False: reward_func scores the episode, so TRL adds no second column for the env's reward.
    Echo = environment_factory("gymenvs/Echo-v0", env_reward=False, max_turns=2)
    trainer = train(Echo, calls=[("echo", {"message": "Hello World!"})], train_dataset=dataset, reward_funcs=reward_func)
    print_rewards(trainer)


if __name__ == "__main__":
    main()
