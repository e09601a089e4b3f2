"""TRL's wordle example (examples/scripts/openenv/wordle.py) on gymenvs' Wordle env, on CPU with the tiny model.

TRL's dataset repeats one prompt; rows without a `seed` column still give each GRPO group its own
secret word (and the group's members the same one).

    python examples/trl/wordle.py
"""

from common import print_rewards, train
from datasets import Dataset

from wrappers.trl import environment_factory


def reward_func(environments, **kwargs):  # as TRL's example writes it
    return [env.reward for env in environments]


def main() -> None:
    prompt = [{"role": "user", "content": "You are an expert Wordle solver. Use the tool `guess` to make a guess."}]
    dataset = Dataset.from_dict({"prompt": [prompt] * 16})
    Wordle = environment_factory("gymenvs/Wordle-v0", env_reward=False)
    trainer = train(Wordle, calls=[("guess", {"word": w}) for w in ("crane", "slate")], train_dataset=dataset,
                    reward_funcs=reward_func)
    print_rewards(trainer)
    print("secrets of the last batch:", [env.env.unwrapped.state()["secret"] for env in trainer.environments])


if __name__ == "__main__":
    main()
