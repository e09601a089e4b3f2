"""The `gymenvs` command: list the environments, or play one in the terminal."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

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

    from gymenvs.swe.cli import add_commands as add_swe_commands

    add_swe_commands(commands.add_parser("swe", help="the SWE environment: build images, list tasks, grade patches"))
    return parser


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
    with env:
        return play_episode(env, args.seed)


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
