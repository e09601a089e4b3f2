"""What the viewer's pages are made of: the page itself (HTML, script and style shipped in the package), and the
JSON it reads: the run's rows, and an episode with its token samples.

The page reads its data from the server (`/api/run`, `/api/episode/N`) or, in a self-contained file, from a
`<script type="application/json">` element that holds the run's rows and the episodes it shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

from gymenvs.trajectories.viewer.run import Run

#: Turns token ids into the text of each token (a tokenizer's), for the token page; None shows the ids only.
Decoder = Callable[[Sequence[int]], list[str]]
DATA_ELEMENT = "gymenvs-data"
ASSETS = ("viewer.js", "viewer.css")


def asset(name: str) -> str:
    """The text of one of the page's files (`index.html`, `viewer.js`, `viewer.css`)."""
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def run_data(run: Run) -> dict[str, Any]:
    """The run's rows and skipped files, as they are now (`run.refresh()` first for a run still being written)."""
    return {"root": str(run.root), "episodes": run.rows, "skipped": run.skipped}


def episode_data(run: Run, episode_id: int, decode: Decoder | None = None) -> dict[str, Any]:
    """Episode `episode_id`: its row, the ids before and after it, its trajectory (validated) and its token samples,
    each token with its text when `decode` is given. `KeyError` when the run has no such episode."""
    from gymenvs.trajectories.tokens import samples

    row, previous, following = run.neighbours(episode_id)
    trajectory = run.episode(episode_id)
    return {
        "row": row,
        "previous": previous,
        "next": following,
        "trajectory": trajectory.model_dump(mode="json", exclude_none=True),
        "samples": [[_segment(segment, decode) for segment in sample.segments] for sample in samples(trajectory)],
    }


def _segment(segment: Any, decode: Decoder | None) -> dict[str, Any]:
    data = {"producer": segment.producer, "step_id": segment.step_id, "ids": segment.token_ids}
    if segment.logprobs is not None:
        data["logprobs"] = segment.logprobs
    if decode is not None:
        data["texts"] = decode(segment.token_ids)
    return data


def standalone_html(run: Run, episode_id: int, decode: Decoder | None = None) -> str:
    """One episode's pages as a single HTML file: the script, the style and the data in it, nothing fetched."""
    episode = {**episode_data(run, episode_id, decode), "previous": None, "next": None}
    data = {"run": {**run_data(run), "episodes": [episode["row"]], "skipped": []}, "episodes": {str(episode_id): episode}}
    page = asset("index.html")
    page = page.replace('<link rel="stylesheet" href="assets/viewer.css">', f"<style>\n{asset('viewer.css')}</style>")
    page = page.replace('<script src="assets/viewer.js"></script>',
                        f'<script type="application/json" id="{DATA_ELEMENT}">{_json_in_html(data)}</script>\n'
                        f"<script>\n{_script_in_html(asset('viewer.js'))}</script>")
    return page


def _json_in_html(data: Any) -> str:
    """JSON that no text inside it can end the `<script>` element holding it (`<` is written `\\u003c`)."""
    return json.dumps(data, ensure_ascii=False).replace("<", "\\u003c")


def _script_in_html(script: str) -> str:
    if "</script" in script.lower():
        raise AssertionError("viewer.js must not contain '</script': it is inlined into a <script> element")
    return script
