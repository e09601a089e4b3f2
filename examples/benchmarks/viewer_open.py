"""How long `gymenvs view` takes to open a large run, and how large its files are.

    python examples/benchmarks/viewer_open.py [--episodes 1000] [--turns 50] [--rounds 5] [--training] [--path DIR]

Writes a run of `--episodes` Echo-v0 episodes of `--turns` turns each (`gymenvs eval`'s scripted policy, the
trajectories as `--trajectories` writes them) unless `--path` names one. With `--training`, the run is a training
rollout's instead: one Echo-v0 episode of `--turns` turns played by the tiny model through `make_rollout_func(...,
trajectories=DIR)` (every token id and logprob in it), copied `--episodes` times. Then, `--rounds` times:
starts `gymenvs view DIR --port 0` as a command of its own, and in headless Chromium (started before the clock,
as a user's browser is) opens its run page and waits until every row is drawn. Prints, per round and as the
median: the time from the command's start until it listens, until the run page is drawn (the figure the docs
give), and then to open one episode's page. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selenium.webdriver.support.ui import WebDriverWait

from gymenvs.envs.browser import Browser
from gymenvs.eval import evaluate_policy
from gymenvs.eval.policies import make_policy
from gymenvs.trajectories.viewer import Run


def write_run(folder: Path, episodes: int, turns: int) -> None:
    evaluate_policy("gymenvs/Echo-v0", make_policy("scripted", "gymenvs/Echo-v0"), num_episodes=episodes,
                    env_kwargs={"max_turns": turns}, trajectories=folder, progress=False)


def write_training_run(folder: Path, episodes: int, turns: int) -> None:
    from wrappers.trl import Sampling, TransformersGenerator, make_rollout_func
    from wrappers.trl.extras.tiny_model import tiny_model

    model, tokenizer = tiny_model(seed=0)
    rollout = make_rollout_func("gymenvs/Echo-v0", env_kwargs={"max_turns": turns}, max_tokens_per_turn=16,
                                trajectories=folder / "rollout")
    generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=1.0))
    rollout.run([[{"role": "user", "content": "Say something."}]], generator, tokenizer, max_completion_length=100_000)
    rollout.close()
    [played] = (folder / "rollout").rglob("*.json")
    for number in range(1, episodes):
        shutil.copy(played, played.with_name(f"copy-{number:05d}.json"))


def wait_until_drawn(driver, page: str) -> None:
    WebDriverWait(driver, 120, poll_frequency=0.01).until(
        lambda d: d.execute_script("return document.body.dataset.ready") == page)


def one_round(driver, folder: Path) -> tuple[float, float, float]:
    start = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-m", "gymenvs.cli", "view", str(folder), "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()  # "... at http://127.0.0.1:PORT/  (Ctrl-C stops)"
        listening = time.perf_counter() - start
        url = line.split(" at ", 1)[1].split()[0]
        driver.get(url)
        wait_until_drawn(driver, "run")
        drawn = time.perf_counter() - start
        before = time.perf_counter()
        driver.get(url + "#/episode/0")
        wait_until_drawn(driver, "episode")
        return listening, drawn, time.perf_counter() - before
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--training", action="store_true", help="a training rollout's run, with tokens (module docstring)")
    parser.add_argument("--path", type=Path, help="an existing run to open instead of writing one")
    args = parser.parse_args()
    scratch = None if args.path else Path(tempfile.mkdtemp(prefix="gymenvs-viewer-bench-"))
    folder = args.path or scratch
    try:
        if scratch is not None:
            started = time.perf_counter()
            (write_training_run if args.training else write_run)(folder, args.episodes, args.turns)
            print(f"wrote {args.episodes} episodes of {args.turns} turns in {time.perf_counter() - started:.1f} s")
        sizes = [file.stat().st_size for file in folder.rglob("*.json")]
        turns = statistics.mean(row["turns"] for row in Run.open(folder).rows)
        print(f"{len(sizes)} files, {sum(sizes) / 2**20:.1f} MiB: {statistics.mean(sizes) / 1024:.1f} KiB per episode "
              f"of {turns:g} turns")
        browser = Browser(chromium=shutil.which("chromium"), chromedriver=shutil.which("chromedriver"), viewport=(1280, 860))
        try:
            rounds = [one_round(browser.driver, folder) for _ in range(args.rounds)]
        finally:
            browser.close()
        for number, (listening, drawn, episode) in enumerate(rounds, 1):
            print(f"round {number}: listening {listening:.3f} s, run page drawn {drawn:.3f} s, then an episode {episode:.3f} s")
        for name, index in (("listening", 0), ("run page drawn", 1), ("an episode page", 2)):
            values = [round_[index] for round_ in rounds]
            print(f"{name:<16} median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})")
        print(f"load average {os.getloadavg()[0]:.2f}")
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
