"""`--runtime` and `--engine`: which container runtime, and which of its engines, a command of `gymenvs swe` and
`gymenvs tasks` works on (as `runtime=` and `engine=` of a container env)."""

from __future__ import annotations

import argparse

from gymenvs.container.runtime import ENGINE_SCHEMES, RUNTIMES, Runtime, check_choice, shared_runtime


def add_runtime_options(parser: argparse.ArgumentParser) -> None:
    """Add `--runtime` and `--engine` to a command that reaches an engine."""
    parser.add_argument("--runtime", choices=tuple(RUNTIMES), default="docker",
                        help="the container runtime (default docker; podman: a Podman API service, rootful or rootless)")
    parser.add_argument("--engine", type=_engine_url, metavar="URL",
                        help=f"the engine's URL ({', '.join(ENGINE_SCHEMES)}; default: DOCKER_HOST for docker, "
                        "CONTAINER_HOST for podman, else the runtime's standard socket: for podman, root's service as "
                        "root, else the user's own under XDG_RUNTIME_DIR)")


def runtime_of(args: argparse.Namespace) -> Runtime:
    """The runtime the command's `--runtime` and `--engine` name (its engine pinged)."""
    return shared_runtime(args.runtime, args.engine)


def _engine_url(value: str) -> str:
    try:
        check_choice("docker", value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("engine=", "--engine ", 1)) from None
    return value
