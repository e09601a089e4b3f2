"""What grading a Harbor task costs, in each way a task is graded.

    python examples/benchmarks/terminal_grading.py [--runs 5]

Four tasks, each run `--runs` times with its oracle (`gymenvs.terminal.validate.run_episode`, as `gymenvs tasks
validate` runs them): the fixture `edit-config` (nothing listens when the agent's turn ends), a task written
here whose oracle starts a web server that its test fetches a file from, the compose fixture `record-in-sidecar`
(a ledger service beside the agent's container) and the two-step fixture `grow-a-script`. Prints each task's
rewards and the median, min and max of the grading's own seconds (`VerifierResult.seconds`: the snapshot, the
grading container, any services started again, test.sh, reading the reward; summed over a task's steps) and of the
whole run (the sidecars, the containers, the oracle, the grading). Needs a Docker engine and the project's base
image.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import textwrap
import time
from pathlib import Path

from gymenvs.container.runtime import shared_runtime
from gymenvs.terminal.task import TerminalTask
from gymenvs.terminal.tasks import fixtures_path
from gymenvs.terminal.validate import run_episode

SERVE = ("echo ok > /srv/health && cd /srv && (setsid nohup python3 -m http.server 8000 >/dev/null 2>&1 < /dev/null &)\n"
         "for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8000) 2>/dev/null && break; sleep 0.1; done")
FETCH = ("if python3 -c \"import sys, urllib.request; "
         "sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=5).read().strip() != b'ok')\"; "
         "then echo 1; else echo 0; fi > /logs/verifier/reward.txt")


def service_task(root: Path) -> TerminalTask:
    folder = root / "serve-health"
    for part in ("environment", "tests", "solution"):
        (folder / part).mkdir(parents=True)
    (folder / "instruction.md").write_text("Serve /srv over HTTP on port 8000, with /srv/health saying ok.\n")
    (folder / "task.toml").write_text(textwrap.dedent("""\
        [task]
        name = "serve-health"
        [environment]
        memory_mb = 512
        allow_internet = false
        """))
    (folder / "environment" / "Dockerfile").write_text("FROM gymenvs/swe-base:bookworm\nWORKDIR /root\n")
    (folder / "tests" / "test.sh").write_text(f"#!/bin/bash\n{FETCH}\n")
    (folder / "solution" / "solve.sh").write_text(f"#!/bin/bash\n{SERVE}\n")
    return TerminalTask.from_dir(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    runtime = shared_runtime()
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    with tempfile.TemporaryDirectory() as root:
        tasks = {"edit-config (no service)": TerminalTask.from_dir(fixtures_path() / "edit-config"),
                 "serve-health (a web server)": service_task(Path(root)),
                 "record-in-sidecar (compose)": TerminalTask.from_dir(fixtures_path() / "record-in-sidecar"),
                 "grow-a-script (two steps)": TerminalTask.from_dir(fixtures_path() / "grow-a-script")}
        for label, task in tasks.items():
            run_episode(runtime, task, oracle=True)  # builds the images: not timed
            results, runs = [], []
            for _ in range(options.runs):
                started = time.monotonic()
                results.append(run_episode(runtime, task, oracle=True))
                runs.append(time.monotonic() - started)
            print(f"{label:<28} rewards {' '.join(f'{r.reward:g}' for r in results)}; grading s: "
                  f"{spread([r.seconds for r in results])}; whole run s: {spread(runs)}", flush=True)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f}, min {min(values):.2f}, max {max(values):.2f}"


if __name__ == "__main__":
    main()
