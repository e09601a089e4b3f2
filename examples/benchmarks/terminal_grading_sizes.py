"""What Terminal grading costs as the agent's changes grow, in each way it puts them in the verifier.

    python examples/benchmarks/terminal_grading_sizes.py [--runs 2]

An agent container of the base image writes one of: nothing, one small file, one 120 MB file, or a copy of
/usr/lib/python3 (about 2,000 files, 29 MB); then `grade_task` grades it, with a verifier started before the agent
ran (its changes copied in from its layer: `Sandbox.changes_archive`) and without (a snapshot of its container and a
fresh verifier from it), alternating, `--runs` times each. Prints the median grading overhead (`VerifierResult.seconds`
less `test_seconds`) per size and way. The test is one `test -e`. Needs a Docker engine and the project's base image.
Prints figures; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import uuid
from pathlib import Path

from gymenvs.container.images import BASE_IMAGE
from gymenvs.container.runtime import Limits, shared_runtime
from gymenvs.terminal.grading import grade_task
from gymenvs.terminal.task import TerminalTask
from gymenvs.terminal.verifier import Verifier

CHANGES = {
    "nothing": "true",
    "one small file": "echo hello > /app/out.txt",
    "one 120 MB file": "head -c 120000000 /dev/urandom > /opt/big",
    "2,000 files, 29 MB": "cp -a /usr/lib/python3 /opt/copy",
}
LIMITS = Limits(mem_limit="512m", network=False, disk_limit=None)


def make_task(root: Path) -> TerminalTask:
    folder = root / "sizes"
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "instruction.md").write_text("Change files.\n")
    (folder / "task.toml").write_text('schema_version = "1.0"\n[verifier]\ntimeout_sec = 60\n[environment]\ncpus = 1\n'
                                      'memory_mb = 512\nstorage_mb = 2048\nallow_internet = false\n')
    (folder / "environment" / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nWORKDIR /app\n")
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\ntest -e /app && echo 1 > /logs/verifier/reward.txt\n")
    return TerminalTask.from_dir(folder)


def overhead(runtime, task: TerminalTask, command: str, *, ahead: bool) -> float:
    sandbox = runtime.start(BASE_IMAGE, role="bench", episode_id="sizes", workdir="/app", limits=LIMITS)
    try:
        verifier = Verifier.start(runtime, BASE_IMAGE, task, limits=LIMITS, workdir="/app",
                                  nonce=uuid.uuid4().hex[:12]) if ahead else None
        assert sandbox.run(command, timeout=300).exit_code == 0
        result = grade_task(sandbox, task, ahead=verifier)
        assert result.reward == 1.0, result
        return result.seconds - result.test_seconds
    finally:
        sandbox.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    runtime = shared_runtime("docker")
    task = make_task(Path(tempfile.mkdtemp()))
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    for name, command in CHANGES.items():
        seconds: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.runs):
            for ahead in (True, False):
                seconds[ahead].append(overhead(runtime, task, command, ahead=ahead))
        print(f"{name:<20} median overhead: copied into a verifier started ahead {statistics.median(seconds[True]):.3f} s, "
              f"a snapshot {statistics.median(seconds[False]):.3f} s", flush=True)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
