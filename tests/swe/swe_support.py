"""What the tests of every room share about the SWE fixture tasks: the tasks, their ids, and the containers a
test process owns. Imported as `swe.swe_support` (pytest puts tests/ on the path)."""

from __future__ import annotations

import os

from gymenvs.container.runtime.owners import LABEL_PID
from gymenvs.swe.tasks import FIXTURES, load_tasks

FIXTURE_TASKS = load_tasks(FIXTURES)
FIXTURE_IDS = [task.instance_id for task in FIXTURE_TASKS]


def own_containers(client) -> list:
    """The containers this test process owns (labelled with its pid), seen by a plain docker client."""
    return client.containers.list(all=True, filters={"label": f"{LABEL_PID}={os.getpid()}"}, ignore_removed=True)
