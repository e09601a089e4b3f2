"""`gymenvs swe ...`: build images offline, install agents, list tasks, grade patches, reap orphaned containers."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def add_commands(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="swe_command", required=True, metavar="SWE_COMMAND")

    base = commands.add_parser("build-base-image", help="build the Debian base image offline (debootstrap + docker import)")
    _add_base_options(base)
    base.set_defaults(run=_build_base_image)

    images = commands.add_parser("build-images", help="build the base image if missing, then the fixture task images")
    _add_base_options(images)
    images.set_defaults(run=_build_images)

    tasks = commands.add_parser("tasks", help="list a dataset's tasks and their images")
    _add_dataset_options(tasks)
    tasks.set_defaults(run=_list_tasks)

    grade = commands.add_parser("grade", help="grade gold patches (default) or predictions, in fresh containers")
    _add_dataset_options(grade)
    grade.add_argument("--predictions", type=Path, help="JSON or JSONL of {instance_id, model_patch} (SWE-bench's preds format)")
    grade.add_argument("--instance-ids", nargs="+", metavar="ID", help="only these tasks")
    grade.add_argument("--workers", type=int, default=2, help="tasks graded at once (default 2)")
    grade.add_argument("--timeout", type=float, default=1800, help="seconds the tests of one task may take")
    grade.add_argument("--output", type=Path, help="write every report to this JSON file")
    grade.add_argument("--quiet", action="store_true", help="no progress bar")
    grade.set_defaults(run=_grade)

    install = commands.add_parser("install-agent", help="install an agent offline into derived images of task images")
    install.add_argument("agent", help="the agent to install, e.g. mini-swe-agent")
    install.add_argument("images", nargs="*", metavar="IMAGE", help="task images (default: every task image of --dataset)")
    _add_dataset_options(install)
    install.add_argument("--force", action="store_true", help="rebuild derived images that exist")
    install.add_argument("--quiet", action="store_true", help="no progress bar")
    install.set_defaults(run=_install_agent)

    reap = commands.add_parser("reap", help="remove SWE containers whose owning process is gone")
    reap.set_defaults(run=_reap)


def _add_base_options(parser: argparse.ArgumentParser) -> None:
    from gymenvs.swe.images import BASE_IMAGE, BASE_SUITE

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
    from gymenvs.swe.images import build_base_image
    from gymenvs.swe.sandbox import docker_client

    built = build_base_image(docker_client(), tag=args.tag, suite=args.suite, mirror=args.mirror,
                             force=args.force if force is None else force, progress=not args.quiet)
    print(f"{args.tag}: {'built' if built else 'already present (use --force to rebuild)'}")
    return 0


def _build_images(args: argparse.Namespace) -> int:
    from gymenvs.swe.images import build_fixture_images
    from gymenvs.swe.sandbox import docker_client

    _build_base_image(args, force=False)  # --force rebuilds the fixture images, not the slow base
    built = build_fixture_images(docker_client(), base=args.tag, force=args.force, progress=not args.quiet)
    print(f"fixture images: {len(built)} built" + (f" ({', '.join(built)})" if built else ", all present"))
    return 0


def _list_tasks(args: argparse.Namespace) -> int:
    from gymenvs.swe.images import image_for
    from gymenvs.swe.tasks import load_tasks

    for task in load_tasks(args.dataset, split=args.split):
        print(f"{task.instance_id}\t{image_for(task, args.image_template)}\tF2P={len(task.fail_to_pass)} P2P={len(task.pass_to_pass)}")
    return 0


def _grade(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from gymenvs.swe.grading import GradeReport, grade
    from gymenvs.swe.images import ensure_image, image_for
    from gymenvs.swe.sandbox import SandboxError, docker_client, reap_orphans
    from gymenvs.swe.tasks import load_tasks

    tasks = {task.instance_id: task for task in load_tasks(args.dataset, split=args.split)}
    patches = _read_predictions(args.predictions) if args.predictions else {i: t.patch for i, t in tasks.items()}
    wanted = args.instance_ids or list(patches)
    unknown = [i for i in wanted if i not in tasks]
    if unknown:
        print(f"unknown instance ids: {unknown}", file=sys.stderr)
        return 2
    client = docker_client()
    reap_orphans(client)

    def grade_one(instance_id: str) -> dict[str, Any]:
        task = tasks[instance_id]
        image = image_for(task, args.image_template)
        try:
            ensure_image(client, image)
        except SandboxError as exc:
            return GradeReport(instance_id, "error", error=str(exc)).to_dict()
        return grade(client, task, patches.get(instance_id, ""), image=image, timeout=args.timeout).to_dict()

    with ThreadPoolExecutor(max(1, args.workers)) as pool:
        reports = list(tqdm(pool.map(grade_one, wanted), total=len(wanted), desc="grading", unit="task", disable=args.quiet))
    for report in reports:
        print(f"{report['instance_id']}\t{report['status']}\t{report['seconds']:.1f}s" + (f"\t{report['error']}" if report["error"] else ""))
    counts = Counter(report["status"] for report in reports)
    print(f"resolved {counts['resolved']}/{len(reports)}; " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    if args.output:
        args.output.write_text(json.dumps(reports, indent=2))
    return 0 if counts["resolved"] == len(reports) else 1


def _read_predictions(path: Path) -> dict[str, str]:
    text = path.read_text()
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        loaded = json.loads(text)
        rows = list(loaded.values()) if isinstance(loaded, dict) else loaded
    return {row["instance_id"]: row.get("model_patch") or "" for row in rows}


def _install_agent(args: argparse.Namespace) -> int:
    from gymenvs.swe.agents.install import install_agent
    from gymenvs.swe.agents.specs import agent_spec, derived_image
    from gymenvs.swe.images import image_for
    from gymenvs.swe.sandbox import docker_client
    from gymenvs.swe.tasks import load_tasks

    spec = agent_spec(args.agent)
    images = args.images or [image_for(task, args.image_template) for task in load_tasks(args.dataset, split=args.split)]
    built = install_agent(docker_client(), spec, images, force=args.force, progress=not args.quiet)
    for image in dict.fromkeys(images):
        print(f"{derived_image(image, spec)}: {'built' if derived_image(image, spec) in built else 'already present'}")
    return 0


def _reap(args: argparse.Namespace) -> int:
    from gymenvs.swe.agents.channel import reap_channel_directories
    from gymenvs.swe.sandbox import docker_client, reap_orphans

    reaped = reap_orphans(docker_client()) + reap_channel_directories()
    print(f"removed {len(reaped)} orphaned container(s)" + (f": {', '.join(reaped)}" if reaped else ""))
    return 0
