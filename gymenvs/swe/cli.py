"""`gymenvs swe ...`: build images offline, install agents, list tasks, grade patches, reap orphaned containers
(`gymenvs tasks validate` validates a dataset's tasks)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_commands(parser: argparse.ArgumentParser) -> None:
    from gymenvs.container.runtime_cli import add_push_option, add_runtime_options

    commands = parser.add_subparsers(dest="swe_command", required=True, metavar="SWE_COMMAND")

    base = commands.add_parser("build-base-image", help="build the Debian base image offline (debootstrap + import)")
    _add_base_options(base)
    add_runtime_options(base)
    base.set_defaults(run=_build_base_image)

    images = commands.add_parser("build-images", help="build the base image if missing, then the fixture task images")
    _add_base_options(images)
    add_runtime_options(images)
    add_push_option(images)
    images.set_defaults(run=_build_images)

    tasks = commands.add_parser("tasks", help="list a dataset's tasks and their images")
    _add_dataset_options(tasks)
    tasks.set_defaults(run=_list_tasks)

    grade = commands.add_parser("grade", help="grade predictions (default: the gold patches) in fresh containers, "
                                "writing the SWE-bench harness's report layout; a run started again resumes")
    _add_dataset_options(grade)
    grade.add_argument("--predictions", type=Path, help="JSON or JSONL of {instance_id, model_patch, model_name_or_path}")
    grade.add_argument("--instance-ids", nargs="+", metavar="ID", help="only these tasks")
    grade.add_argument("--workers", type=int, default=2, help="instances graded at once (default 2)")
    grade.add_argument("--timeout", type=float, default=1800, help="seconds the tests of one instance may take")
    grade.add_argument("--run-id", default="gymenvs", help="names the run; the same id resumes it (default gymenvs)")
    grade.add_argument("--log-dir", type=Path, default=Path("logs/run_evaluation"),
                       help="per-instance reports go to LOG_DIR/RUN_ID/MODEL/INSTANCE_ID (default logs/run_evaluation)")
    grade.add_argument("--report-dir", type=Path, default=Path("."), help="where MODEL.RUN_ID.json goes (default .)")
    grade.add_argument("--output", type=Path, help="also write every instance's full report to this JSON file")
    grade.add_argument("--screen", choices=("zero", "flag"), default="zero",
                       help="what the static screen does with code in a patch that targets the test run "
                            "(docs/swe-security.md): zero (status screened, the default) or flag (findings in the report only)")
    grade.add_argument("--quiet", action="store_true", help="no progress bar")
    add_runtime_options(grade)
    grade.set_defaults(run=_grade)

    install = commands.add_parser("install-agent", help="install an agent offline into derived images of task images")
    install.add_argument("agent", help="the agent to install: mini-swe-agent, claude-code, codex, opencode or pi")
    install.add_argument("images", nargs="*", metavar="IMAGE", help="task images (default: every task image of --dataset)")
    _add_dataset_options(install)
    install.add_argument("--force", action="store_true", help="rebuild derived images that exist")
    install.add_argument("--quiet", action="store_true", help="no progress bar")
    add_runtime_options(install)
    add_push_option(install)
    install.set_defaults(run=_install_agent)

    reap = commands.add_parser("reap", help="remove the containers, grading snapshots and volumes, and channel directories "
                               "that gymenvs processes which are gone left behind")
    add_runtime_options(reap)
    reap.set_defaults(run=_reap)


def _add_base_options(parser: argparse.ArgumentParser) -> None:
    from gymenvs.container.images import BASE_IMAGE, BASE_SUITE

    parser.add_argument("--tag", default=BASE_IMAGE, help=f"base image name (default {BASE_IMAGE})")
    parser.add_argument("--suite", default=BASE_SUITE, help=f"Debian suite (default {BASE_SUITE})")
    parser.add_argument("--mirror", help="Debian mirror URL (default: the one this machine's apt sources use)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the image exists")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def _add_dataset_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="fixtures", help='"fixtures", a .json/.jsonl/.parquet file or a Hub dataset name')
    parser.add_argument("--split", help="dataset split (default: the only one, or test)")
    parser.add_argument("--image-template", help="image name template, e.g. 'myorg/{swebench_id}:latest'")


def _build_base_image(args: argparse.Namespace, force: bool | None = None) -> int:
    from gymenvs.container.images import build_base_image
    from gymenvs.container.runtime_cli import runtime_of

    built = build_base_image(runtime_of(args), tag=args.tag, suite=args.suite, mirror=args.mirror,
                             force=args.force if force is None else force, progress=not args.quiet)
    print(f"{args.tag}: {'built' if built else 'already present (use --force to rebuild)'}")
    return 0


def _build_images(args: argparse.Namespace) -> int:
    from gymenvs.container.runtime_cli import push_images, runtime_of
    from gymenvs.swe.images import build_fixture_images, image_for
    from gymenvs.swe.tasks.tasks import FIXTURES, load_tasks

    _build_base_image(args, force=False)  # --force rebuilds the fixture images, not the slow base
    runtime = runtime_of(args)
    built = build_fixture_images(runtime, base=args.tag, force=args.force, progress=not args.quiet)
    print(f"fixture images: {len(built)} built" + (f" ({', '.join(built)})" if built else ", all present"))
    push_images(args, runtime, [args.tag, *(image_for(task) for task in load_tasks(FIXTURES))])
    return 0


def _list_tasks(args: argparse.Namespace) -> int:
    from gymenvs.swe.images import image_for
    from gymenvs.swe.tasks.tasks import load_tasks

    for task in load_tasks(args.dataset, split=args.split):
        counts = f"F2P={len(task.fail_to_pass)} P2P={len(task.pass_to_pass)}"
        print(f"{task.instance_id}\t{image_for(task, args.image_template)}\t{counts}")
    return 0


def _grade(args: argparse.Namespace) -> int:
    from gymenvs.container.images import ensure_image
    from gymenvs.container.reaper import reap
    from gymenvs.container.runtime import SandboxError
    from gymenvs.container.runtime_cli import runtime_of
    from gymenvs.swe.grading import evaluate
    from gymenvs.swe.grading.grading import GradeReport, grade
    from gymenvs.swe.images import image_for
    from gymenvs.swe.tasks.tasks import load_tasks

    if args.workers < 1:
        print(f"--workers={args.workers}: give 1 or more", file=sys.stderr)
        return 2
    tasks = {task.instance_id: task for task in load_tasks(args.dataset, split=args.split)}
    try:
        predictions = (evaluate.read_predictions(args.predictions) if args.predictions
                       else evaluate.gold_predictions(tasks.values()))
        evaluate.check_predictions(predictions, tasks)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.instance_ids:
        predictions = [p for p in predictions if p.instance_id in set(args.instance_ids)]
    runtime = runtime_of(args)
    reap(runtime)

    def grade_one(task, patch: str) -> GradeReport:
        image = image_for(task, args.image_template)
        try:
            ensure_image(runtime, image)
        except SandboxError as exc:
            return GradeReport(task.instance_id, "error", error=str(exc))
        return grade(runtime, task, patch, image=image, timeout=args.timeout, screen=args.screen)

    outcomes = evaluate.grade_predictions(predictions, tasks, grade_one, run_id=args.run_id, log_dir=args.log_dir,
                                          workers=args.workers, progress=not args.quiet)
    for outcome in outcomes:
        note = " (from an earlier run)" if outcome.resumed else f"\t{outcome.seconds:.1f}s"
        print(f"{outcome.instance_id}\t{outcome.status}{note}" + (f"\t{outcome.error}" if outcome.error else ""))
    summary = evaluate.run_summary(predictions, outcomes, len(tasks))
    model = predictions[0].model_dir if predictions else "None"
    args.report_dir.mkdir(parents=True, exist_ok=True)
    summary_path = args.report_dir / f"{model}.{args.run_id}.json"
    summary_path.write_text(json.dumps(summary, indent=4))
    print(f"resolved {summary['resolved_instances']}/{len(predictions)}, unresolved {summary['unresolved_instances']}, "
          f"errors {summary['error_instances']}, empty patches {summary['empty_patch_instances']}; report: {summary_path}")
    if args.output:
        args.output.write_text(json.dumps([o.report for o in outcomes], indent=2))
    return 0 if summary["resolved_instances"] == len(predictions) else 1


def _install_agent(args: argparse.Namespace) -> int:
    from gymenvs.container.agent.install import install_agent
    from gymenvs.container.agent.specs import agent_spec, derived_image
    from gymenvs.container.runtime_cli import push_images, runtime_of
    from gymenvs.swe.images import image_for
    from gymenvs.swe.tasks.tasks import load_tasks

    spec = agent_spec(args.agent)
    images = args.images or [image_for(task, args.image_template) for task in load_tasks(args.dataset, split=args.split)]
    runtime = runtime_of(args)
    built = install_agent(runtime, spec, images, force=args.force, progress=not args.quiet)
    for image in dict.fromkeys(images):
        print(f"{derived_image(image, spec)}: {'built' if derived_image(image, spec) in built else 'already present'}")
    push_images(args, runtime, [derived_image(image, spec) for image in images])
    return 0


def _reap(args: argparse.Namespace) -> int:
    from gymenvs.container.reaper import reap
    from gymenvs.container.runtime_cli import runtime_of

    reaped = reap(runtime_of(args))
    print(f"removed {len(reaped)} orphaned container(s), snapshot(s), volume(s) and folder(s)"
          + (f": {', '.join(reaped)}" if reaped else ""))
    return 0
