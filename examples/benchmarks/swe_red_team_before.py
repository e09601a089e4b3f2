"""The red team's attacks graded by the grading code of an older commit: the "before" column of
docs/swe-security.md's red-team table.

    python examples/benchmarks/swe_red_team_before.py [--commit 7d1035a] [--attacks NAME ...]

Builds today's attacks (tests/swe/test_red_team.py's `ATTACKS`, the stale-bytecode one in a container),
checks the commit out in a temporary detached worktree, and grades each attack (or those named) with that
commit's `grading.grade` and its defaults, in a child Python whose import path is the worktree alone: the
child reads the diffs as JSON, so it needs nothing of today's code. Prints one line per attack: its name,
then the old reward and status. Needs a Docker engine and the fixture images (`gymenvs swe build-images`).
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
#: Run in the worktree, on the old code: grade each (name, diff) read from stdin.
CHILD = """
import json, sys
import docker
from gymenvs.swe.grading import grade
from gymenvs.swe.sandbox.images import image_for
from gymenvs.swe.tasks import FIXTURES, load_tasks

attacks = json.load(sys.stdin)
task = next(task for task in load_tasks(FIXTURES) if task.instance_id == attacks["task"])
client = docker.from_env()
for name, diff in attacks["diffs"]:
    report = grade(client, task, diff, image=image_for(task), timeout=300)
    print(f"{name} | {report.reward:g} ({report.status})", flush=True)
"""


def todays_attacks(names: list[str]) -> dict:
    """Today's attacks as {"task": instance id, "diffs": [(name, diff)]} (the named ones, or all)."""
    import docker

    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from tests.swe import test_red_team as red_team

    client = docker.from_env()
    chosen = [attack for attack in red_team.ATTACKS if not names or attack.name in names]
    return {"task": red_team.TASK.instance_id,
            "diffs": [(attack.name, attack.diff or red_team.stale_bytecode(client)) for attack in chosen]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", default="7d1035a")
    parser.add_argument("--attacks", nargs="*", default=[], help="attack names (default: all)")
    args = parser.parse_args()
    attacks = json.dumps(todays_attacks(args.attacks))
    worktree = Path(tempfile.mkdtemp(prefix="gymenvs-red-team-before-")) / "repo"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(worktree), args.commit], check=True)
    try:
        subprocess.run([sys.executable, "-c", CHILD], cwd=worktree, check=True, input=attacks, text=True,
                       env={**os.environ, "PYTHONPATH": str(worktree)})
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], check=True)
        shutil.rmtree(worktree.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
