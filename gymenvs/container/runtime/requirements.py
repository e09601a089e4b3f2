"""What a task may need of a runtime beyond sandboxes, images and volumes, by name.

A task family says what each task needs (`TaskFamily.requirements`); a runtime class says what it cannot do
(its `lacks`: requirement -> why). A container env leaves out, at construction, the tasks whose needs its runtime
does not meet (`unmet`; they are refused with why, and none left is a `ValueError`), so no episode finds out midway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def unmet(lacks: Mapping[str, str], needs: Iterable[str]) -> str:
    """Why a runtime that `lacks` these cannot meet `needs` ("" when it can)."""
    return "; ".join(lacks[requirement] for requirement in sorted(set(needs)) if requirement in lacks)
