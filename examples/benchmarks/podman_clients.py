"""The docker SDK on Podman's Docker-compatible API against the `podman` package on its own (libpod) API, on the same
Podman service: the time of a container's start and removal, and of one exec, with each client.

    pip install podman   # not a dependency of gymenvs: only this comparison uses it
    python examples/benchmarks/podman_clients.py [--engine unix:///run/podman/podman.sock] [--starts 20] [--execs 200]

Needs the Podman service (.ci/setup starts it) and the base image in its store (`gymenvs swe build-images --runtime
podman`). The clients alternate round by round, so that other work on the machine weighs on both alike. Prints
medians and 99th percentiles with the load average; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

import docker
import podman

from gymenvs.container.images import BASE_IMAGE

sys.path.insert(0, str(Path(__file__).parent))
from runtimes import percentiles, seconds  # noqa: E402

KEEP_RUNNING = ["sleep", "600"]


def start_and_remove(containers) -> Callable[[], None]:
    """Create and start a container of the base image, then remove it (forced), with a client's `containers`."""
    def cycle() -> None:
        # init=True, as gymenvs starts its containers: the init passes the stop signal on, so neither client's forced
        # removal waits out a stop timeout (the podman package's removal takes no timeout).
        container = containers.create(BASE_IMAGE, command=KEEP_RUNNING, init=True,
                                      labels={"gymenvs.container.role": "benchmark"})
        container.start()
        container.remove(force=True)
    return cycle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="unix:///run/podman/podman.sock")
    parser.add_argument("--starts", type=int, default=20, help="containers started and removed per client")
    parser.add_argument("--execs", type=int, default=200, help="execs of `true` per client")
    args = parser.parse_args()
    clients = {
        "docker SDK, compatible API": docker.DockerClient(base_url=args.engine),
        "podman package, libpod API": podman.PodmanClient(base_url=args.engine),
    }
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    starts: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(args.starts):
        for name, client in clients.items():
            starts[name].append(seconds(start_and_remove(client.containers)))
    execs: dict[str, list[float]] = {name: [] for name in clients}
    running = {name: client.containers.run(BASE_IMAGE, KEEP_RUNNING, detach=True, init=True)
               for name, client in clients.items()}
    try:
        for _ in range(args.execs):
            for name, container in running.items():
                execs[name].append(seconds(lambda container=container: container.exec_run(["true"])))
    finally:
        for container in running.values():
            container.remove(force=True)
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name in clients:
        print(f"{name:<28} container create + start + remove: {percentiles(starts[name])}")
        print(f"{name:<28} exec of `true`:                    {percentiles(execs[name])}")


if __name__ == "__main__":
    main()
