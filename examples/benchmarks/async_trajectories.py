"""What writing trajectories costs the async worker: `EnvRolloutWorker(..., trajectories=DIR)` against the same worker
without.

    python examples/benchmarks/async_trajectories.py [--rounds 5] [--groups 8] [--group 4] [--turns 4]

The CPU inference server serves a tiny model (random weights, built offline) from its own process, as a real server
runs beside a trainer; the worker plays `gymenvs/Echo-v0` for `--turns` turns, `--group` episodes a group, two groups
in flight, until `--groups` groups' samples are queued. After one run that warms up (not counted), each round runs
the worker once with trajectories and once without, in alternating order, and the script prints the median seconds
to those samples and their ratio; the writing alone, as the worker's writing thread did it (each group's
`write_batch`, timed), against the median time a group took to play (`rollout/group_s`); how long `stop()` took
(it ends the groups in flight and closes their envs, and with trajectories waits for the files); and the size of a
file per episode. Figures depend on the machine and its load: they are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from wrappers.trl.extras.offline import run_offline_and_quietly

run_offline_and_quietly()

from wrappers.trl import EnvRolloutWorker, Sampling, tiny_model  # noqa: E402
from wrappers.trl.rollout import trajectories  # noqa: E402
from wrappers.trl.serve.inference_server import ServerProcess  # noqa: E402

WRITES: list[float] = []


def timed_write_batch(write_batch):
    """`write_batch`, adding each call's seconds to WRITES (the worker's writer looks it up at each group)."""

    def write(*args, **kwargs):
        started = time.perf_counter()
        try:
            return write_batch(*args, **kwargs)
        finally:
            WRITES.append(time.perf_counter() - started)

    return write


def one_run(server, tokenizer, options, folder: Path | None) -> tuple[float, float, list[float]]:
    """Seconds to `--groups` groups' samples, seconds `stop()` took, and each finished group's `rollout/group_s`."""
    worker = EnvRolloutWorker(
        "gymenvs/Echo-v0", env_kwargs={"max_turns": options.turns}, server_url=server.base_url, tokenizer=tokenizer,
        num_generations=options.group, max_completion_length=options.turns * 16, max_tokens_per_turn=8,
        show_tools=False, sampling=Sampling(temperature=1.0), groups_in_flight=2, trajectories=folder,
    )
    started = time.perf_counter()
    worker.start()
    for _ in range(options.groups * options.group):
        worker.rollout_buffer.get(timeout=300)
    played = time.perf_counter() - started
    stopping = time.perf_counter()
    worker.stop()
    stopped = time.perf_counter() - stopping
    group_s = []
    while not worker.metrics_queue.empty():
        group_s.append(worker.metrics_queue.get_nowait().get("rollout/group_s"))
    return played, stopped, [s for s in group_s if s is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--groups", type=int, default=8, help="groups whose samples each run waits for")
    parser.add_argument("--group", type=int, default=4, help="episodes per group")
    parser.add_argument("--turns", type=int, default=4)
    options = parser.parse_args()
    trajectories.write_batch = timed_write_batch(trajectories.write_batch)
    model, tokenizer = tiny_model(seed=0)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    on, off, stops_on, stops_off, group_s = [], [], [], [], []
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(f"{folder}/model")
        tokenizer.save_pretrained(f"{folder}/model")
        with ServerProcess(f"{folder}/model") as server:
            one_run(server, tokenizer, options, Path(folder) / "warm-up")  # first requests, first imports: not counted
            WRITES.clear()
            for round_ in range(options.rounds):
                for with_files in ([True, False] if round_ % 2 == 0 else [False, True]):
                    target = Path(folder) / "runs" / f"round-{round_}" if with_files else None
                    played, stopped, groups = one_run(server, tokenizer, options, target)
                    (on if with_files else off).append(played)
                    (stops_on if with_files else stops_off).append(stopped)
                    group_s += groups
        files = list((Path(folder) / "runs").rglob("*.json"))
        per_episode = sum(f.stat().st_size for f in files) / max(1, len(files))
    print(f"Echo-v0: {options.groups} groups of {options.group} episodes of {options.turns} turns, {options.rounds} "
          f"rounds. Seconds to the samples without trajectories: {spread(off)}; with: {spread(on)}; ratio of medians "
          f"{statistics.median(on) / statistics.median(off):.3f}. Writing a group's files ({len(WRITES)} groups): "
          f"{spread(WRITES)}, {statistics.median(WRITES) / statistics.median(group_s):.2%} of the median group "
          f"({statistics.median(group_s):.3f} s), in the background. stop() without: {spread(stops_off)}; with: "
          f"{spread(stops_on)}; {per_episode / 1024:.1f} KiB per episode file", flush=True)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})"


if __name__ == "__main__":
    main()
