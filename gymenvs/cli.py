"""The `gymenvs` command: list the environments, play one in the terminal, evaluate a policy, time an env, replay an
episode's trajectory, view a run's."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from gymenvs.play import EXIT_INTERRUPTED, play_episode
from gymenvs.registry import describe_envs
from gymenvs.signals import exit_on_sigterm


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    if hasattr(args, "imports"):
        # As `python -m` does: your own modules (--import, module:EnvId, --policy module:name) load from here.
        if os.getcwd() not in sys.path:
            sys.path.append(os.getcwd())
        try:
            import_user_envs(args.imports)
        except ValueError as exc:
            print(f"gymenvs: {exc}", file=sys.stderr)
            return 2
    try:
        with exit_on_sigterm():  # a SIGTERM ends the command as an exit: its envs close, their containers go
            return args.run(args)
    except KeyboardInterrupt:  # Ctrl-C while an env starts or an eval runs: end as a shell expects, no traceback
        print("\n[interrupted]", file=sys.stderr)
        return EXIT_INTERRUPTED


def add_import_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--import", dest="imports", action="append", default=[], metavar="MODULE",
        help="import MODULE first, to register your own envs (repeatable); or name it in the id, as module:EnvId",
    )


def add_env_arguments(command: argparse.ArgumentParser) -> None:
    """The env a command runs: its id, --import, and --kwarg (play, eval and bench alike)."""
    command.add_argument("env_id", help="an id from `gymenvs list`, e.g. gymenvs/Wordle-v0, or module:EnvId for your own")
    add_import_option(command)
    command.add_argument(
        "--kwarg", "-k", action="append", default=[], metavar="NAME=VALUE",
        help="env constructor argument; VALUE is read as JSON when it parses, else as a string (repeatable)",
    )


def import_user_envs(modules: list[str]) -> None:
    """Import the modules given with --import (they register your envs)."""
    from gymenvs.env_ids import import_env_modules

    import_env_modules(modules)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gymenvs", description="Text environments for LLM agents.")
    commands = parser.add_subparsers(title="commands")

    listing = commands.add_parser("list", help="list the gymenvs environments, and those your --import modules register")
    add_import_option(listing)
    listing.set_defaults(run=run_list)

    play = commands.add_parser("play", help="play an environment in the terminal")
    add_env_arguments(play)
    play.add_argument("--seed", type=int, default=None, help="episode seed (same seed, same episode)")
    play.set_defaults(run=run_play)

    add_eval_command(commands)
    add_bench_command(commands)
    replay = commands.add_parser("replay", help="print one episode's ATIF trajectory as the model saw it")
    replay.add_argument("path", help="an ATIF trajectory file, or a folder of them (as `gymenvs eval --trajectories` writes)")
    replay.add_argument("--episode", type=int, default=0,
                        help="which episode to print, from 0: in a folder, the files in name order (default 0)")
    replay.set_defaults(run=run_replay)
    from gymenvs.trajectories.viewer.cli import add_command as add_view_command

    add_view_command(commands)

    from gymenvs.swe.cli import add_commands as add_swe_commands

    add_swe_commands(commands.add_parser("swe", help="the SWE environment: build images, list tasks, grade patches"))
    from gymenvs.tasks_cli import add_commands as add_tasks_commands

    add_tasks_commands(commands.add_parser("tasks", help="Harbor task folders and SWE datasets alike: validate"))
    return parser


def add_eval_command(commands: Any) -> None:
    evaluation = commands.add_parser("eval", help="run a policy over N episodes and print a summary table")
    add_env_arguments(evaluation)
    evaluation.add_argument(
        "--policy", default="scripted", metavar="POLICY",
        help="scripted (default), random, openai, transformers, or module:name for your own: a function "
        "(messages, tools) -> action, or a Policy class or object (see gymenvs.eval.policies)",
    )
    evaluation.add_argument("--episodes", "-n", type=int, default=100, help="number of episodes (default 100)")
    evaluation.add_argument("--seed", type=int, default=0, help="first episode seed; episode i uses seed + i")
    evaluation.add_argument("--workers", type=int, default=1, help="episodes played at once, on threads")
    evaluation.add_argument("--trajectories", metavar="DIR",
                            help="write each episode into DIR as an ATIF trajectory file, <env>-seed<seed>.json")
    evaluation.add_argument("--base-url", help="openai: the endpoint's root, e.g. http://localhost:8000")
    evaluation.add_argument("--model", help="openai: the served model's name; transformers: a local model path")
    evaluation.add_argument("--api-key", help="openai: bearer token (default: none)")
    evaluation.add_argument("--temperature", type=float, default=0.0, help="openai / transformers sampling temperature")
    evaluation.add_argument("--max-tokens", type=int, default=512, help="openai / transformers: longest turn")
    evaluation.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    evaluation.set_defaults(run=run_eval)


def add_bench_command(commands: Any) -> None:
    bench = commands.add_parser("bench", help="time an env under a policy: steps/s, episodes/s, step latency")
    add_env_arguments(bench)
    bench.add_argument(
        "--policy", default="scripted", metavar="POLICY",
        help="scripted (default), random (a random tool call from the env's tool schemas), or module:name for your "
        "own, as for eval",
    )
    limit = bench.add_mutually_exclusive_group()
    limit.add_argument("--episodes", "-n", type=int, default=None, help="episodes to play (default 20)")
    limit.add_argument("--steps", type=int, default=None, help="steps to take instead (over all slots)")
    bench.add_argument("--seed", type=int, default=0, help="first episode seed (default 0)")
    bench.add_argument("--num-envs", type=int, default=None, metavar="N",
                       help="play a vector env of N slots (default: one env, no vector env)")
    bench.add_argument("--backend", default=None, metavar="BACKEND",
                       help="the vector env's backend: thread (default), process or ray; needs --num-envs")
    bench.set_defaults(run=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    from gymenvs.eval.bench import bench

    if args.backend is not None and args.num_envs is None:
        print(f"gymenvs bench: --backend {args.backend} needs --num-envs (without it one env runs, in this process)",
              file=sys.stderr)
        return 2
    if args.policy in ("openai", "transformers"):
        print(f"gymenvs bench: --policy {args.policy}: bench times the env, so it runs scripted, random or module:name "
              f"policies; time a model with `gymenvs eval`", file=sys.stderr)
        return 2
    episodes = args.episodes if args.episodes is not None or args.steps is not None else 20
    try:
        env_id, policy = resolved_policy(args.env_id, args.policy)
        summary = bench(env_id, policy, episodes=episodes, steps=args.steps, seed=args.seed,
                        env_kwargs=parse_kwargs(args.kwarg), num_envs=args.num_envs, backend=args.backend or "thread")
    except ValueError as exc:
        print(f"gymenvs bench: {exc}", file=sys.stderr)
        return 2
    print(summary.table())
    return 0


def resolved_policy(env_id: str, kind: str, **options: Any) -> tuple[str, Any]:
    """The registered id `env_id` stands for (its module imported) and the policy `kind` names for it.
    The id first, so that a misspelt id or a missing module is the error, not "no scripted policy"."""
    from gymenvs.env_ids import find_spec
    from gymenvs.eval import make_policy

    spec = find_spec(env_id)
    return spec.id, make_policy(kind, spec.id, **options)


def run_eval(args: argparse.Namespace) -> int:
    from gymenvs.eval import evaluate_policy

    options: dict[str, Any] = {}
    if args.policy == "openai":
        if not (args.base_url and args.model):
            print("--policy openai needs --base-url and --model", file=sys.stderr)
            return 2
        options = dict(base_url=args.base_url, model=args.model, api_key=args.api_key,
                       temperature=args.temperature, max_tokens=args.max_tokens)
    elif args.policy == "transformers":
        if not args.model:
            print("--policy transformers needs --model (a local model path)", file=sys.stderr)
            return 2
        options = dict(model=args.model, temperature=args.temperature, max_new_tokens=args.max_tokens)
    try:
        env_id, policy = resolved_policy(args.env_id, args.policy, **options)
        summary = evaluate_policy(
            env_id, policy, num_episodes=args.episodes, seed=args.seed, env_kwargs=parse_kwargs(args.kwarg),
            max_workers=args.workers, trajectories=args.trajectories, progress=not args.no_progress,
        )
    except ValueError as exc:
        print(f"gymenvs eval: {exc}", file=sys.stderr)
        return 2
    print(summary.table())
    if args.trajectories:
        print(f"trajectories: {args.trajectories} (gymenvs replay {args.trajectories} --episode 0)")
    return 0


def run_replay(args: argparse.Namespace) -> int:
    from gymenvs.core.errors import ReplayFileError
    from gymenvs.trajectories import read_trajectories, replay

    try:
        trajectories = read_trajectories(args.path)
    except ReplayFileError as exc:
        print(f"gymenvs replay: {exc}", file=sys.stderr)
        return 2
    if not 0 <= args.episode < len(trajectories):
        print(f"--episode {args.episode}: {args.path} holds episodes 0 to {len(trajectories) - 1}", file=sys.stderr)
        return 2
    replay(trajectories[args.episode], sys.stdout)
    return 0


def run_list(args: argparse.Namespace) -> int:
    from gymenvs.env_ids import user_env_ids

    entries = {**describe_envs(), **{env_id: describe_registered(env_id) for env_id in user_env_ids()}}
    width = max(map(len, entries))
    for env_id, description in entries.items():
        print(f"{env_id:<{width}}  {description}")
    return 0


def describe_registered(env_id: str) -> str:
    """The first sentence of the docstring of the class an id is registered with."""
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    entry_point = gym.spec(env_id).entry_point
    try:
        creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    except Exception as exc:  # a broken entry point is worth seeing in the list, not a traceback
        return f"(cannot load {entry_point!r}: {type(exc).__name__})"
    paragraph = " ".join((creator.__doc__ or "").strip().split("\n\n")[0].split())
    return paragraph.split(". ")[0].rstrip(".") + "." if paragraph else ""


def run_play(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import gymenvs  # noqa: F401  (registers the envs)
    from gymenvs.env_ids import find_spec

    try:
        find_spec(args.env_id)
    except ValueError as exc:
        print(f"gymenvs play: {exc}; run `gymenvs list`", file=sys.stderr)
        return 2
    try:
        env = gym.make(args.env_id, **parse_kwargs(args.kwarg))
    except ValueError as exc:
        print(f"cannot build {args.env_id}: {exc}", file=sys.stderr)
        return 2
    try:
        return play_episode(env, args.seed)
    finally:
        env.close()


def parse_kwargs(pairs: list[str]) -> dict[str, Any]:
    kwargs = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"--kwarg {pair!r}: expected NAME=VALUE")
        try:
            kwargs[name] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[name] = value
    return kwargs


if __name__ == "__main__":
    sys.exit(main())
