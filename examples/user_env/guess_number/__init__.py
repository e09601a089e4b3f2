"""A user's own gymenvs environment, as a tiny package outside gymenvs: guess a secret number.

Importing the package registers `guess_number/GuessNumber-v0`, so each of these works:

    gymnasium.make("guess_number:guess_number/GuessNumber-v0")     # imports the package first
    gymenvs eval guess_number:guess_number/GuessNumber-v0 --policy guess_number.policy:bisect -n 20
    gymnasium.make_vec("guess_number:guess_number/GuessNumber-v0", num_envs=4, backend="process")

See docs/writing-envs.md for the pattern, and tests/test_user_env.py for every entry point it is run through.
"""

import gymnasium

import gymenvs

ENV_ID = "guess_number/GuessNumber-v0"

# A string entry point: the env module (and whatever it imports) loads only when an env is made.
# The vector entry point makes gymnasium.make_vec(ENV_ID, ...) a gymenvs ConcurrentVectorEnv.
gymnasium.register(ENV_ID, entry_point="guess_number.env:GuessNumberEnv", vector_entry_point=gymenvs.vector_entry_point(ENV_ID))
