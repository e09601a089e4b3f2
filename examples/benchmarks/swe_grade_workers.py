"""Wall time of `gymenvs swe grade` on N predictions (gold patches) over the fixture tasks, per worker count.

The N instances are copies of the shipped fixture tasks (same images, new instance ids), so the
run needs only the images `.ci/setup` builds. Each worker count grades from scratch (its own run id).

    .venv/bin/python examples/benchmarks/swe_grade_workers.py --predictions 30 --workers 1 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gymenvs.swe.tasks import fixtures_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predictions", type=int, default=30)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    rows = [json.loads(line) for line in (fixtures_path() / "tasks.jsonl").read_text().splitlines() if line.strip()]
    copies = [{**rows[n % len(rows)], "instance_id": f"{rows[n % len(rows)]['instance_id']}-copy{n}"}
              for n in range(args.predictions)]
    with tempfile.TemporaryDirectory(prefix="gymenvs-grade-bench-") as tmp:
        folder = Path(tmp)
        (folder / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in copies))
        (folder / "preds.jsonl").write_text("".join(
            json.dumps({"instance_id": row["instance_id"], "model_patch": row["patch"], "model_name_or_path": "gold"}) + "\n"
            for row in copies))
        for workers in args.workers:
            command = [sys.executable, "-m", "gymenvs.cli", "swe", "grade", "--quiet", "--dataset", str(folder / "tasks.jsonl"),
                       "--predictions", str(folder / "preds.jsonl"), "--workers", str(workers), "--run-id", f"w{workers}",
                       "--log-dir", str(folder / "logs"), "--report-dir", str(folder)]
            started = time.monotonic()
            result = subprocess.run(command, capture_output=True, text=True)
            seconds = time.monotonic() - started
            summary = json.loads((folder / f"gold.w{workers}.json").read_text())
            load = os.getloadavg()
            print(f"grade --workers {workers}: {args.predictions} predictions in {seconds:.1f} s "
                  f"({summary['resolved_instances']} resolved, exit {result.returncode}); "
                  f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
