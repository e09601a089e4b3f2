"""`RandomPolicy`: a random call of a random tool, its arguments drawn from the tool's JSON schema.

A baseline that needs nothing but the env's tool schemas: `gymenvs bench --policy random` times an
env that has no scripted player. Integers fall in the schema's `minimum`..`maximum` (default 0 to
100), strings are an `enum` value or five random lowercase letters. Each episode draws from its own
generator, seeded from the policy's seed and the episode's number, so a run repeats.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import numpy as np

from gymenvs.eval.policies.base import Action, Messages


class RandomPolicy:
    """Calls a random tool with random arguments every turn."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._episodes = 0
        self.rng = np.random.default_rng(seed)

    def new_episode(self) -> RandomPolicy:
        self._episodes += 1
        return RandomPolicy(seed=self.seed * 1_000_003 + self._episodes)

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action:
        if not tools:
            raise ValueError("--policy random draws a tool call from the env's tool schemas, and this env has no tools")
        function = tools[int(self.rng.integers(len(tools)))]["function"]
        properties = function.get("parameters", {}).get("properties", {})
        return {"name": function["name"], "arguments": {name: self.value(schema) for name, schema in properties.items()}}

    def value(self, schema: dict[str, Any]) -> Any:
        """A random value that `schema` (one JSON schema property) accepts."""
        if "enum" in schema:
            return schema["enum"][int(self.rng.integers(len(schema["enum"])))]
        if "anyOf" in schema:
            return self.value(schema["anyOf"][int(self.rng.integers(len(schema["anyOf"])))])
        kind = schema.get("type", "string")
        if kind == "integer":
            return int(self.rng.integers(schema.get("minimum", 0), schema.get("maximum", 100) + 1))
        if kind == "number":
            return float(self.rng.uniform(schema.get("minimum", 0.0), schema.get("maximum", 100.0)))
        if kind == "boolean":
            return bool(self.rng.integers(2))
        if kind == "array":
            return [self.value(schema.get("items", {})) for _ in range(int(self.rng.integers(4)))]
        if kind == "object":
            return {}
        if kind == "null":
            return None
        return "".join(self.rng.choice(list(string.ascii_lowercase), 5))
