"""Runs for the viewer's tests: the files of other producers than an evaluation, written into a run folder."""

import json
import shutil
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
#: A real SWE-v0 episode (a look around, an invalid call, the gold patch, submit), as RecordTrajectories wrote it.
SWE = "swe-textkit-gold.json"
HARBOR_TRIAL = "harbor/hello-world__abc"


def add_other_producers(folder: Path, *, trial_result: bool) -> None:
    """Put the SWE episode and a Harbor trial's trajectory (`<trial>/agent/trajectory.json`) into `folder`; with
    `trial_result`, the trial's result.json beside it too (the fields of Harbor's TrialResult the viewer reads)."""
    shutil.copy(FIXTURES / SWE, folder / SWE)
    trial = folder / HARBOR_TRIAL / "agent"
    trial.mkdir(parents=True)
    shutil.copy(FIXTURES / "harbor-hello-world.json", trial / "trajectory.json")
    if trial_result:
        (trial.parent / "result.json").write_text(json.dumps({
            "task_name": "hello-world", "trial_name": "hello-world__abc", "verifier_result": {"rewards": {"reward": 1.0}},
            "started_at": "2026-05-01T10:00:00Z", "finished_at": "2026-05-01T10:01:30.500000Z"}))
