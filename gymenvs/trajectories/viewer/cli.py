"""`gymenvs view PATH`: serve the viewer of a run on a local port, or write one episode as a single HTML file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DEFAULT_PORT = 8765


def add_command(commands: Any) -> None:
    view = commands.add_parser("view", help="browse ATIF trajectories in a local, offline viewer")
    view.add_argument("path", help="a trajectory file, or a folder of them at any depth (an eval's, a rollout's batches)")
    view.add_argument("--port", type=int, default=DEFAULT_PORT,
                      help=f"the port to serve on (default {DEFAULT_PORT}; 0: any free one)")
    view.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine only)")
    view.add_argument("--tokenizer", help="a tokenizer (a local folder or a cached model name) to show each token's text "
                                          "on the token page; without one, the token ids are shown")
    view.add_argument("--html", metavar="FILE", help="write one episode (--episode) as a single self-contained HTML file "
                                                     "instead of serving")
    view.add_argument("--episode", type=int, default=0, help="the episode --html writes, from 0, in the run page's order")
    view.set_defaults(run=run_view)


def run_view(args: argparse.Namespace) -> int:
    from gymenvs.trajectories.viewer import Run, ViewerServer, standalone_html

    try:
        run = Run.open(args.path)
        decode = tokenizer_decoder(args.tokenizer) if args.tokenizer else None
    except (FileNotFoundError, OSError, ValueError) as exc:
        print(f"gymenvs view: {exc}", file=sys.stderr)
        return 2
    if args.html:
        if not 0 <= args.episode < len(run.rows):
            print(f"gymenvs view: --episode {args.episode}: {args.path} holds {len(run.rows)} episodes", file=sys.stderr)
            return 2
        Path(args.html).write_text(standalone_html(run, args.episode, decode), encoding="utf-8")
        print(f"{args.html}: episode {args.episode} ({run.rows[args.episode]['file']})")
        return 0
    try:
        server = ViewerServer(run, host=args.host, port=args.port, decode=decode)
    except OSError as exc:
        print(f"gymenvs view: cannot listen on {args.host}:{args.port}: {exc.strerror} (choose another --port)", file=sys.stderr)
        return 2
    print(f"{len(run.rows)} episodes of {args.path} ({len(run.skipped)} other files skipped) at {server.url}  (Ctrl-C stops)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def tokenizer_decoder(name: str):
    """Each token's text, by `name`'s tokenizer (from local files only: the viewer never downloads)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=True)
    return lambda ids: tokenizer.batch_decode([[token] for token in ids])
