"""The `gymenvs` command: list the environments, play one in the terminal, evaluate a policy, replay a transcript."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from gymenvs.registry import describe_envs


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    return args.run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gymenvs", description="Text environments for LLM agents.")
    commands = parser.add_subparsers(title="commands")

    listing = commands.add_parser("list", help="list the registered environments")
    listing.set_defaults(run=run_list)

    play = commands.add_parser("play", help="play an environment in the terminal")
    play.add_argument("env_id", help="an id from `gymenvs list`, e.g. gymenvs/Wordle-v0")
    play.add_argument("--seed", type=int, default=None, help="episode seed (same seed, same episode)")
    play.add_argument(
        "--kwarg", "-k", action="append", default=[], metavar="NAME=VALUE",
        help="constructor argument; VALUE is read as JSON when it parses, else as a string (repeatable)",
    )
    play.set_defaults(run=run_play)

    add_eval_command(commands)
    replay = commands.add_parser("replay", help="print one episode of an eval transcript as the model saw it")
    replay.add_argument("file", help="a JSONL transcript written by `gymenvs eval --transcripts`")
    replay.add_argument("--episode", type=int, default=0, help="which episode (line) to print, from 0 (default 0)")
    replay.set_defaults(run=run_replay)

    from gymenvs.swe.cli import add_commands as add_swe_commands

    add_swe_commands(commands.add_parser("swe", help="the SWE environment: build images, list tasks, grade patches"))
    from gymenvs.terminal.validate_cli import add_commands as add_tasks_commands

    add_tasks_commands(commands.add_parser("tasks", help="Harbor task folders and SWE datasets alike: validate"))
    return parser


def add_eval_command(commands: Any) -> None:
    evaluation = commands.add_parser("eval", help="run a policy over N episodes and print a summary table")
    evaluation.add_argument("env_id", help="an id from `gymenvs list`")
    evaluation.add_argument("--policy", choices=["scripted", "openai", "transformers"], default="scripted")
    evaluation.add_argument("--episodes", "-n", type=int, default=100, help="number of episodes (default 100)")
    evaluation.add_argument("--seed", type=int, default=0, help="first episode seed; episode i uses seed + i")
    evaluation.add_argument("--workers", type=int, default=1, help="episodes played at once, on threads")
    evaluation.add_argument("--transcripts", metavar="FILE", help="write one JSON line per episode to FILE")
    evaluation.add_argument("--base-url", help="openai: the endpoint's root, e.g. http://localhost:8000")
    evaluation.add_argument("--model", help="openai: the served model's name; transformers: a local model path")
    evaluation.add_argument("--api-key", help="openai: bearer token (default: none)")
    evaluation.add_argument("--temperature", type=float, default=0.0, help="openai / transformers sampling temperature")
    evaluation.add_argument("--max-tokens", type=int, default=512, help="openai / transformers: longest turn")
    evaluation.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    evaluation.add_argument(
        "--kwarg", "-k", action="append", default=[], metavar="NAME=VALUE", help="env constructor argument (repeatable)"
    )
    evaluation.set_defaults(run=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    from gymenvs.eval import evaluate_policy, make_policy

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
        policy = make_policy(args.policy, args.env_id, **options)
        summary = evaluate_policy(
            args.env_id, policy, num_episodes=args.episodes, seed=args.seed, env_kwargs=parse_kwargs(args.kwarg),
            max_workers=args.workers, transcripts=args.transcripts, progress=not args.no_progress,
        )
    except ValueError as exc:
        print(f"gymenvs eval: {exc}", file=sys.stderr)
        return 2
    print(summary.table())
    if args.transcripts:
        print(f"transcripts: {args.transcripts} (gymenvs replay {args.transcripts} --episode 0)")
    return 0


def run_replay(args: argparse.Namespace) -> int:
    from gymenvs.eval import read_transcripts, replay

    records = read_transcripts(args.file)
    if not 0 <= args.episode < len(records):
        print(f"--episode {args.episode}: {args.file} holds episodes 0 to {len(records) - 1}", file=sys.stderr)
        return 2
    replay(records[args.episode], sys.stdout)
    return 0


def run_list(args: argparse.Namespace) -> int:
    entries = describe_envs()
    width = max(map(len, entries))
    for env_id, description in entries.items():
        print(f"{env_id:<{width}}  {description}")
    return 0


def run_play(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import gymenvs  # noqa: F401  (registers the envs)

    if args.env_id not in gym.registry:
        print(f"unknown environment {args.env_id!r}; run `gymenvs list`", file=sys.stderr)
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


def play_episode(env: Any, seed: int | None) -> int:
    observation, info = env.reset(seed=seed)
    print(observation)
    print_tools(info.get("tools", []))
    print('Type an action: free text, a tool call as JSON, or ":tools", ":state", ":quit".')
    total = 0.0
    while True:
        try:
            line = input("> ")
        except EOFError:
            print()
            return 0
        if line.strip() == ":quit":
            return 0
        if line.strip() == ":tools":
            print_tools(info.get("tools", []))
            continue
        if line.strip() == ":state":
            print(json.dumps(env.unwrapped.state(), indent=2))
            continue
        observation, reward, terminated, truncated, _ = env.step(line)
        total += reward
        print(observation)
        if reward:
            print(f"[reward {reward:+g}]")
        if terminated or truncated:
            print(f"Episode over ({'terminated' if terminated else 'truncated'}); return {total:g}.")
            return 0


def print_tools(tools: list[dict[str, Any]]) -> None:
    for schema in tools:
        function = schema["function"]
        params = ", ".join(function["parameters"].get("properties", {}))
        print(f"  tool {function['name']}({params}): {function['description']}")


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
