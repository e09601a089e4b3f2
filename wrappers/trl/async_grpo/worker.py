"""`EnvRolloutWorker`: a rollout worker for TRL's `AsyncGRPOTrainer` that plays any registered env.

`AsyncGRPOTrainer` trains on `RolloutSample`s that a worker pushes into a queue while the trainer
steps. This worker keeps `groups_in_flight` GRPO groups playing at all times, each on its own thread
in its own `ConcurrentVectorEnv` of `num_generations` slots that start from one seed. A group plays
exactly as `make_rollout_func` plays a batch (`EnvRollout.run`): every turn, one request to the
inference server for the group's live episodes, then one concurrent env step; the tokens of each
turn are appended, never re-tokenised, with the server's logprob of every sampled token.

So the server always has another group's request to work on while a group's envs step, and a slow
env call (a container starting, a 50 ms tool) holds up only its own group. When a group ends, its
episodes are scored with the env's own returns, advantages are normalised within the group, and
one `RolloutSample` per episode is queued, tagged with the model version the group started under.

- An episode that infrastructure or a broken task ended (`info["outcome"]` `infra` or `invalid`; a slot that
  crashes or misses `step_timeout_s` counts as `infra`) is replayed from the group's seed, up to
  `infra_retries` times. One that still fails is left out of the group (no reward to learn from) and the
  advantages are computed over the rest, as TRL's own worker and `GRPOTrainer` do with a missing reward:
  the rest still compare with each other from the same start. Metrics `rollout/infra_failures`,
  `rollout/retries` and `rollout/dropped` count them.
- A group whose version falls more than `max_staleness` behind the trainer's is abandoned (in
  flight) or dropped (finished), as the trainer would drop its samples.
- `check_health` raises after a failure that repeats, or when nothing was generated for
  `stale_after_s` seconds; `stop()` ends the groups at their next turn and closes their envs.
- With `trajectories=DIR`, each finished group's episodes are written as ATIF trajectories with the tokens
  exactly as sampled (`wrappers.trl.rollout.trajectories`), into `DIR/group-000003/` for group 3, in a
  thread of their own; `stop()` waits for them.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from pydantic import Field, StrictInt

from wrappers.trl.config import NonNegativeInt, OptionalFolder, Options, PositiveInt, PositiveSeconds
from wrappers.trl.rollout.base import EnvRollout, Prompt, outcome_counts
from wrappers.trl.rollout.env import make_rollout_func
from wrappers.trl.rollout.transcript import first_message_with

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase
    from trl.experimental.async_grpo.async_rollout_worker import RolloutSample

    from wrappers.trl.generation.base import Completion, Generator, Sampling
    from wrappers.trl.rollout.trajectories import TrajectoryWriter
    from wrappers.trl.rollout.transcript import Episode

logger = logging.getLogger(__name__)

#: Consecutive failed groups (server down, env broken) after which the worker is declared failed.
MAX_CONSECUTIVE_FAILURES = 3
#: What became of a finished group's episode: its samples went to the trainer's queue, or why they did not (the
#: episode ended `infra`/`invalid`; the group fell more than `max_staleness` behind; the worker was stopping).
QUEUED, UNTRAINABLE, STALE, STOPPING = "queued", "untrainable", "stale", "stopping"


@dataclass
class _Group:
    group_id: int
    seed: int
    model_version: int
    started_at: float = field(default_factory=time.monotonic)
    generation_s: float = 0.0


class WorkerOptions(Options):
    """The worker's own numbers, checked when it is built (the env, tokens and vector env are checked by
    `make_rollout_func`); see `EnvRolloutWorker` for each."""

    num_generations: Annotated[StrictInt, Field(ge=2, description="an integer >= 2 (a group needs two to compare)")]
    groups_in_flight: PositiveInt
    max_staleness: NonNegativeInt
    seed: NonNegativeInt
    queue_maxsize: Annotated[StrictInt, Field(ge=0, description="an integer >= 0 (0: unbounded)")]
    request_timeout_s: PositiveSeconds
    trajectories: OptionalFolder = None


class _Abandoned(Exception):
    """A group stopped early: the worker is stopping, or the group is too stale to train on."""


class _GroupGenerator:
    """The server's generator, seen by one group: times its calls and stops the group when it must end."""

    def __init__(self, worker: EnvRolloutWorker, group: _Group, generator: Generator):
        self.worker, self.group, self.generator = worker, group, generator

    def generate(self, prompts: Sequence[Sequence[int]], max_tokens: Sequence[int]) -> list[Completion]:
        self.worker._check_alive(self.group)
        started = time.monotonic()
        completions = self.generator.generate(prompts, max_tokens)  # ServerClient retries a broken connection
        self.group.generation_s += time.monotonic() - started
        self.worker._beat()
        self.worker._check_alive(self.group)
        return completions


class EnvRolloutWorker:
    """`RolloutWorkerProtocol` for `trl.experimental.async_grpo.AsyncGRPOTrainer(rollout_worker=...)`.

    Args:
        env_id: a registered env id (`import gymenvs` registers gymenvs' own).
        server_url: the inference server (vLLM's `/v1/completions` API, or `wrappers.trl.serve.inference_server`).
        tokenizer: the model's tokenizer, with its chat template.
        num_generations: episodes per GRPO group (G); they start from the same seed.
        max_completion_length: the token budget of an episode (model turns and env replies).
        env_kwargs: keyword arguments for `gymnasium.make`.
        prompt: the conversation the env's first observation is appended to (default: none).
        seed: the first group's seed; group k plays seed `seed + k`.
        sampling: temperature, top-p, top-k, min-p, repetition penalty: set them as in the trainer's
            config (its loss divides logits by its `temperature`).
        max_tokens_per_turn, show_tools: as in `make_rollout_func`.
        groups_in_flight: groups played at once, each on its own thread and vector env.
        max_staleness: the trainer's `max_staleness`.
        queue_maxsize: capacity of `rollout_buffer`. No group starts while it is full, so the worker
            runs at most about `queue_maxsize + groups_in_flight * num_generations` samples ahead of
            the trainer: keep that within `max_staleness` steps, or the surplus goes stale.
        infra_retries: replays of an episode that infrastructure or its task ended (as in `make_rollout_func`).
        backend, max_workers, step_timeout_s, vector_kwargs: the `ConcurrentVectorEnv` of each group
            (as in `make_rollout_func`).
        request_timeout_s: seconds to wait for one generation request.
        model: the model name to request (default: the first one the server lists).
        trajectories: a folder to write each finished group's episodes into, as ATIF trajectories with the tokens
            that were sampled, one folder per group (`DIR/group-000003/0001-Echo-v0-seed3.json`); their
            `extra["gymenvs"]` holds the group's id, the model version it started under, each episode's advantage
            and whether its samples were queued (else `dropped`: why). A group abandoned in flight (stale, or the
            worker stopping) has no finished episode and is not written. A folder that already holds groups is
            refused: give each run its own.
    """

    def __init__(
        self,
        env_id: str,
        *,
        server_url: str,
        tokenizer: PreTrainedTokenizerBase,
        num_generations: int,
        max_completion_length: int,
        env_kwargs: dict[str, Any] | None = None,
        prompt: Prompt = "",
        seed: int = 0,
        sampling: Sampling | None = None,
        max_tokens_per_turn: int | None = None,
        show_tools: bool = True,
        groups_in_flight: int = 2,
        max_staleness: int = 4,
        queue_maxsize: int = 1024,
        infra_retries: int = 2,
        backend: str = "thread",
        max_workers: int | None = None,
        step_timeout_s: float | None = None,
        vector_kwargs: dict[str, Any] | None = None,
        request_timeout_s: float = 600.0,
        model: str | None = None,
        trajectories: str | Path | None = None,
    ):
        self.options = WorkerOptions(
            num_generations=num_generations,
            groups_in_flight=groups_in_flight,
            max_staleness=max_staleness,
            seed=seed,
            queue_maxsize=queue_maxsize,
            request_timeout_s=request_timeout_s,
            trajectories=trajectories,
        )
        self.server_url, self.tokenizer, self.model = server_url, tokenizer, model
        self.prompt, self.sampling = prompt, sampling
        self.rollout_buffer: queue.Queue[RolloutSample] = queue.Queue(maxsize=queue_maxsize)
        self.metrics_queue: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=4096)
        # One EnvRollout per group thread; building them checks the env id, kwargs and token budget now.
        rollout_options = dict(
            env_kwargs=env_kwargs,
            tokenizer=tokenizer,
            max_completion_length=max_completion_length,
            max_tokens_per_turn=max_tokens_per_turn,
            show_tools=show_tools,
            infra_retries=infra_retries,
            backend=backend,
            max_workers=max_workers,
            step_timeout_s=step_timeout_s,
            vector_kwargs=vector_kwargs,
        )
        self._rollouts = [make_rollout_func(env_id, **rollout_options) for _ in range(groups_in_flight)]
        self._prompt_messages = len(first_message_with(prompt, ""))
        self._writer = self._trajectory_writer()
        self._init_bookkeeping()

    def _trajectory_writer(self) -> TrajectoryWriter | None:
        """The writer of the groups' trajectories, when `trajectories` names a folder that holds no other run's groups."""
        if self.options.trajectories is None:
            return None
        from wrappers.trl.rollout.trajectories import TrajectoryWriter

        directory = Path(self.options.trajectories)
        if any(directory.glob("group-*")):
            raise ValueError(f"trajectories={str(directory)!r} already holds another run's groups (group-*): "
                             "give each run a folder of its own")
        return TrajectoryWriter(directory, self._rollouts[0].trajectory_envs())

    def _init_bookkeeping(self) -> None:
        """The threads' shared state: what runs, which model version it plays, and how it is failing."""
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._group_ids = itertools.count()
        self._model_version = 0
        self._synced_at: dict[int, float] = {}  # version -> when the trainer announced it
        self._last_progress = time.monotonic()
        self._consecutive_failures = 0
        self._last_error: BaseException | None = None
        self._failure: BaseException | None = None
        #: Seconds from each weight sync to the first queued sample of that version (or newer).
        self.version_lags: list[float] = []

    # -- RolloutWorkerProtocol ------------------------------------------------------------

    def start(self) -> None:
        if self._threads:
            raise RuntimeError("the worker has already started")
        self._last_progress = time.monotonic()
        self._threads = [
            threading.Thread(target=self._play_groups, args=(rollout,), name=f"env-rollout-{index}", daemon=True)
            for index, rollout in enumerate(self._rollouts)
        ]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        """End every group at its next turn and close their envs. Returns once the threads have ended (a
        thread in the middle of an env step ends when the step does, within `step_timeout_s`) and the
        trajectories being written, if any, are; a write that failed is raised here."""
        self._stopping.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [thread.name for thread in self._threads if thread.is_alive()]
        if stuck:
            logger.warning("rollout threads %s did not end within %.0f s", stuck, timeout_s)
        if not self._threads:  # never started: the rollouts built no envs, but close them anyway
            for rollout in self._rollouts:
                rollout.close()
        if self._writer is not None:
            self._writer.close()

    def update_model_version(self, model_version: int) -> None:
        with self._lock:
            self._model_version = model_version
            self._synced_at.setdefault(model_version, time.monotonic())

    def check_health(self, stale_after_s: float) -> None:
        if self._failure is not None:
            raise RuntimeError(f"the rollout worker failed: {self._failure!r}") from self._failure
        if not self._threads or self._stopping.is_set():
            return
        if not any(thread.is_alive() for thread in self._threads):
            raise RuntimeError("every rollout thread has ended")
        idle = time.monotonic() - self._last_progress
        if idle > stale_after_s:
            cause = f"; last error: {self._last_error!r}" if self._last_error else ""
            raise RuntimeError(f"the rollout worker has generated nothing for {idle:.0f} s{cause}")

    # -- groups ---------------------------------------------------------------------------

    @property
    def model_version(self) -> int:
        return self._model_version

    def _play_groups(self, rollout: EnvRollout) -> None:
        from wrappers.trl.generation.vllm_server import VLLMServerGenerator

        generator = None
        try:
            generator = VLLMServerGenerator(
                self.server_url,
                model=self.model,
                sampling=self.sampling,
                stop_token_ids=[self.tokenizer.eos_token_id],
                timeout_s=self.options.request_timeout_s,
            )
            while self._room_for_a_group():
                self._play_group(rollout, generator)
        except BaseException as error:  # the server never answered: nothing this thread can do
            self._fail(error)
        finally:
            if generator is not None:
                generator.close()
            rollout.close()

    def _room_for_a_group(self) -> bool:
        """Wait while the buffer is full (a group started now would only wait there, growing stale);
        False once the worker stops."""
        while not self._stopping.is_set():
            if not self.rollout_buffer.full():
                return True
            self._beat()  # waiting for the trainer is not a stall
            self._stopping.wait(0.05)
        return False

    def _play_group(self, rollout: EnvRollout, generator: Generator) -> None:
        group = self._next_group()
        try:
            episodes = rollout.run(
                [self.prompt] * self.options.num_generations,
                _GroupGenerator(self, group, generator),
                seeds=[group.seed] * self.options.num_generations,
            )
        except _Abandoned:
            return
        except Exception as error:
            self._group_failed(error)
            return
        self._consecutive_failures = 0
        self._publish(group, episodes, model_name=getattr(generator, "model", None))

    def _next_group(self) -> _Group:
        with self._lock:
            group_id = next(self._group_ids)
            return _Group(group_id, self.options.seed + group_id, self._model_version)

    def _check_alive(self, group: _Group) -> None:
        if self._stopping.is_set():
            raise _Abandoned("the worker is stopping")
        if self._is_stale(group):
            self._push_metrics({"rollout/abandoned_stale_total": 1.0})
            raise _Abandoned("the group is too stale to train on")

    def _is_stale(self, group: _Group) -> bool:
        return self._model_version - group.model_version > self.options.max_staleness

    def _beat(self) -> None:
        self._last_progress = time.monotonic()

    def _group_failed(self, error: Exception) -> None:
        logger.warning("a rollout group failed: %r", error)
        self._last_error = error
        self._consecutive_failures += 1
        self._push_metrics({"rollout/failed_groups_total": 1.0})
        if self._consecutive_failures >= MAX_CONSECUTIVE_FAILURES:
            self._fail(error)
        else:
            self._stopping.wait(1.0)

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error
        self._stopping.set()

    # -- samples --------------------------------------------------------------------------

    def _publish(self, group: _Group, episodes: list[Episode], model_name: str | None = None) -> None:
        counts = outcome_counts(episodes)
        metrics = {
            "rollout/groups_total": 1.0,
            "rollout/env_errors_total": float(sum(not episode.trainable for episode in episodes)),
            **{f"rollout/{name}": float(count) for name, count in counts.items()},
            "rollout/group_s": time.monotonic() - group.started_at,
            "rollout/generation_s": group.generation_s,
        }
        advantages, reward_std = _advantages(episodes)
        fates = self._queue(group, episodes, advantages, reward_std)
        if QUEUED in fates and set(fates) <= {QUEUED, UNTRAINABLE}:
            metrics.update(self._version_lags(group.model_version))
        else:
            metrics["rollout/dropped_groups_total"] = 1.0
        self._push_metrics(metrics)
        self._write_trajectories(group, episodes, advantages, fates, model_name)

    def _queue(self, group: _Group, episodes: list[Episode], advantages: list[float | None],
               reward_std: float) -> list[str]:
        """Queue the samples of each trainable episode in turn, until one cannot be (the group went stale, or the
        worker stops); what became of each episode (`QUEUED`, or why not)."""
        fates = []
        dropped = STALE if self._is_stale(group) else None
        for episode, advantage in zip(episodes, advantages):
            if advantage is None:
                fates.append(UNTRAINABLE)
                continue
            samples = self._samples(group, episode, advantage, reward_std) if dropped is None else []
            if samples and not all(self._put(sample, group) for sample in samples):
                dropped = STOPPING if self._stopping.is_set() else STALE
            fates.append(dropped or QUEUED)
        return fates

    def _samples(self, group: _Group, episode: Episode, advantage: float, reward_std: float) -> list[RolloutSample]:
        from trl.experimental.async_grpo.async_rollout_worker import RolloutSample

        # An agent episode whose agent rewrote its history has several sequences: each is a sample with the
        # episode's advantage, computed over whole episodes, so the group stays what GRPO compares.
        samples = []
        for sequence in episode.token_sequences():
            prompt_length = len(sequence["prompt_ids"])
            samples.append(
                RolloutSample(
                    prompt=episode.messages[: self._prompt_messages],
                    completion=episode.messages[self._prompt_messages :],
                    input_ids=np.asarray(sequence["prompt_ids"] + sequence["completion_ids"], dtype=np.int64),
                    completion_mask=np.asarray([0] * prompt_length + sequence["env_mask"], dtype=np.int64),
                    old_log_probs=np.asarray([0.0] * prompt_length + sequence["logprobs"], dtype=np.float32),
                    advantage=advantage,
                    model_version=group.model_version,
                    group_id=group.group_id,
                    metrics={"reward": episode.reward, "reward_std": reward_std, "turns": episode.turns},
                )
            )
        return samples

    def _write_trajectories(self, group: _Group, episodes: list[Episode], advantages: list[float | None],
                            fates: list[str], model_name: str | None) -> None:
        """Write the group's episodes in the background (with `trajectories`), each with the group, its advantage and
        its fate; `model_name` is the model the server generated with."""
        if self._writer is None:
            return
        extras = []
        for advantage, fate in zip(advantages, fates):
            extra: dict[str, Any] = {"group_id": group.group_id, "model_version": group.model_version,
                                     "queued": fate == QUEUED}
            if advantage is not None:
                extra["advantage"] = advantage
            if fate != QUEUED:
                extra["dropped"] = fate
            extras.append(extra)
        self._writer.submit(episodes, model_name, folder=f"group-{group.group_id:06d}", extras=extras)

    def _put(self, sample: RolloutSample, group: _Group) -> bool:
        """Queue a sample, waiting while the buffer is full; False if the group went stale or the worker stops."""
        while not self._stopping.is_set() and not self._is_stale(group):
            sample.enqueued_at = time.time()
            try:
                self.rollout_buffer.put(sample, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _version_lags(self, version: int) -> dict[str, float]:
        """The time since each sync up to `version` whose first sample this is."""
        now = time.monotonic()
        with self._lock:
            reached = [v for v in self._synced_at if v <= version]
            lags = [now - self._synced_at.pop(v) for v in reached]
        self.version_lags.extend(lags)
        return {"rollout/version_lag_s": max(lags)} if lags else {}

    def _push_metrics(self, metrics: dict[str, float]) -> None:
        try:
            self.metrics_queue.put_nowait(metrics)
        except queue.Full:
            pass  # the trainer drains this in `log()`; never hold up a rollout for it


def _advantages(episodes: list[Episode]) -> tuple[list[float | None], float]:
    """Each trainable episode's return normalised within the group (None for the others: they are left out, as
    TRL leaves out a missing reward), and the standard deviation of those returns."""
    rewards = np.array([episode.reward for episode in episodes if episode.trainable], dtype=np.float64)
    if not rewards.size:
        return [None] * len(episodes), 0.0
    normalised = iter((rewards - rewards.mean()) / (rewards.std() + 1e-8))
    return [float(next(normalised)) if episode.trainable else None for episode in episodes], float(rewards.std())
