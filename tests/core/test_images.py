"""Text+image observations through the stack: the space gymnasium's checker accepts, OpenAI-style
content blocks, the vector env, TRL's multimodal tool results, and the text view for text-only models."""

import base64
import io
import logging
import os
from typing import Any, Literal

# Set before transformers or trl are imported: nothing may be fetched from a hub here.
os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import PIL.Image as PIL
from gymnasium.utils.env_checker import check_env  # noqa: E402

from gymenvs.core import Outcome, TextEnv, content_blocks, text_image_space, text_view, tool  # noqa: E402

COLORS = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}


class PainterEnv(TextEnv):
    """Paint a 6x8 canvas; the observation shows it. The reward is 1 when it shows the target color."""

    default_max_turns = 4

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.observation_space = text_image_space(self.max_observation_length, (6, 8))
        self._canvas = np.zeros((6, 8, 3), dtype=np.uint8)
        self._target = "red"

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._canvas = np.zeros((6, 8, 3), dtype=np.uint8)
        self._target = ("red", "green", "blue")[int(self.np_random.integers(3))]
        return f"Paint the canvas {self._target}."

    @tool
    def paint(self, color: Literal["red", "green", "blue"]) -> Outcome:
        """Paint the whole canvas.

        Args:
            color: The paint.
        """
        self._canvas[:] = COLORS[color]
        solved = color == self._target
        return Outcome(f"The canvas is {color}.", reward=float(solved), terminated=solved)

    def _observation(self, text: str, info: dict[str, Any]) -> dict[str, Any]:
        observation = {"text": text, "image": self._canvas.copy()}
        info["content"] = content_blocks(observation)
        return observation


gym.register("tests/Painter-v0", entry_point=PainterEnv)


def decode_data_url(url):
    assert url.startswith("data:image/png;base64,")
    return np.asarray(PIL.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB"))


def test_text_image_observations_pass_check_env():
    check_env(PainterEnv(), skip_render_check=True)


def test_content_blocks_carry_the_image_and_the_text():
    env = gym.make("tests/Painter-v0")
    observation, info = env.reset(seed=0)
    assert observation in env.observation_space
    observation, _, _, _, info = env.step({"name": "paint", "arguments": {"color": "blue"}})
    image_block, text_block = info["content"]
    assert image_block["type"] == "image_url" and text_block == {"type": "text", "text": "The canvas is blue."}
    assert (decode_data_url(image_block["image_url"]["url"]) == observation["image"]).all()
    assert (observation["image"] == COLORS["blue"]).all()
    assert text_view(observation) == "The canvas is blue." and text_view("plain") == "plain"
    assert content_blocks("plain") == [{"type": "text", "text": "plain"}]


def test_invalid_actions_on_an_image_env_are_observations_with_the_image():
    env = gym.make("tests/Painter-v0")
    env.reset(seed=0)
    observation, _, _, _, info = env.step({"name": "paint", "arguments": {"color": "mauve"}})
    assert info["error"] in observation["text"] and observation["image"].shape == (6, 8, 3)


def test_the_vector_env_returns_text_image_observations_per_slot():
    from wrappers.vector import ConcurrentVectorEnv

    vector_env = ConcurrentVectorEnv([lambda: gym.make("tests/Painter-v0")] * 3)
    try:
        observations, _ = vector_env.reset(seed=0)
        observations, rewards, *_ = vector_env.step([{"name": "paint", "arguments": {"color": c}} for c in COLORS])
        assert [text_view(o) for o in observations] == [f"The canvas is {c}." for c in COLORS]
        assert [tuple(o["image"][0, 0]) for o in observations] == list(COLORS.values())
    finally:
        vector_env.close()


# -- TRL ----------------------------------------------------------------------------------------


def test_trl_factory_returns_multimodal_content_blocks():
    from wrappers.trl import environment_factory

    instance = environment_factory("tests/Painter-v0")()
    first = instance.reset(prompt=[{"role": "user", "content": "Play."}], seed=1)
    assert [block["type"] for block in first] == ["image", "text"] and first[1]["text"].startswith("Paint the canvas")
    result = instance.paint("green")
    image, text = result
    assert isinstance(image["image"], PIL.Image) and image["image"].size == (8, 6)
    assert image["image"].getpixel((0, 0)) == COLORS["green"] and text["type"] == "text"

    text_only = environment_factory("gymenvs/Echo-v0")()
    assert isinstance(text_only.reset(prompt="Go."), str) and isinstance(text_only.echo("hi"), str)


def test_make_rollout_func_plays_text_only_models_on_the_text_view_and_says_so(caplog):
    from wrappers.trl import Sampling, TransformersGenerator, make_rollout_func
    from wrappers.trl.extras.tiny_model import tiny_model

    model, tokenizer = tiny_model(seed=0)
    generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=1.0))
    rollout = make_rollout_func("tests/Painter-v0", max_tokens_per_turn=8)
    try:
        with caplog.at_level(logging.WARNING, logger="wrappers.trl.rollout"):
            for _ in range(2):
                episodes = rollout.run(["Play."] * 2, generator, tokenizer, max_completion_length=64)
    finally:
        rollout.close()
    warnings = [record for record in caplog.records if "text view" in record.getMessage()]
    assert len(warnings) == 1  # said once, not per step or per batch
    for episode in episodes:
        assert all(isinstance(message["content"], str) for message in episode.messages)
        assert "Paint the canvas" in episode.messages[0]["content"]
