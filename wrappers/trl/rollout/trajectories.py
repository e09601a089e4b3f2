"""Rollout episodes as ATIF trajectories, with the tokens that trained: `make_rollout_func(..., trajectories=DIR)`.

Each batch's episodes go to a folder of their own, `DIR/batch-000001/`, one file per episode
(`gymenvs.trajectories.write_trajectory`). An agent step is one model turn. Its metrics hold the tokens exactly as
the rollout sampled them, never tokenized again:

- `completion_token_ids` and `logprobs`: what the model sampled in that turn;
- `extra["env_token_ids"]`: what the env and the template wrote after it (its reply, the next turn's header);
- the first agent step's `prompt_token_ids`: the episode's prompt;
- `extra["gymenvs"]["earlier_sequences"]`: an agent episode's sequences before its agent rewrote its history (the
  steps hold the last one's messages and tokens), each whole.

`gymenvs.trajectories.tokens.training_sequences(trajectory)` puts them back together: each sequence's `prompt_ids`,
`completion_ids`, `logprobs` and `env_mask`, as `Episode.token_sequences()` holds them. A `TrajectoryWriter` writes
each batch in a thread of its own, so that the rollout returns without waiting for the files (its `close` waits for
them). The async worker (`EnvRolloutWorker`)
writes each GRPO group through one too, into `DIR/group-000003/`, with what became of the group.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import atif

    from wrappers.trl.rollout.transcript import Episode

AGENT_NAME = "gymenvs-rollout"
#: A rollout episode's end as ATIF trajectories of gymenvs say it (the rollout's own reason is kept as "end_reason").
_END = {"terminated": "terminated", "truncated": "truncated", "max_completion_length": "truncated", "env_error": "failed"}


class TrajectoryWriter:
    """Writes a rollout's batches into `directory`, one thread doing it in order; `close` waits for the last, and a
    failed write is raised by the next `submit` or by `close`. Several threads may submit."""

    def __init__(self, directory: str | Path, envs: Mapping[str, EnvOfEpisodes]):
        self.directory, self.envs = Path(directory), envs
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[Future] = []
        self._lock = threading.Lock()

    def submit(self, episodes: Sequence[Episode], model_name: str | None, *, folder: str | None = None,
               extras: Sequence[Mapping[str, Any]] | None = None) -> None:
        """Write `episodes` in the background, as `write_batch` does with `folder` and `extras`."""
        with self._lock:
            self._settle(wait=False)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="gymenvs-trajectories")
            self._pending.append(self._pool.submit(write_batch, list(episodes), self.directory, envs=self.envs,
                                                   model_name=model_name, folder=folder, extras=extras))

    def close(self) -> None:
        with self._lock:
            self._settle(wait=True)
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None

    def _settle(self, *, wait: bool) -> None:
        done = [future for future in self._pending if wait or future.done()]
        self._pending = [future for future in self._pending if future not in done]
        for future in done:
            future.result()


@dataclass(frozen=True)
class EnvOfEpisodes:
    """What a trajectory says of the env its episode played: its id, and the tool schemas the model was shown."""

    env_id: str
    tools: Sequence[dict[str, Any]] | None


def write_batch(episodes: Sequence[Episode], directory: str | Path, *, envs: Mapping[str, EnvOfEpisodes],
                model_name: str | None, folder: str | None = None,
                extras: Sequence[Mapping[str, Any]] | None = None) -> Path:
    """Write one batch's episodes (each of the env of `envs` it names) into a new folder, `directory/folder` or else
    the next `directory/batch-NNNNNN`, numbered in the batch's order (`0001-Echo-v0-seed3.json`); that folder.
    `extras[i]`, when given, goes into episode i's `extra["gymenvs"]`."""
    from gymenvs.trajectories.files import file_stem

    path = _new_batch_folder(Path(directory)) if folder is None else _new_folder(Path(directory) / folder)
    for number, (episode, extra) in enumerate(zip(episodes, extras or [{}] * len(episodes), strict=True), 1):
        env = envs[str(episode.env_name)]
        trajectory = episode_trajectory(episode, env_id=env.env_id, tools=env.tools, model_name=model_name, extra=extra)
        text = trajectory.model_dump_json(exclude_none=True, indent=2) + "\n"
        (path / f"{number:04d}-{file_stem(trajectory)}.json").write_text(text, encoding="utf-8")
    return path


def episode_trajectory(episode: Episode, *, env_id: str, tools: Sequence[dict[str, Any]] | None = None,
                       model_name: str | None = None, extra: Mapping[str, Any] | None = None) -> atif.Trajectory:
    """One rollout episode: its messages as steps, each model turn with its tokens (module docstring); `extra` goes
    into the trajectory's `extra["gymenvs"]` beside the env, the seed and how the episode ended."""
    import gymenvs
    from gymenvs.trajectories import TrajectoryRecorder
    from gymenvs.trajectories.tokens import EARLIER_SEQUENCES

    recorder = TrajectoryRecorder(agent_name=AGENT_NAME, agent_version=gymenvs.__version__, model_name=model_name,
                                  tools=tools, extra={"gymenvs": {"env_id": env_id, "seed": episode.seed,
                                                                  "env_name": episode.env_name, "retries": episode.retries,
                                                                  "end_reason": episode.end_reason, **(extra or {})}})
    if episode.earlier_sequences():
        recorder.extra["gymenvs"][EARLIER_SEQUENCES] = episode.earlier_sequences()
    turns = _model_turns(episode)
    messages = list(episode.messages)
    first_turn = True
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            reply = messages[index + 1] if index + 1 < len(messages) else None
            metrics = next(turns, None)
            if metrics is not None and first_turn:
                metrics["prompt_token_ids"] = episode.prompt_ids
            first_turn = False
            recorder.add_step("agent", _text(message.get("content")), tool_calls=_calls(message),
                              reasoning=message.get("reasoning_content"), metrics=metrics,
                              observation=None if reply is None else _text(reply.get("content")))
        elif role in ("system", "user") and not _answers_a_turn(messages, index):
            recorder.add_step(role, _text(message.get("content")))
    return recorder.finish(reward=episode.reward, info=episode.final_info, end=_END[str(episode.end_reason)],
                           error=episode.error)


def _model_turns(episode: Episode) -> Iterator[dict[str, Any]]:
    """Each model turn's metrics, from the runs of `env_mask`: the sampled run, then the env's run after it."""
    from gymenvs.trajectories.tokens import ENV_TOKENS

    runs = [(mask, list(group)) for mask, group in itertools.groupby(range(len(episode.env_mask)),
                                                                   key=lambda i: episode.env_mask[i])]
    for position, (mask, indices) in enumerate(runs):
        if mask != 1:
            continue
        after = runs[position + 1][1] if position + 1 < len(runs) else []
        yield {"completion_token_ids": [episode.completion_ids[i] for i in indices],
               "logprobs": [episode.logprobs[i] for i in indices],
               "extra": {ENV_TOKENS: [episode.completion_ids[i] for i in after]}}


def _answers_a_turn(messages: Sequence[Mapping[str, Any]], index: int) -> bool:
    """Whether message `index` is the env's reply to the model turn before it (it goes on that turn's step)."""
    return index > 0 and messages[index - 1].get("role") == "assistant"


def _calls(message: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", call)
        calls.append({"id": call.get("id"), "name": function.get("name"), "arguments": function.get("arguments", {})})
    return calls or None


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return "" if content is None else str(content)


def _new_folder(folder: Path) -> Path:
    """`folder`, made now: a folder that exists already is a `FileExistsError`, never written into."""
    folder.mkdir(parents=True)
    return folder


def _new_batch_folder(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for number in itertools.count(len(list(directory.glob("batch-*"))) + 1):
        folder = directory / f"batch-{number:06d}"
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise AssertionError("unreachable")
