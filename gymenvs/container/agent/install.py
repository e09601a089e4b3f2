"""Install a third-party agent into derived images, offline: `gymenvs swe install-agent`.

Python agents (`spec.requirements`): the wheels are downloaded on the host with pip (for the task
image's Python version), and a derived image is built FROM the task image with no network: a
virtual environment at /opt/gymenvs-agents/<agent> gets the agent from those wheels, in a build
stage that is removed once the image is built.

npm agents (`spec.npm_packages`: the coding-agent CLIs): the host's npm installs the pinned
packages, for Linux x86_64 with glibc, from the registry npm is configured with, into a cached
tree (its tarballs in npm's cache beside it, so a second machine set-up or `--force` reuses them);
the derived image is the task image plus a copy of that tree at /opt/gymenvs-agents/<agent>
(one `COPY`, no network, no build stage). No package script runs, on the host or in the image.
An agent whose spec names an `npm_bundle` gets that module bundled in the tree before the copy, by esbuild (pinned,
installed by npm into the same cache): one module and its lazily loaded chunks, beside the original, which stays.

The derived image's name is the task image's with "-<agent>-<version>" added to its tag
(`specs.derived_image`), so the task image itself is never changed.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterable
from pathlib import Path

from gymenvs.container.agent.specs import AgentSpec, derived_image
from gymenvs.container.runtime import ImageBuildError, ImageMissing, Runtime

#: Platform tags of the wheels fetched for the container (glibc Linux, x86_64).
_PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_24_x86_64", "manylinux_2_27_x86_64",
              "manylinux_2_28_x86_64", "manylinux_2_31_x86_64", "manylinux_2_34_x86_64", "manylinux1_x86_64")
#: Labels the pip build stage, which `build_derived_image` removes once the image is built.
_STAGE_LABEL = "gymenvs.agent-install-stage"
_DOCKERFILE = """FROM {image} AS install
LABEL {stage_label}="{stage}"
COPY *.whl /tmp/gymenvs-wheels/
RUN {python} -m venv --without-pip {venv} \\
 && {venv}/bin/python /tmp/gymenvs-wheels/{pip_wheel}/pip install --quiet --no-index --no-cache-dir \\
      --disable-pip-version-check --find-links /tmp/gymenvs-wheels {requirement}
FROM {image}
COPY --from=install {venv} {venv}
LABEL gymenvs.agent="{name}"
"""
_NPM_DOCKERFILE = """FROM {image}
COPY . {root}/
LABEL gymenvs.agent="{name}"
"""
#: npm installs the optional platform packages of this platform, whatever the host's.
_NPM_PLATFORM = ("--os=linux", "--cpu=x64", "--libc=glibc")
#: The bundler of `AgentSpec.npm_bundle`, for the host's own platform (it runs here).
_ESBUILD = "esbuild@0.25.12"
# A module bundled as ES loses CommonJS's `require`, which the CommonJS packages in it call (Node's built-ins
# among them): each output file makes its own from its location.
_REQUIRE_BANNER = ('import { createRequire as __gymenvsRequire } from "node:module"; '
                   'const require = __gymenvsRequire(import.meta.url);')


def default_cache() -> Path:
    return Path.home() / ".cache" / "gymenvs" / "wheelhouses"


def default_npm_cache() -> Path:
    return Path.home() / ".cache" / "gymenvs" / "npm"


def install_agent(runtime: Runtime, spec: AgentSpec, images: Iterable[str], *, cache: Path | None = None,
                  force: bool = False, progress: bool = True) -> list[str]:
    """Build `spec`'s derived image of every image in `images` (skipping those that exist); return the built names."""
    from tqdm import tqdm

    if not spec.installed:
        raise ValueError(f"agent {spec.name!r} runs on the task image as it is: there is nothing to install")
    todo = [image for image in dict.fromkeys(images) if force or not runtime.image_exists(derived_image(image, spec))]
    if spec.npm_packages:
        return _install_npm_agent(runtime, spec, todo, cache=cache or default_npm_cache(), progress=progress)
    built = []
    with tqdm(total=len(todo) * 3, desc=f"installing {spec.name}", unit="step", disable=not progress) as bar:
        for image in todo:
            bar.set_postfix_str(image)
            python, version = container_python(runtime, image)
            bar.update()
            wheelhouse = download_wheels(spec.requirements, version, cache or default_cache())
            bar.update()
            build_derived_image(runtime, spec, image, python=python, wheelhouse=wheelhouse)
            bar.update()
            built.append(derived_image(image, spec))
    return built


def container_python(runtime: Runtime, image: str) -> tuple[str, str]:
    """The path and "major.minor" version of the image's python3 (on its default PATH)."""
    probe = "import sys; print(sys.executable); print('%d.%d' % sys.version_info[:2])"
    sandbox = runtime.start(image, role="install", episode_id=f"install-{uuid.uuid4().hex[:8]}")
    try:
        result = sandbox.run(f"python3 -c {shlex.quote(probe)}", timeout=60)
    finally:
        sandbox.remove()
    lines = result.output.text().split()
    if result.exit_code != 0 or len(lines) < 2:
        raise ImageBuildError(f"{image} has no working python3 on its PATH: {result.output.text()[-500:]}")
    python, version = lines[-2], lines[-1]
    if tuple(map(int, version.split("."))) < (3, 10):
        raise ImageBuildError(f"{image}'s python3 is {version}; the agent needs Python 3.10 or later")
    return python, version


def download_wheels(requirements: tuple[str, ...], python_version: str, cache: Path) -> Path:
    """A directory of wheels for `requirements` and pip, for CPython `python_version` on Linux (cached)."""
    name = re.sub(r"[^A-Za-z0-9.]+", "-", "-".join(requirements))
    wheelhouse = cache / f"{name}-cp{python_version.replace('.', '')}"
    done = wheelhouse / ".complete"
    if done.exists():
        return wheelhouse
    wheelhouse.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", *requirements, "pip",
               "--dest", str(wheelhouse), "--only-binary=:all:", "--implementation", "cp",
               "--python-version", python_version, *(arg for tag in _PLATFORMS for arg in ("--platform", tag))]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        wanted = " ".join(requirements)
        raise ImageBuildError(f"pip could not download {wanted} for Python {python_version}:\n{result.stderr[-2000:]}")
    done.touch()
    return wheelhouse


def build_derived_image(runtime: Runtime, spec: AgentSpec, image: str, *, python: str, wheelhouse: Path) -> str:
    """Build `spec`'s derived image of `image` from the wheels in `wheelhouse`, with no network."""
    pip_wheel = sorted(wheelhouse.glob("pip-*.whl"))[-1].name
    stage = f"{os.getpid()}-{uuid.uuid4().hex}"  # the owner first: a test can tell its own stages from others'
    dockerfile = _DOCKERFILE.format(image=image, python=python, venv=spec.venv, pip_wheel=pip_wheel, stage=stage,
                                    stage_label=_STAGE_LABEL, requirement=shlex.join(spec.requirements), name=spec.name)
    try:
        return _build(runtime, wheelhouse, dockerfile, derived_image(image, spec))
    finally:  # the build stage (the ~880 MB venv-and-wheels image) would stay behind as a dangling image
        runtime.prune_images(f"{_STAGE_LABEL}={stage}")


def _build(runtime: Runtime, context: Path, dockerfile: str, tag: str) -> str:
    """Build the folder `context` with `dockerfile` (its text), network off; the Dockerfile is removed after,
    and so is the image `tag` named before (a rebuild would leave it dangling), unless a container uses it."""
    name = f".Dockerfile.{uuid.uuid4().hex[:8]}"
    (context / name).write_text(dockerfile)
    replaced = image_id(runtime, tag)
    try:
        runtime.build(context, tag, dockerfile=name, network=False)
    finally:
        (context / name).unlink(missing_ok=True)
    if replaced is not None and replaced != image_id(runtime, tag):
        runtime.remove_image(replaced)  # best effort: a container still running from it keeps it
    return tag


def image_id(runtime: Runtime, name: str) -> str | None:
    try:
        return runtime.image_config(name).id
    except ImageMissing:
        return None


# -- npm agents ------------------------------------------------------------------------------------


def _install_npm_agent(runtime: Runtime, spec: AgentSpec, images: list[str], *, cache: Path, progress: bool) -> list[str]:
    from tqdm import tqdm

    built = []
    with tqdm(total=len(images) + 1, desc=f"installing {spec.name}", unit="step", disable=not progress) as bar:
        bar.set_postfix_str("npm install")
        tree = npm_tree(spec, cache)
        bar.update()
        for image in images:
            bar.set_postfix_str(image)
            built.append(_build(runtime, tree, _NPM_DOCKERFILE.format(image=image, root=spec.venv, name=spec.name),
                                       derived_image(image, spec)))
            bar.update()
    return built


def npm_tree(spec: AgentSpec, cache: Path) -> Path:
    """The installed tree of `spec.npm_packages` for Linux x86_64 glibc (cached under `cache`/trees; the
    downloaded tarballs under `cache`/tarballs, npm's own cache, which a later install reuses)."""
    tree = cache / "trees" / (spec.image_suffix or spec.name)
    if (tree / ".complete").exists():
        return tree
    npm_install(tree, spec.npm_packages, cache=cache, platform=_NPM_PLATFORM, why=f"installing {spec.name}")
    for path in spec.npm_prune:
        shutil.rmtree(tree / path, ignore_errors=True)
    if spec.npm_bundle is not None:
        bundle_module(tree / "node_modules" / spec.npm_bundle, external=spec.npm_bundle_external, cache=cache)
    (tree / ".dockerignore").write_text(".complete\n.dockerignore\n.Dockerfile.*\npackage.json\npackage-lock.json\n")
    (tree / ".complete").touch()
    return tree


def bundle_module(entry: Path, *, external: tuple[str, ...], cache: Path) -> Path:
    """`entry` (an ES module) and what it imports, bundled into one module beside it, `<name>.bundle.js`; what it
    imports lazily (`import()`) goes into chunks under `chunks/` there, still loaded only when imported. The bare
    imports in `external` are left to Node. Returns the bundle's path."""
    esbuild = _esbuild(cache)
    command = [*esbuild, entry.name, "--bundle", "--splitting", "--format=esm", "--platform=node", "--outdir=.",
               "--entry-names=[name].bundle", "--chunk-names=chunks/[name]-[hash]", "--log-level=error",
               f"--banner:js={_REQUIRE_BANNER}", *(f"--external:{name}" for name in external)]
    result = subprocess.run(command, cwd=entry.parent, capture_output=True, text=True)
    if result.returncode != 0:
        raise ImageBuildError(f"esbuild could not bundle {entry}:\n{result.stderr[-2000:]}")
    return entry.with_name(f"{entry.stem}.bundle.js")


def _esbuild(cache: Path) -> list[str]:
    """The command running `_ESBUILD`, installed by npm into `cache`/tools once (its package's own launcher, which
    finds the binary of the host's platform package: no install script needed)."""
    tool = cache / "tools" / _ESBUILD.replace("@", "-")
    node = shutil.which("node")
    if node is None:
        raise ImageBuildError("bundling an agent needs Node.js on the host; none is on the PATH")
    if not (tool / ".complete").exists():
        npm_install(tool, (_ESBUILD,), cache=cache, platform=(), why="bundling an agent")
        (tool / ".complete").touch()
    return [node, str(tool / "node_modules" / "esbuild" / "bin" / "esbuild")]


def npm_install(prefix: Path, packages: tuple[str, ...], *, cache: Path, platform: tuple[str, ...], why: str) -> None:
    """`packages` installed by the host's npm into the empty folder `prefix` (made anew), without their dev
    dependencies or any package script, their tarballs kept in `cache`/tarballs; `platform`: npm's platform options
    (none: the host's)."""
    npm = shutil.which("npm")
    if npm is None:
        raise ImageBuildError(f"{why} needs npm on the host (Node.js's package manager); none is on the PATH")
    shutil.rmtree(prefix, ignore_errors=True)
    prefix.mkdir(parents=True)
    command = [npm, "install", "--prefix", str(prefix), "--cache", str(cache / "tarballs"), "--prefer-offline",
               "--no-save", "--no-audit", "--no-fund", "--omit=dev", "--ignore-scripts", "--loglevel=error", *platform,
               *packages]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise ImageBuildError(f"npm could not install {' '.join(packages)}:\n{result.stderr[-2000:]}")
