"""SWE env latency, side by side on one fixture image: gymenvs/SWE-v0 against mini-swe-agent's
DockerEnvironment (its SWE-bench config), plus reset and grading times.

    python examples/benchmarks/swe_latency.py [--repeats 200] [--resets 5] [--gradings 3]

Needs a Docker engine, the fixture images (`gymenvs swe build-images`) and mini-swe-agent
(`pip install 'gymenvs[bench]'`). Prints a table of medians; nothing is asserted. Other work
on the machine disturbs the figures: run it twice.
"""

from __future__ import annotations

import argparse
import functools
import logging
import statistics
import time
from collections.abc import Callable

import docker
import gymnasium as gym

import gymenvs  # noqa: F401  (registers gymenvs/SWE-v0)
from gymenvs.container.runtime import shared_runtime
from gymenvs.swe.grading import grade
from gymenvs.swe.images import WORKDIR, image_for
from gymenvs.swe.tasks import FIXTURES, load_tasks

TRIVIAL = "true"


def median_ms(action: Callable[[], object], repeats: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        action()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def mini_swe_agent_environment(image: str):
    """mini-swe-agent's DockerEnvironment configured as its SWE-bench runs configure it."""
    import yaml
    from minisweagent.config import get_config_path
    from minisweagent.environments import get_environment

    logging.getLogger("minisweagent").setLevel(logging.WARNING)
    config = yaml.safe_load(get_config_path("swebench").read_text())["environment"]
    return get_environment({**config, "image": image}, default_type="docker")


def remove_mini_container(client, environment) -> None:
    # Its cleanup() backgrounds `docker stop` (10 s against `sleep`): remove it at once instead (a container of
    # mini-swe-agent's, so with a plain docker client, from outside).
    client.containers.get(environment.container_id).remove(force=True)
    environment.container_id = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200, help="trivial commands timed per system")
    parser.add_argument("--resets", type=int, default=5, help="resets / container starts timed")
    parser.add_argument("--gradings", type=int, default=3, help="gradings timed per fixture task")
    args = parser.parse_args()

    runtime = shared_runtime()
    client = docker.from_env()
    tasks = load_tasks(FIXTURES)
    task = tasks[0]
    image = image_for(task)
    rows: list[tuple[str, str, float]] = []

    env = gym.make("gymenvs/SWE-v0", max_turns=1_000_000)
    env.reset(options={"instance_id": task.instance_id})
    call = {"name": "bash", "arguments": {"command": TRIVIAL}}
    ours = median_ms(lambda: env.step(call), args.repeats)
    rows.append(("trivial command (`true`)", "gymenvs SWE-v0 env.step(bash), persistent shell", ours))
    sandbox = runtime.start(image, role="benchmark", episode_id="benchmark", workdir=WORKDIR)
    per_exec = median_ms(lambda: sandbox.run(TRIVIAL, timeout=60), max(20, args.repeats // 10))
    sandbox.remove()
    rows.append(("trivial command (`true`)", "gymenvs runtime sandbox.run, one docker exec per command", per_exec))

    mini = mini_swe_agent_environment(image)
    theirs = median_ms(lambda: mini.execute({"command": TRIVIAL}), max(20, args.repeats // 4))
    remove_mini_container(client, mini)
    rows.append(("trivial command (`true`)", "mini-swe-agent 2.x DockerEnvironment.execute", theirs))

    reset = median_ms(lambda: env.reset(options={"instance_id": task.instance_id}), args.resets, warmup=1)
    rows.append(("reset to first observation", "gymenvs SWE-v0 env.reset (new container + shell)", reset))
    env.close()

    def start_mini():
        remove_mini_container(client, mini_swe_agent_environment(image))

    mini_start = median_ms(start_mini, args.resets, warmup=1)
    rows.append(("reset to first observation", "mini-swe-agent DockerEnvironment() (start + remove)", mini_start))

    for fixture in tasks:
        grade_gold = functools.partial(grade, runtime, fixture, fixture.patch, image=image_for(fixture))
        seconds = median_ms(grade_gold, args.gradings, warmup=0)
        rows.append(("grading (gold patch, fresh container)", fixture.instance_id, seconds))

    width = max(len(what) for what, _, _ in rows)
    system_width = max(len(system) for _, system, _ in rows)
    print(f"\n{'measure':<{width}}  {'system':<{system_width}}  median ms")
    for what, system, ms in rows:
        print(f"{what:<{width}}  {system:<{system_width}}  {ms:9.2f}")
    print(f"\ntrivial command: gymenvs is {theirs / ours:.0f}x faster than mini-swe-agent "
          f"and {per_exec / ours:.0f}x faster than a docker exec per command (image {image}).")


if __name__ == "__main__":
    main()
