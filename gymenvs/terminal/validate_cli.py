"""`gymenvs tasks validate SOURCE`: one command for Harbor task folders and SWE datasets.

A local folder or archive is Harbor tasks; anything else ("fixtures", a .jsonl/.parquet file, a Hub
name) is a SWE dataset, as `gymenvs swe validate` (its alias) reads it; `--format` says which when
the source does not show it (a Hub dataset of task files).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gymenvs.swe.cli import add_validate_arguments, print_verdicts, validate_swe

FORMATS = ("auto", "harbor", "swe")


def add_commands(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="tasks_command", required=True, metavar="TASKS_COMMAND")
    validate = commands.add_parser("validate", help="check each task before training on it: a Harbor task's oracle scores 1 "
                                   "and an empty run does not; a SWE task's gold patch resolves it and the empty patch does "
                                   "not; every time with --runs N; writes a report and the list of valid tasks; a rerun resumes")
    add_validate_arguments(validate)
    validate.add_argument("--format", choices=FORMATS, default="auto",
                          help="harbor (task folders) or swe (a dataset of rows); auto (default): a local folder or archive "
                          "is harbor, anything else swe")
    validate.set_defaults(run=run_validate)


def detect_format(source: str) -> str:
    """ "harbor" for a local folder or archive, else "swe"."""
    from gymenvs.terminal.tasks import ARCHIVE_SUFFIXES

    path = Path(source)
    return "harbor" if path.is_dir() or (path.is_file() and source.endswith(ARCHIVE_SUFFIXES)) else "swe"


def run_validate(args: argparse.Namespace) -> int:
    fmt = detect_format(args.dataset) if args.format == "auto" else args.format
    return validate_harbor(args) if fmt == "harbor" else validate_swe(args)


def validate_harbor(args: argparse.Namespace) -> int:
    from gymenvs.swe.sandbox.docker import docker_client, reap_orphans
    from gymenvs.terminal.grading import reap_grading_leftovers
    from gymenvs.terminal.tasks import load_terminal_tasks
    from gymenvs.terminal.validate import run_episode, validate_terminal_tasks, write_valid_tasks

    if args.runs < 1 or args.workers < 1:
        print(f"--runs={args.runs} --workers={args.workers}: give 1 or more", file=sys.stderr)
        return 2
    unused = [option for option, value in (("--image-template", args.image_template), ("--grade-as-root", args.grade_as_root))
              if value]
    if unused:
        print(f"{', '.join(unused)}: a SWE option; {args.dataset!r} holds Harbor tasks", file=sys.stderr)
        return 2
    try:
        tasks = list(load_terminal_tasks(args.dataset, split=args.split))
        if args.instance_ids:
            missing = sorted(set(args.instance_ids) - {task.name for task in tasks})
            if missing:
                raise ValueError(f"no task named {missing} in {args.dataset!r}")
            tasks = [task for task in tasks if task.name in set(args.instance_ids)]
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    client = docker_client()
    reap_orphans(client)
    reap_grading_leftovers(client)
    verdicts = validate_terminal_tasks(tasks, lambda task, oracle: run_episode(client, task, oracle, timeout_s=args.timeout_s),
                                       report=args.report, runs=args.runs, workers=args.workers, progress=not args.quiet)
    valid_tasks = args.valid_tasks or Path("valid_tasks.txt")
    return print_verdicts(verdicts, args.report, valid_tasks, write_valid_tasks(tasks, verdicts, valid_tasks))
