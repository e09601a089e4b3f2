"""`--runtime` and `--engine`: which container runtime, and which of its engines, a command of `gymenvs swe` and
`gymenvs tasks` works on (as `runtime=` and `engine=` of a container env); `--push`: the registry the image
commands push what they made to (where a container env's `registry=` pulls it from)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable

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


def add_push_option(parser: argparse.ArgumentParser) -> None:
    """Add `--push REGISTRY` to a command that makes images."""
    parser.add_argument("--push", type=_registry, metavar="REGISTRY",
                        help="then push the images to this registry (host:port[/prefix]) as REGISTRY/NAME:TAG, where "
                        "the envs of other machines pull them from (their registry= option)")


def push_images(args: argparse.Namespace, runtime: Runtime, images: Iterable[str]) -> None:
    """Push `images` to `--push`'s registry, if given, saying so."""
    from gymenvs.container.images import push_image

    if args.push is None:
        return
    for image in dict.fromkeys(images):
        print(f"pushed {push_image(runtime, image, args.push)}")


def _registry(value: str) -> str:
    from gymenvs.container.config import REGISTRY_PATTERN

    if not re.match(REGISTRY_PATTERN, value):
        raise argparse.ArgumentTypeError(f"{value!r} is no registry: give host:port or host:port/prefix, e.g. 127.0.0.1:5000")
    return value


def _engine_url(value: str) -> str:
    try:
        check_choice("docker", value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("engine=", "--engine ", 1)) from None
    return value
