"""ReasoningGym: one question from a `reasoning_gym` dataset per episode, scored by the dataset."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, NonNegativeInt, PositiveInt

from gymenvs.core import Outcome, TextEnv, ToolCall, tool, validate_config

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _reasoning_gym():
    try:
        import reasoning_gym
    except ImportError as exc:
        raise ImportError("gymenvs/ReasoningGym-v0 needs reasoning-gym: pip install 'gymenvs[reasoning]'") from exc
    return reasoning_gym


class ReasoningGymEnv(TextEnv):
    """ReasoningGym-v0. The observation is the question; the action is the answer; the reward is the
    dataset's `score_answer` (0 to 1) and the episode ends. Free text is the answer (the last
    `<answer>...</answer>` block if there is one). `reset(seed=s)` always gives the same question for
    the same s; `reset()` without a seed moves on through this instance's own random stream.

    Args:
        dataset: a reasoning_gym dataset name, e.g. "leg_counting" (ignored when `datasets` is given).
        config: keyword arguments for that dataset's config (e.g. {"min_animals": 2}).
        datasets: a composite of several datasets: {name: {"weight": w, "config": {...}}}.
        size: how many distinct questions the dataset holds.
        dataset_seed: the seed the questions are generated from.
        max_turns: turns allowed (an invalid action costs one).
        render_mode: None or "ansi".
    """

    default_max_turns = 1

    @validate_config
    def __init__(
        self,
        *,
        dataset: str = "leg_counting",
        config: dict[str, Any] | None = None,
        datasets: dict[str, dict[str, Any]] | None = None,
        size: Annotated[int, Field(ge=1, le=10_000_000)] = 1000,
        dataset_seed: NonNegativeInt = 0,
        max_turns: PositiveInt | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        self.dataset_name = "composite" if datasets else dataset
        self.dataset = _build_dataset(dataset, config or {}, datasets, size, dataset_seed)
        self.size = size
        self._index = 0
        self._entry: dict[str, Any] = {}

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._index = int(self.np_random.integers(self.size))
        self._entry = self.dataset[self._index]
        return self._entry["question"]

    def _parse_text(self, text: str) -> ToolCall:
        tagged = _ANSWER_TAG.findall(text)
        return ToolCall("answer", {"answer": (tagged[-1] if tagged else text).strip()})

    @tool
    def answer(self, answer: str) -> Outcome:
        """Submit the final answer to the question.

        Args:
            answer: The answer, in the form the question asks for.
        """
        score = float(self.dataset.score_answer(answer, entry=self._entry))
        correct = str(self._entry["answer"])
        info = {"score": score, "correct_answer": correct, "source_dataset": self._source_dataset()}
        return Outcome(f"Score: {score:g}. The correct answer is: {correct}", reward=score, terminated=True, info=info)

    def _source_dataset(self) -> str:
        return str(self._entry.get("metadata", {}).get("source_dataset", self.dataset_name))

    def _episode_state(self) -> dict[str, Any]:
        return {"dataset": self._source_dataset(), "index": self._index, "question": self._entry.get("question")}


def _build_dataset(name: str, config: dict, composite: dict | None, size: int, seed: int):
    rg = _reasoning_gym()
    known = sorted(rg.factory.DATASETS)
    if composite:
        specs = []
        for member, spec in composite.items():
            _check_name(member, known)
            unknown = set(spec) - {"weight", "config"}
            if unknown:
                raise ValueError(f"datasets[{member!r}] has unknown keys {sorted(unknown)}: allowed are 'weight' and 'config'")
            specs.append(rg.composite.DatasetSpec(member, float(spec.get("weight", 1.0)), dict(spec.get("config", {}))))
        return _create(rg, "composite", {"datasets": specs}, size, seed)
    _check_name(name, known)
    return _create(rg, name, config, size, seed)


def _check_name(name: str, known: list[str]) -> None:
    if name not in known or name == "composite":
        raise ValueError(f"unknown reasoning_gym dataset {name!r}; allowed: {', '.join(n for n in known if n != 'composite')}")


def _create(rg, name: str, config: dict, size: int, seed: int):
    try:
        return rg.create_dataset(name, size=size, seed=seed, **config)
    except (TypeError, AssertionError, ValueError) as exc:
        raise ValueError(f"bad config for reasoning_gym dataset {name!r} ({config!r}): {exc or type(exc).__name__}") from exc
