"""`evaluate_policy()`: run a policy over N episodes of an env, summarise them, and keep their transcripts.

`gymenvs eval` and `gymenvs replay` are this module on the command line. Episodes run on a thread
pool (an endpoint or a container waits on I/O); each has its own env and its own copy of the
policy's per-episode state. A transcript is one JSON line per episode: what the model saw (the
tool schemas and every message) and how the episode ended.
"""

from __future__ import annotations

import json
import queue
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TextIO

import gymnasium as gym
import pydantic
from typing_extensions import TypedDict

from gymenvs.core.errors import ReplayFileError, short_repr
from gymenvs.eval.policies.base import Conversation, Policy
from gymenvs.registry import probe


@dataclass
class EpisodeRecord:
    """One evaluated episode: its transcript and how it ended."""

    env_id: str
    seed: int
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    turns: int = 0
    invalid_actions: int = 0
    end: str = "running"  # terminated, truncated, or failed
    error: str | None = None
    seconds: float = 0.0

    @property
    def success(self) -> bool:
        return self.end == "terminated" and self.reward > 0


@dataclass(frozen=True)
class EvalSummary:
    """What `evaluate_policy()` returns and `gymenvs eval` prints."""

    env_id: str
    policy: str
    episodes: int
    mean_reward: float
    reward_std: float
    success_rate: float
    mean_turns: float
    invalid_actions: int
    failed_episodes: int
    wall_time_s: float

    @classmethod
    def of(cls, env_id: str, policy: str, records: list[EpisodeRecord], wall_time_s: float) -> EvalSummary:
        rewards = [record.reward for record in records]
        return cls(
            env_id=env_id,
            policy=policy,
            episodes=len(records),
            mean_reward=statistics.fmean(rewards) if rewards else 0.0,
            reward_std=statistics.pstdev(rewards) if rewards else 0.0,
            success_rate=statistics.fmean(record.success for record in records) if records else 0.0,
            mean_turns=statistics.fmean(record.turns for record in records) if records else 0.0,
            invalid_actions=sum(record.invalid_actions for record in records),
            failed_episodes=sum(record.end == "failed" for record in records),
            wall_time_s=wall_time_s,
        )

    def table(self) -> str:
        rate = self.episodes / self.wall_time_s if self.wall_time_s else float("inf")
        rows = [
            ("env", self.env_id),
            ("policy", self.policy),
            ("episodes", str(self.episodes)),
            ("mean reward", f"{self.mean_reward:.3f} (std {self.reward_std:.3f})"),
            ("success rate", f"{self.success_rate:.1%}"),
            ("mean turns", f"{self.mean_turns:.2f}"),
            ("invalid actions", str(self.invalid_actions)),
            ("failed episodes", str(self.failed_episodes)),
            ("wall time", f"{self.wall_time_s:.2f} s ({rate:.1f} episodes/s)"),
        ]
        return summary_table(rows)


def summary_table(rows: Sequence[tuple[str, str]]) -> str:
    """Name-value rows as the two aligned columns `gymenvs eval` and `gymenvs bench` print."""
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def evaluate_policy(
    env_id: str,
    policy: Policy,
    *,
    num_episodes: int,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    max_workers: int = 1,
    transcripts: str | Path | None = None,
    progress: bool = True,
) -> EvalSummary:
    """Play `num_episodes` episodes of `env_id` (seeds `seed`, `seed + 1`, ...) with `policy` and summarise them.

    Args:
        env_id: a registered env id.
        policy: see `gymenvs.eval.policies` (`make_policy` builds one by name).
        env_kwargs: keyword arguments for `gymnasium.make`.
        max_workers: episodes played at once, on threads.
        transcripts: a JSONL file to write, one episode per line, in seed order.
        progress: show a tqdm progress bar.
    """
    if num_episodes < 1:
        raise ValueError(f"num_episodes={num_episodes}: expected at least 1")
    if max_workers < 1:
        raise ValueError(f"max_workers={max_workers}: expected at least 1")
    probe(env_id, env_kwargs)  # an unknown id or a bad kwarg fails here, once, not in every episode
    from tqdm.auto import tqdm

    start = time.perf_counter()
    seeds = range(seed, seed + num_episodes)
    with ctrl_c_sets() as stop, tqdm(total=num_episodes, desc=env_id, unit="episode", disable=not progress) as bar:
        records = play_episodes(env_id, env_kwargs or {}, policy, seeds, max_workers, stop, bar.update)
    summary = EvalSummary.of(env_id, policy.name, records, time.perf_counter() - start)
    if transcripts is not None:
        with open(transcripts, "w", encoding="utf-8") as file:
            for record in records:
                file.write(json.dumps(asdict(record), default=str) + "\n")
    return summary


def play_episodes(
    env_id: str,
    env_kwargs: dict[str, Any],
    policy: Policy,
    seeds: Sequence[int],
    workers: int,
    stop: threading.Event,
    on_done: Callable[[], object],
) -> list[EpisodeRecord]:
    """Play one episode per seed on `workers` threads; the records come back in seed order.

    Once `stop` is set no further episode starts; the running ones finish (their envs close) and
    KeyboardInterrupt is raised. The workers are daemon threads and share no lock with this thread,
    so a second Ctrl-C here can never leave the process waiting for them: a ThreadPoolExecutor joins
    its threads at exit, and a KeyboardInterrupt landing inside its locks hung `gymenvs eval`.
    """
    jobs = iter(enumerate(seeds))
    jobs_lock = threading.Lock()
    finished: queue.SimpleQueue[tuple[int, EpisodeRecord] | None] = queue.SimpleQueue()

    def work() -> None:
        while not stop.is_set():
            with jobs_lock:  # the policy's per-episode copies are made one at a time, in seed order
                job = next(jobs, None)
                if job is None:
                    break
                episode_policy = policy.new_episode()
            index, episode_seed = job
            finished.put((index, play_episode(env_id, env_kwargs, episode_policy, episode_seed)))
        finished.put(None)  # this worker is done

    threads = [threading.Thread(target=work, name=f"gymenvs-eval-{n}", daemon=True) for n in range(min(workers, len(seeds)))]
    for thread in threads:
        thread.start()
    records: dict[int, EpisodeRecord] = {}
    working = len(threads)
    try:
        while working:
            try:
                item = finished.get(timeout=0.2)  # a timeout, so that a signal handler runs promptly
            except queue.Empty:
                continue
            if item is None:
                working -= 1
            else:
                records[item[0]] = item[1]
                on_done()
    except BaseException:
        # This thread is leaving (SIGTERM's SystemExit, a second Ctrl-C): the workers start no further episode,
        # which at interpreter exit would start containers that no exit handler removes any more.
        stop.set()
        raise
    if stop.is_set():
        raise KeyboardInterrupt
    return [records[index] for index in range(len(seeds))]


@contextmanager
def ctrl_c_sets() -> Iterator[threading.Event]:
    """An event that the first Ctrl-C sets (the episodes running finish); a second Ctrl-C interrupts at once.

    Only the main thread receives signals; called from another thread, or with a SIGINT handler of the
    caller's own, the event is never set by Ctrl-C and the handler is left alone.
    """
    stop = threading.Event()
    in_main_thread = threading.current_thread() is threading.main_thread()
    if not in_main_thread or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield stop
        return

    def on_sigint(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("\n[stopping: the running episodes finish; Ctrl-C again to quit now]", file=sys.stderr)

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def play_episode(env_id: str, env_kwargs: dict[str, Any], policy: Policy, seed: int) -> EpisodeRecord:
    """One episode; a policy or env that raises ends it as `failed` with the error kept."""
    start = time.perf_counter()
    env = gym.make(env_id, **env_kwargs)
    record = EpisodeRecord(env_id=env_id, seed=seed, tools=[])
    try:
        observation, info = env.reset(seed=seed)
        record.tools = list(info.get("tools", []))
        conversation = Conversation(policy, record.tools, observation)
        record.messages = conversation.messages
        while record.end == "running":
            action = conversation.act()
            observation, reward, terminated, truncated, info = env.step(action)
            record.turns += 1
            record.reward += float(reward)
            record.invalid_actions += info.get("error") is not None
            conversation.observe(action, observation)
            if terminated or truncated:
                record.end = "terminated" if terminated else "truncated"
    except Exception as exc:  # one broken episode must not end the evaluation
        record.end, record.error = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        env.close()
        record.seconds = time.perf_counter() - start
    return record


class _Function(TypedDict):
    name: str


class _Tool(TypedDict):
    function: _Function


class _Message(TypedDict):
    role: str
    content: Any


class _Transcript(TypedDict):
    """The fields of an `EpisodeRecord` line that `replay` reads."""

    env_id: str
    seed: int | None
    reward: float
    turns: int
    end: str
    messages: list[_Message]
    tools: NotRequired[list[_Tool]]
    error: NotRequired[str | None]


_TRANSCRIPT = pydantic.TypeAdapter(_Transcript)


def read_transcripts(path: str | Path) -> list[dict[str, Any]]:
    """The episodes of a transcript file written by `evaluate_policy(transcripts=...)`, one per line;
    a `ReplayFileError` naming the file, the line and what is wrong with it."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = [(number, line) for number, line in enumerate(file, 1) if line.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise ReplayFileError(f"cannot read transcript file {str(path)!r}: {getattr(exc, 'strerror', None) or exc}") from None
    if not lines:
        raise ReplayFileError(f"transcript file {str(path)!r} holds no episodes (expected one JSON line per episode)")
    return [_transcript(path, number, line) for number, line in lines]


def _transcript(path: str | Path, number: int, line: str) -> dict[str, Any]:
    where = f"{path}:{number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ReplayFileError(f"{where}: not JSON ({exc.msg} at column {exc.colno}); expected one episode per line, "
                              "as `gymenvs eval --transcripts` writes") from None
    try:
        _TRANSCRIPT.validate_python(record)
    except pydantic.ValidationError as exc:
        raise ReplayFileError(f"{where}: not an episode transcript of `gymenvs eval --transcripts`: "
                              f"{_problems(exc)}") from None
    return record


def _problems(exc: pydantic.ValidationError) -> str:
    missing = [".".join(map(str, error["loc"])) for error in exc.errors() if error["type"] == "missing"]
    others = [f"{'.'.join(map(str, error['loc'])) or 'the line'}={short_repr(error['input'])}: {error['msg'].lower()}"
              for error in exc.errors() if error["type"] != "missing"]
    return "; ".join(([f"missing field(s) {', '.join(missing)}"] if missing else []) + others)


def replay(record: dict[str, Any], out: TextIO) -> None:
    """Print one transcript as the model saw it: the tools, then every message in order."""
    out.write(f"# {record['env_id']}  seed {record['seed']}  reward {record['reward']:g}  turns {record['turns']}  "
              f"end {record['end']}\n")
    if record.get("error"):
        out.write(f"# error: {record['error']}\n")
    for tool in record.get("tools", []):
        function = tool["function"]
        params = ", ".join(function.get("parameters", {}).get("properties", {}))
        out.write(f"[tool] {function['name']}({params}): {function.get('description', '')}\n")
    for message in record["messages"]:
        out.write(f"\n--- {message['role']}\n{message['content']}\n")
