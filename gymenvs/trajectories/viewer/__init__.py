"""`gymenvs view`: a local, offline viewer of ATIF trajectories.

- `Run.open(path)` reads the rows of a run: a trajectory file, or every trajectory under a folder;
- `ViewerServer(run)` serves its pages on a local port: the run page (every episode, sortable and
  filterable, outcome counts, reward by task, turns), an episode page (the conversation, tool calls,
  observations, side calls, the diff and the grading log) and a token page (each token of a training
  sample by who produced it, shaded by logprob, with the env mask);
- `standalone_html(run, index)` makes one episode's pages a single HTML file to share.

The page's script and style ship in the package (`static/`); nothing is fetched from the network.
How to read the pages: docs/trajectories.md.
"""

from gymenvs.trajectories.viewer.pages import standalone_html
from gymenvs.trajectories.viewer.run import Run
from gymenvs.trajectories.viewer.server import ViewerServer

__all__ = ["Run", "ViewerServer", "standalone_html"]
