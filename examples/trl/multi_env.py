"""TRL's multi_env example (examples/scripts/openenv/multi_env.py) with TRL's dict `environment_factory`:
Wordle and Catch in one run, on CPU with the tiny model.

The dataset is TRL's documented dict form, only an `environment` column. Each reward function
scores its own env and returns None for the other's rollouts (TRL ignores None). With
`env_reward=False` TRL logs exactly these two reward functions: nothing is counted twice.

    python examples/trl/multi_env.py
"""

from common import print_rewards, train
from datasets import Dataset

from wrappers.trl import environment_factory

Wordle = environment_factory("gymenvs/Wordle-v0", name="Wordle", env_reward=False)
Catch = environment_factory("gymenvs/Catch-v0", name="Catch", env_reward=False, rows=3)


def wordle_reward(environments, **kwargs):
    return [env.reward if isinstance(env, Wordle) else None for env in environments]


def catch_reward(environments, **kwargs):  # a miss (-1) is clamped to 0, as in TRL's example
    return [(max(env.reward, 0.0) if env.done else 0.0) if isinstance(env, Catch) else None for env in environments]


def main() -> None:
    dataset = Dataset.from_dict({"environment": ["wordle", "catch"] * 8})
    calls = [("guess", {"word": "crane"}), ("move", {"direction": "left"}), ("stay", {})]
    trainer = train({"wordle": Wordle, "catch": Catch}, calls=calls, train_dataset=dataset,
                    reward_funcs=[wordle_reward, catch_reward])
    print_rewards(trainer)


if __name__ == "__main__":
    main()
