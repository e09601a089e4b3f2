"""TRL's catch example (examples/scripts/openenv/catch.py) on gymenvs' Catch env, on CPU with the tiny model.

TRL's reward reads `env.done` and `env.reward` and clamps a miss (-1) to 0.

    python examples/trl/catch.py
"""

from common import print_rewards, train
from datasets import Dataset

from wrappers.trl import environment_factory


def reward_from_env(environments, **kwargs):  # as TRL's example writes it
    return [max(env.reward, 0.0) if env.done else 0.0 for env in environments]


def main() -> None:
    prompt = [{"role": "user", "content": "Catch the ball: `move(direction)` left or right, or `stay()`."}]
    dataset = Dataset.from_dict({"prompt": [prompt] * 16})
    Catch = environment_factory("gymenvs/Catch-v0", env_reward=False, rows=3)
    calls = [("move", {"direction": "left"}), ("move", {"direction": "right"}), ("stay", {})]
    trainer = train(Catch, calls=calls, train_dataset=dataset, reward_funcs=reward_from_env)
    print_rewards(trainer)


if __name__ == "__main__":
    main()
