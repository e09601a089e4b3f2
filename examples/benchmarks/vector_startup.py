"""Start-up cost of a `ConcurrentVectorEnv` on each backend (and each start method of the process one).

Each measurement runs in a fresh interpreter (so a forkserver's or a local Ray's own start counts
where it belongs), builds a vector env of gymenvs/Echo-v0 slots, resets it once and closes it.
For Ray, starting the local Ray itself (`ray.init`) is timed apart from building the slots
(one actor per slot). Run from the repository root:

    python examples/benchmarks/vector_startup.py [--slots 8 64] [--backends thread process:fork ray]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import gymenvs

MEASURE = """
import json, sys, time
start = time.perf_counter()
from wrappers.vector import make_vector_env
ray_init = 0.0
if {backend!r} == "ray":
    import ray
    ray.init(include_dashboard=False, log_to_driver=False)
    ray_init = time.perf_counter() - start
    start = time.perf_counter()
envs = make_vector_env("gymenvs/Echo-v0", {slots}, backend={backend!r}, **{settings!r})
built = time.perf_counter()
envs.reset(seed=0)
reset = time.perf_counter()
envs.close()
print("figures:", json.dumps([ray_init, built - start, reset - built, time.perf_counter() - reset]), flush=True)
"""

BACKENDS = ["thread", "process:fork", "process:forkserver", "process:spawn", "ray"]


def measure(backend: str, slots: int) -> list[float]:
    name, _, start_method = backend.partition(":")
    settings = {"start_method": start_method} if start_method else {}
    repository = os.path.dirname(os.path.dirname(os.path.abspath(gymenvs.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([repository, os.environ.get("PYTHONPATH", "")])}
    body = MEASURE.format(slots=slots, backend=name, settings=settings).strip().splitlines()
    script = "if __name__ == '__main__':\n" + "".join(f"    {line}\n" for line in body)
    output = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    # Ray may print to stdout at exit too: pick the line with the figures.
    (figures,) = [line for line in output.splitlines() if line.startswith("figures: ")]
    return json.loads(figures.removeprefix("figures: "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--backends", nargs="+", default=BACKENDS, help="thread, process:<start method>, ray")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average {os.getloadavg()}")
    print(f"{'backend':<19} {'slots':>6} {'ray.init s':>10} {'build s':>8} {'reset s':>8} {'close s':>8}")
    for slots in args.slots:
        for backend in args.backends:
            ray_init, build, reset, close = measure(backend, slots)
            print(f"{backend:<19} {slots:>6} {ray_init:>10.2f} {build:>8.2f} {reset:>8.2f} {close:>8.2f}", flush=True)
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
