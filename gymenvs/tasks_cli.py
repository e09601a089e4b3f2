"""`gymenvs tasks validate SOURCE` (and `build-images`, `regrade`): one command for every task family's datasets.

A local folder or archive is Harbor tasks; anything else ("fixtures", a .jsonl/.parquet file, a Hub
name) is a SWE dataset; `--format` says which when the source does not show it (a Hub dataset of task
files). Each task is judged by its family
(`TaskFamily.validate`), through the one report, resuming and worker machinery
(`gymenvs.container.validation.run_validation`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

#: The families `--format` names.
FAMILIES = {"harbor": "gymenvs.terminal.family:HarborFamily", "swe": "gymenvs.swe.family:SWEFamily"}
FORMATS = ("auto", *FAMILIES)


def add_commands(parser: argparse.ArgumentParser) -> None:
    from gymenvs.container.runtime_cli import add_push_option, add_runtime_options

    commands = parser.add_subparsers(dest="tasks_command", required=True, metavar="TASKS_COMMAND")
    validate = commands.add_parser("validate", help="check each task before training on it: a Harbor task's oracle scores 1 "
                                   "and an empty run does not; a SWE task's gold patch resolves it and the empty patch does "
                                   "not; every time with --runs N; writes a report and the list of valid tasks; a rerun resumes")
    add_validate_arguments(validate)
    validate.add_argument("--format", choices=FORMATS, default="auto",
                          help="harbor (task folders) or swe (a dataset of rows); auto (default): a local folder or archive "
                          "is harbor, anything else swe")
    add_runtime_options(validate)
    validate.set_defaults(run=run_validate)

    regrade = commands.add_parser("regrade", help="grade stored episodes again with the current grader and tasks, "
                                  "without the agent (SWE: their diff; Harbor: the snapshot kept with keep_snapshots=True "
                                  "while its image is there, else the changed files kept with keep_changes=True); "
                                  "prints each episode's reward then and now (exit code 1 if one could not be graded)")
    regrade.add_argument("trajectories", type=Path, help="a trajectory file, or a folder of them (searched at any depth)")
    regrade.add_argument("--dataset", default="fixtures", help="where the episodes' tasks are, as for validate "
                         "(default: the fixtures)")
    regrade.add_argument("--format", choices=FORMATS, default="auto",
                         help="harbor or swe; auto (default): the family of the episodes' env")
    regrade.add_argument("--split", help="dataset split (default: the only one, or test)")
    regrade.add_argument("--workers", type=int, default=2, help="episodes graded at once (default 2)")
    regrade.add_argument("--changed-only", action="store_true",
                         help="print only the episodes whose reward changed, or that could not be graded")
    add_runtime_options(regrade)
    regrade.set_defaults(run=run_regrade)

    build = commands.add_parser("build-images", help="make every task's image present (a Harbor task's is built from its "
                                "environment/), and with --agents each agent's derived image of it")
    build.add_argument("dataset", nargs="?", default="fixtures", help="as for validate")
    build.add_argument("--format", choices=FORMATS, default="auto", help="as for validate")
    build.add_argument("--split", help="dataset split (default: the only one, or test)")
    build.add_argument("--instance-ids", nargs="+", metavar="ID", help="only these tasks (Harbor: task names)")
    build.add_argument("--agents", nargs="+", default=[], metavar="AGENT",
                       help="also install these agents into derived images (as `gymenvs swe install-agent` does)")
    build.add_argument("--quiet", action="store_true", help="no progress bars")
    add_runtime_options(build)
    add_push_option(build)
    build.set_defaults(run=run_build_images)


def add_validate_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `gymenvs tasks validate`."""
    parser.add_argument("dataset", nargs="?", default="fixtures",
                        help='SWE: "fixtures" (default), a .json/.jsonl/.parquet file or a Hub dataset name; '
                        "Harbor: a folder of task folders or an archive of one")
    parser.add_argument("--split", help="dataset split (default: the only one, or test)")
    parser.add_argument("--image-template", help="SWE: image name template, e.g. 'myorg/{swebench_id}:latest'")
    parser.add_argument("--instance-ids", nargs="+", metavar="ID", help="only these tasks (Harbor: task names)")
    parser.add_argument("--runs", type=int, default=1, help="grade each patch (Harbor: the oracle and the empty run) this "
                        "many times; a result that changes between runs is flaky (default 1)")
    parser.add_argument("--workers", type=int, default=2, help="tasks validated at once (default 2)")
    parser.add_argument("--timeout-s", type=float, default=None,
                        help="seconds the tests of one run may take (default: SWE 1800, Harbor [verifier] timeout_sec)")
    parser.add_argument("--report", type=Path, default=Path("validation.jsonl"),
                        help="the per-task report (JSONL); tasks it already judged are skipped (default validation.jsonl)")
    parser.add_argument("--valid-tasks", type=Path, default=None,
                        help="write the valid tasks here: SWE, their rows, a dataset SWE-v0 reads (default valid_tasks.jsonl); "
                        "Harbor, their folders, one per line (default valid_tasks.txt)")
    parser.add_argument("--grade-as-root", action="store_true", help="SWE: run the tests as root, as SWE-v0's grade_as_root")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def detect_format(source: str) -> str:
    """ "harbor" for a local folder or archive, else "swe"."""
    from gymenvs.terminal.tasks import ARCHIVE_SUFFIXES

    path = Path(source)
    return "harbor" if path.is_dir() or (path.is_file() and source.endswith(ARCHIVE_SUFFIXES)) else "swe"


def run_build_images(args: argparse.Namespace) -> int:
    from gymenvs.container.agent.install import install_agent
    from gymenvs.container.agent.specs import agent_spec, derived_image
    from gymenvs.container.family import select_tasks
    from gymenvs.container.runtime_cli import push_images, runtime_of

    try:
        family = _family_class(args)(dataset=args.dataset, split=args.split, instance_ids=args.instance_ids)
        tasks = select_tasks(tuple(family.load_tasks()), family.options.instance_ids)
        specs = [agent_spec(agent) for agent in args.agents]
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    runtime = runtime_of(args)
    images = [family.image(task, runtime).name for task in tasks]
    print(f"task images: {len(images)} present")
    for spec in specs:
        built = install_agent(runtime, spec, images, progress=not args.quiet)
        print(f"{spec.name}: {len(built)} derived image(s) built, {len(set(images)) - len(built)} present"
              + (f" ({', '.join(derived_image(image, spec) for image in images)})" if built else ""))
    push_images(args, runtime, images + [derived_image(image, spec) for spec in specs for image in images])
    return 0


def _family_class(args: argparse.Namespace) -> Any:
    """The family class `--format` (or the form of the dataset) names."""
    from gymenvs.container.env import resolve_family

    fmt = detect_format(args.dataset) if args.format == "auto" else args.format
    return resolve_family(FAMILIES[fmt])


def run_validate(args: argparse.Namespace) -> int:
    from gymenvs.container.family import TaskFamily, select_tasks
    from gymenvs.container.reaper import reap
    from gymenvs.container.runtime_cli import runtime_of
    from gymenvs.container.validation import VALID, run_validation

    if args.runs < 1 or args.workers < 1:
        print(f"--runs={args.runs} --workers={args.workers}: give 1 or more", file=sys.stderr)
        return 2
    family_class = _family_class(args)
    try:
        family: TaskFamily = family_class(**_family_options(args, family_class))
        tasks = select_tasks(tuple(family.load_tasks()), family.options.instance_ids)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    runtime = runtime_of(args)
    reap(runtime)
    verdicts = run_validation(tasks, lambda task, runs: family.validate(task, runtime, runs=runs, timeout_s=args.timeout_s),
                              key=lambda task: task.instance_id, fingerprint_of=family.fingerprint, report=args.report,
                              runs=args.runs, workers=args.workers, progress=not args.quiet)
    valid_tasks = args.valid_tasks or Path(family.valid_tasks_file)
    valid = {verdict.instance_id for verdict in verdicts if verdict.status == VALID}
    kept = family.write_tasks([task for task in tasks if task.instance_id in valid], valid_tasks)
    return print_verdicts(verdicts, args.report, valid_tasks, kept)


def run_regrade(args: argparse.Namespace) -> int:
    from gymenvs.container.env import resolve_family
    from gymenvs.container.regrading import FAMILY_OF_ENV, Regraded, StoredEpisode, regrade_episodes, trajectory_files
    from gymenvs.container.runtime_cli import runtime_of

    try:
        episodes = [StoredEpisode.read(path) for path in trajectory_files(args.trajectories)]
        formats = {args.format} if args.format != "auto" else {FAMILY_OF_ENV.get(str(e.env_id), "?") for e in episodes}
        if len(formats) != 1 or "?" in formats:
            raise ValueError(f"the episodes' envs {sorted({str(e.env_id) for e in episodes})} name no one family: give "
                             "--format harbor or swe")
        family_class: Any = resolve_family(FAMILIES[formats.pop()])
        family = family_class(dataset=args.dataset, split=args.split)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    def report(result: Regraded) -> None:
        if result.changed or result.failed or not args.changed_only:
            print(result.line(), flush=True)

    results = regrade_episodes(episodes, family, runtime_of(args), workers=args.workers, on_done=report)
    changed, failed = sum(result.changed for result in results), sum(result.failed for result in results)
    print(f"{len(results)} episodes graded again: {changed} changed, {len(results) - changed - failed} the same, "
          f"{failed} could not be graded")
    return 1 if failed else 0


def _family_options(args: argparse.Namespace, family_class: Any) -> dict[str, Any]:
    """The family's options from the command line; an option of another family is a `ValueError` naming it."""
    options: dict[str, Any] = {"dataset": args.dataset, "split": args.split, "instance_ids": args.instance_ids}
    extra = {"image_template": ("--image-template", args.image_template),
             "grade_as_root": ("--grade-as-root", args.grade_as_root or None)}
    for name, (flag, value) in extra.items():
        if value is None:
            continue
        if name not in family_class.option_names():
            raise ValueError(f"{flag}: an option of another family; {args.dataset!r} holds {family_class.name} tasks")
        options[name] = value
    return options


def print_verdicts(verdicts: list[Any], report: Path, valid_tasks: Path, kept: int) -> int:
    """One line per task and a count; the exit code (0 only if every task is valid)."""
    from gymenvs.container.validation import INVALID, VALID

    for verdict in verdicts:
        note = " (from the report)" if verdict.resumed else f"\t{verdict.seconds:.1f}s"
        print(f"{verdict.instance_id}\t{verdict.summary()}{note}")
    counts = {status: sum(v.status == status for v in verdicts) for status in (VALID, INVALID, "error")}
    print(f"valid {counts[VALID]}/{len(verdicts)}, invalid {counts[INVALID]}, errors {counts['error']}; "
          f"report: {report}; valid tasks: {valid_tasks} ({kept})")
    return 0 if counts[VALID] == len(verdicts) else 1
