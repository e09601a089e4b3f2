"""Observations with an image: text plus a screenshot, as a gymnasium space and as chat content blocks.

An env that shows images returns a dict observation `{"text": str, "image": uint8 array (H, W, 3)}`
in `text_image_space(...)`, a `gymnasium.spaces.Dict` that `check_env` and gymnasium's vector
utilities understand. Its `info["content"]` carries the same observation as OpenAI-style chat
content blocks (the image as a PNG data URL), ready for a vision model's message. Code that
only reads text takes `text_view(observation)`, which works for text-only envs too.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from gymenvs.core.spaces import UnicodeText

TEXT_KEY = "text"
IMAGE_KEY = "image"


def text_image_space(max_text_length: int, image_shape: tuple[int, int]) -> spaces.Dict:
    """The space of `{"text": ..., "image": ...}` observations; `image_shape` is (height, width) of an RGB image."""
    height, width = image_shape
    return spaces.Dict(
        {
            TEXT_KEY: UnicodeText(max_text_length),
            IMAGE_KEY: spaces.Box(0, 255, shape=(height, width, 3), dtype=np.uint8),
        }
    )


def has_image(observation: Any) -> bool:
    return isinstance(observation, Mapping) and IMAGE_KEY in observation


def text_view(observation: Any) -> str:
    """The text of an observation: the string itself, or the `"text"` of a text+image observation."""
    if isinstance(observation, str):
        return observation
    if isinstance(observation, Mapping) and isinstance(observation.get(TEXT_KEY), str):
        return observation[TEXT_KEY]
    raise TypeError(f"not a text or text+image observation: {type(observation).__name__}")


def content_blocks(observation: Any) -> list[dict[str, Any]]:
    """The observation as OpenAI chat content blocks: the image (a PNG data URL) first, then the text."""
    blocks: list[dict[str, Any]] = []
    if has_image(observation):
        blocks.append({"type": "image_url", "image_url": {"url": png_data_url(observation[IMAGE_KEY])}})
    blocks.append({"type": "text", "text": text_view(observation)})
    return blocks


def to_pil_image(image: np.ndarray):
    """An RGB uint8 array as a `PIL.Image.Image` (Pillow is imported only here)."""
    try:
        from PIL import Image
    except ImportError as exc:
        raise ImportError("image observations need Pillow: pip install pillow") from exc
    return Image.fromarray(np.asarray(image, dtype=np.uint8))


def png_data_url(image: np.ndarray) -> str:
    buffer = io.BytesIO()
    to_pil_image(image).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
