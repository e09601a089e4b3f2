"""What grading a Harbor task costs, with and without a service the agent left running.

    python examples/benchmarks/terminal_grading.py [--runs 5]

Two tasks, each run `--runs` times with its oracle (`gymenvs.terminal.validate.run_episode`, as `gymenvs tasks
validate` runs them): the fixture `edit-config` (nothing listens when the agent's turn ends) and a task written
here whose oracle starts a web server that its test fetches a file from. Prints each task's rewards and the
median, min and max of the grading's own seconds (`VerifierResult.seconds`: the snapshot, the grading container,
any services started again, test.sh, reading the reward). Needs a Docker engine and the project's base image.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import textwrap
from pathlib import Path

from gymenvs.container.runtime import default_runtime
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
    runtime = default_runtime()
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    with tempfile.TemporaryDirectory() as root:
        tasks = {"edit-config (no service)": TerminalTask.from_dir(fixtures_path() / "edit-config"),
                 "serve-health (a web server)": service_task(Path(root))}
        for label, task in tasks.items():
            results = [run_episode(runtime, task, oracle=True) for _ in range(options.runs)]
            seconds = [result.seconds for result in results]
            print(f"{label:<28} rewards {' '.join(f'{r.reward:g}' for r in results)}; grading s: median "
                  f"{statistics.median(seconds):.2f}, min {min(seconds):.2f}, max {max(seconds):.2f}", flush=True)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
