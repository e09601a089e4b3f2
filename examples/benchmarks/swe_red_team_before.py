"""The red team's attacks graded by the grading code of an older commit: the "before" column of
docs/swe-security.md's red-team table.

    python examples/benchmarks/swe_red_team_before.py [--commit 7d1035a] [--attacks NAME ...]

Checks the commit out in a temporary detached worktree, copies today's tests/swe/test_swe_red_team.py
beside that commit's tests (so `ATTACKS` is today's list, its diffs built from the fixture repos
there), and grades each attack (or those named) with that commit's `grading.grade` and its defaults, in
a child Python whose import path is the worktree alone. Prints one line per attack: its name, then
the old reward and status. Needs a Docker engine and the fixture images (`gymenvs swe build-images`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Run in the worktree: grade each named attack with the old code (the stale-bytecode attack builds its diff in a container).
CHILD = """
import json, sys
import docker
from gymenvs.swe.grading import grade
from gymenvs.swe.images import image_for
from tests.swe import _red_team_today as red_team

client = docker.from_env()
names = set(json.loads(sys.argv[1]))
for attack in red_team.ATTACKS:
    if names and attack.name not in names:
        continue
    diff = attack.diff or red_team.stale_bytecode(client)
    report = grade(client, red_team.TASK, diff, image=image_for(red_team.TASK), timeout=300)
    print(f"{attack.name} | {report.reward:g} ({report.status})", flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", default="7d1035a")
    parser.add_argument("--attacks", nargs="*", default=[], help="attack names (default: all)")
    args = parser.parse_args()
    worktree = Path(tempfile.mkdtemp(prefix="gymenvs-red-team-before-")) / "repo"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(worktree), args.commit], check=True)
    try:
        shutil.copy(ROOT / "tests/swe/test_swe_red_team.py", worktree / "tests/swe/_red_team_today.py")
        subprocess.run([sys.executable, "-c", CHILD, json.dumps(args.attacks)], cwd=worktree, check=True,
                       env={**os.environ, "PYTHONPATH": str(worktree)})
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], check=True)
        shutil.rmtree(worktree.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
