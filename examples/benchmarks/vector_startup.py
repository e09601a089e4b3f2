"""Start-up cost of the process backend for each multiprocessing start method.

Each measurement runs in a fresh interpreter (so the forkserver's own start counts), builds a
`ConcurrentVectorEnv(backend="process")` of gymenvs/Echo-v0 slots, resets it once and closes it.
Run from the repository root:  python examples/benchmarks/vector_startup.py [--slots 8 64]
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
envs = make_vector_env("gymenvs/Echo-v0", {slots}, backend="process", start_method="{method}")
built = time.perf_counter()
envs.reset(seed=0)
reset = time.perf_counter()
envs.close()
print(json.dumps([built - start, reset - built, time.perf_counter() - reset]))
"""


def measure(method: str, slots: int) -> list[float]:
    repository = os.path.dirname(os.path.dirname(os.path.abspath(gymenvs.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([repository, os.environ.get("PYTHONPATH", "")])}
    body = MEASURE.format(slots=slots, method=method).strip().splitlines()
    script = "if __name__ == '__main__':\n" + "".join(f"    {line}\n" for line in body)
    output = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--methods", nargs="+", default=["fork", "forkserver", "spawn"])
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    print(f"{'start method':<12} {'slots':>6} {'build s':>8} {'reset s':>8} {'close s':>8}")
    for slots in args.slots:
        for method in args.methods:
            build, reset, close = measure(method, slots)
            print(f"{method:<12} {slots:>6} {build:>8.2f} {reset:>8.2f} {close:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
