"""Many episodes over 64 slots: every transcript must be the one its own seed and actions give.

Each slot plays Wordle episodes with its own seeds and its own random guesses; episodes end at
different turns and finished slots are reset (with a fresh seed) while the others keep playing.
Every finished episode is then replayed in a single env: any cross-talk between slots (a reply
delivered to the wrong slot, shared state, a stale observation) would change some transcript.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import gymenvs  # noqa: F401
from gymenvs.envs.wordle import load_word_list

pytestmark = pytest.mark.timeout(300)

NUM_SLOTS = 64
EPISODES = 1_000


def new_transcript(seed: int, observation: str) -> dict:
    return {"seed": seed, "observations": [observation], "actions": [], "rewards": []}


def play(envs: gym.vector.VectorEnv, rng: np.random.Generator) -> list[dict]:
    """Play until EPISODES episodes have finished; each finished episode's transcript."""
    words = load_word_list("wordle_answers")
    next_seed = 10_000
    seeds = list(range(next_seed, next_seed + NUM_SLOTS))
    next_seed += NUM_SLOTS
    observations, _ = envs.reset(seed=seeds)
    transcripts = [new_transcript(seed, observation) for seed, observation in zip(seeds, observations)]
    finished: list[dict] = []
    while len(finished) < EPISODES:
        # Random guesses, some of them invalid; a few slots sit a turn out (partial steps).
        actions = [
            None if rng.random() < 0.1 else (str(rng.choice(words)) if rng.random() < 0.9 else "zzzzz")
            for _ in range(NUM_SLOTS)
        ]
        observations, rewards, terminated, truncated, _ = envs.step(actions)
        ended = np.zeros(NUM_SLOTS, dtype=bool)
        for i, action in enumerate(actions):
            if action is None:
                assert observations[i] == transcripts[i]["observations"][-1]
                continue
            transcripts[i]["actions"].append(action)
            transcripts[i]["observations"].append(observations[i])
            transcripts[i]["rewards"].append(float(rewards[i]))
            ended[i] = terminated[i] or truncated[i]
        if ended.any():
            new_seeds = [None] * NUM_SLOTS
            for i in np.flatnonzero(ended):
                finished.append(transcripts[i])
                new_seeds[i] = next_seed
                next_seed += 1
            observations, _ = envs.reset(seed=new_seeds, options={"reset_mask": ended})
            for i in np.flatnonzero(ended):
                transcripts[i] = new_transcript(new_seeds[i], observations[i])
    return finished


def replay(transcript: dict, env: gym.Env) -> dict:
    observation, _ = env.reset(seed=transcript["seed"])
    observations, rewards = [observation], []
    for action in transcript["actions"]:
        observation, reward, *_ = env.step(action)
        observations.append(observation)
        rewards.append(float(reward))
    return {**transcript, "observations": observations, "rewards": rewards}


# Ray: 8 actors hosting 8 slots each (an actor is a process of its own; 64 would be 6 GB).
@pytest.mark.slow
@pytest.mark.parametrize(("backend", "settings"), [("thread", {}), ("process", {}), ("ray", {"max_workers": 8})])
def test_a_thousand_episodes_over_64_slots_without_cross_talk(backend, settings, request):
    if backend == "ray":
        request.getfixturevalue("ray_session")
    with gym.make_vec(
        "gymenvs/Wordle-v0", num_envs=NUM_SLOTS, backend=backend, autoreset_mode="Disabled", **settings
    ) as envs:
        finished = play(envs, np.random.default_rng(0))
    assert len(finished) >= EPISODES
    assert len({transcript["seed"] for transcript in finished}) == len(finished)
    assert sum(max(t["rewards"], default=0) for t in finished) > 0  # some episodes were won...
    assert len({len(t["actions"]) for t in finished}) > 3  # ...and they ended at different turns
    single = gym.make("gymenvs/Wordle-v0")
    for transcript in finished:
        assert replay(transcript, single) == transcript
