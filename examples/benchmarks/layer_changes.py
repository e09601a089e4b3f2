"""What listing a container's changes costs: the engine's diff against reading its overlay layer on this host.

    python examples/benchmarks/layer_changes.py [--calls 10] [--image gymenvs/swe-fixture.textkit-1:latest]

Starts one container of `--image` on the local Docker engine, has it change a file, add one and delete one (what
an agent's episode leaves), stops it as grading does, then lists its changes `--calls` times each way, alternating:
the engine's `GET /containers/{id}/changes` (what `DockerSandbox.changed_paths` asked until it read the layer), and
`gymenvs.container.runtime.docker.layer` reading the layer's directories. Prints the median wall time per call and
the engine's CPU time per call (dockerd's, containerd's and their shims', from /proc, children included), and the
number of paths each listed. Needs root (the engine's directories) and a local engine. Prints figures; nothing is
asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import docker

from gymenvs.container.runtime.docker.layer import layer_changes, readable_layers

ENGINE_PROCESSES = ("dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2")
AN_EPISODE = "cd /testbed 2>/dev/null || cd /tmp; echo x >> $(ls | head -1); echo new > added.txt; rm -f /etc/shells"


def engine_cpu_seconds() -> float:
    """The CPU time of the engine's processes so far, their reaped children's included."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as file:
                fields = file.read()
        except OSError:
            continue
        name, rest = fields[fields.index("(") + 1 : fields.rindex(")")], fields[fields.rindex(")") + 2 :].split()
        if name in ENGINE_PROCESSES:
            total += sum(int(value) for value in rest[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def timed(list_changes, calls: int) -> tuple[list[float], float, int]:
    """(wall seconds per call, engine CPU seconds per call, paths listed)."""
    walls, cpu_before = [], engine_cpu_seconds()
    for _ in range(calls):
        started = time.perf_counter()
        listed = list_changes()
        walls.append(time.perf_counter() - started)
    return walls, (engine_cpu_seconds() - cpu_before) / calls, len(listed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--image", default="gymenvs/swe-fixture.textkit-1:latest")
    args = parser.parse_args()
    api = docker.APIClient()
    container = api.create_container(args.image, ["sleep", "600"], network_disabled=True)["Id"]
    try:
        api.start(container)
        exec_id = api.exec_create(container, ["bash", "-c", AN_EPISODE])["Id"]
        api.exec_start(exec_id)
        api.kill(container)
        api.wait(container)
        layers = readable_layers(api.inspect_container(container)["GraphDriver"])
        if layers is None:
            raise SystemExit("this engine's layers cannot be read here (not overlay2, not local, or not root)")
        ways = {"engine diff": lambda: api.diff(container), "layer read": lambda: layer_changes(*layers)}
        results: dict[str, list] = {name: [[], [], 0] for name in ways}
        for _ in range(2):  # alternate, in halves
            for name, way in ways.items():
                walls, cpu, listed = timed(way, max(1, args.calls // 2))
                results[name][0] += walls
                results[name][1].append(cpu)
                results[name][2] = listed
        print(f"{args.image}, {args.calls} calls each, load average {os.getloadavg()[0]:.2f}")
        for name, (walls, cpus, listed) in results.items():
            print(
                f"{name:12s} median {statistics.median(walls) * 1000:8.2f} ms  engine CPU "
                f"{statistics.mean(cpus) * 1000:7.1f} ms per call  ({listed} paths)"
            )
    finally:
        api.remove_container(container, force=True)


if __name__ == "__main__":
    main()
