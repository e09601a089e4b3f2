"""Task images: naming conventions, and building images offline (no registry needed).

- `image_for`: a row's own `image`, else a template, else the SWE-Gym or SWE-bench convention.
- `build_base_image`: Debian (python3, pytest, git) bootstrapped with `debootstrap` from the
  machine's own apt mirror and turned into an image with `docker import`.
- `build_fixture_images`: one image per shipped fixture task, its repo committed at `/testbed`.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from string import Formatter
from typing import Any

from gymenvs.swe.sandbox.base import ImageMissing
from gymenvs.swe.sandbox.docker import LABEL, tar_archive
from gymenvs.swe.tasks.tasks import FIXTURES, Task, fixtures_path, load_tasks

BASE_IMAGE = "gymenvs/swe-base:bookworm"
BASE_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-pytest", "git", "patch")
WORKDIR = "/testbed"
#: Shell lines that put a command in the task's Python environment: SWE-bench images keep it in
#: the conda env "testbed", which a non-interactive shell does not activate by itself.
ENV_SETUP = f"""if [ -f /opt/miniconda3/bin/activate ]
then . /opt/miniconda3/bin/activate && conda activate testbed
fi >/dev/null 2>&1
cd {WORKDIR}"""
#: The repos of SWE-Gym, whose images follow its own naming (xingyaoww/..._s_...).
SWE_GYM_REPOS = frozenset({
    "getmoto/moto", "python/mypy", "conan-io/conan", "modin-project/modin", "Project-MONAI/MONAI", "iterative/dvc",
    "dask/dask", "bokeh/bokeh", "pydantic/pydantic", "pandas-dev/pandas", "facebookresearch/hydra",
})
SWE_BENCH_TEMPLATE = "swebench/sweb.eval.x86_64.{swebench_id}:latest"
SWE_GYM_TEMPLATE = "xingyaoww/sweb.eval.x86_64.{swegym_id}:latest"
TEMPLATE_FIELDS = ("instance_id", "swebench_id", "swegym_id", "repo", "version")
_FIXTURE_AUTHOR = {
    "GIT_AUTHOR_NAME": "gymenvs fixtures", "GIT_AUTHOR_EMAIL": "fixtures@gymenvs.invalid",
    "GIT_COMMITTER_NAME": "gymenvs fixtures", "GIT_COMMITTER_EMAIL": "fixtures@gymenvs.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
}
_GITCONFIG = ("[safe]\n\tdirectory = *\n"
              "[user]\n\tname = gymenvs agent\n\temail = agent@gymenvs.invalid\n"
              "[init]\n\tdefaultBranch = main\n")


class ImageBuildError(RuntimeError):
    """An image could not be built."""


def check_template(template: str) -> str:
    """`template` if it only uses the known fields; `ValueError` naming the others."""
    used = {name for _, name, _, _ in Formatter().parse(template) if name is not None}
    unknown = used - set(TEMPLATE_FIELDS)
    if unknown or not used:
        raise ValueError(f"image_template={template!r}: use one or more of the fields {{{'}, {'.join(TEMPLATE_FIELDS)}}}")
    return template


def image_for(task: Task, template: str | None = None) -> str:
    """The image a task runs in: its own `image` field, else `template`, else the dataset's convention."""
    if task.image:
        return task.image
    if template is None:
        template = SWE_GYM_TEMPLATE if task.repo in SWE_GYM_REPOS else SWE_BENCH_TEMPLATE
    return template.format(
        instance_id=task.instance_id,
        swebench_id=task.instance_id.replace("__", "_1776_").lower(),
        swegym_id=task.instance_id.replace("__", "_s_").lower(),
        repo=task.repo,
        version=task.version or "",
    )


def image_exists(client: Any, name: str) -> bool:
    import docker

    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_image(client: Any, name: str, *, pull: bool = False) -> None:
    """Make sure `name` is present locally, pulling it if allowed; `ImageMissing` saying how to get it."""
    import docker

    if image_exists(client, name):
        return
    hint = "build the fixture images with `gymenvs swe build-images`" if name.startswith("gymenvs/") else "pull or build it"
    if not pull:
        raise ImageMissing(f"image {name!r} is not present locally; {hint}, or pass pull=True to pull it from its registry")
    try:
        client.images.pull(name)
    except docker.errors.DockerException as exc:
        raise ImageMissing(f"image {name!r} is not present locally and could not be pulled ({exc}); {hint}") from None


# -- the Debian base image ----------------------------------------------------------------------


def debian_mirror(suite: str = BASE_SUITE, apt_dir: str | os.PathLike = "/etc/apt") -> str:
    """The Debian mirror this machine's apt uses for `suite`, read from its sources files."""
    apt = Path(apt_dir)
    for path in sorted((apt / "sources.list.d").glob("*.sources")):
        for stanza in _deb822_stanzas(path.read_text()):
            if ("deb" in stanza.get("types", "").split() and suite in stanza.get("suites", "").split()
                    and stanza.get("enabled", "yes") != "no" and stanza.get("uris")):
                return stanza["uris"].split()[0]
    for path in [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.list"))]:
        if path.is_file():
            for line in path.read_text().splitlines():
                words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()  # drop [options]
                if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                    return words[1]
    raise ImageBuildError(f"no apt source for Debian {suite!r} under {apt}; pass the mirror explicitly (--mirror URL)")


def _deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    for block in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in block.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0] in " \t" and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, value = line.split(":", 1)
                key = key.strip().lower()
                fields[key] = value.strip()
        if fields:
            yield fields


def build_base_image(client: Any, *, tag: str = BASE_IMAGE, suite: str = BASE_SUITE, mirror: str | None = None,
                     packages: Sequence[str] = BASE_PACKAGES, force: bool = False, progress: bool = True) -> bool:
    """Build the base image offline from a Debian mirror; False if it already exists (and not `force`)."""
    if image_exists(client, tag) and not force:
        return False
    if shutil.which("debootstrap") is None:
        raise ImageBuildError("debootstrap is not installed (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise ImageBuildError("debootstrap needs root: run this command as root")
    mirror = mirror or debian_mirror(suite)
    with tempfile.TemporaryDirectory(prefix="gymenvs-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        command = ["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", suite, str(rootfs), mirror]
        _run_with_progress(command, desc=f"debootstrap {suite}", disable=not progress)
        _finish_rootfs(rootfs)
        _import_rootfs(client, rootfs, tag, progress)
    return True


def _run_with_progress(command: list[str], *, desc: str, disable: bool) -> None:
    from tqdm import tqdm

    log: list[str] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process, \
            tqdm(desc=desc, unit=" steps", disable=disable) as bar:
        assert process.stdout is not None  # stdout=PIPE
        for line in process.stdout:
            log.append(line.rstrip())
            if line.startswith("I: "):
                bar.update()
                bar.set_postfix_str(line[3:40].strip(), refresh=False)
    if process.returncode != 0:
        raise ImageBuildError(f"{command[0]} failed (exit {process.returncode}):\n" + "\n".join(log[-20:]))


def _finish_rootfs(rootfs: Path) -> None:
    """Drop caches and docs the image does not need; give git an identity and trust /testbed."""
    for pattern in ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*", "usr/share/doc/*", "usr/share/man/*",
                    "usr/share/locale/*", "usr/share/info/*"):
        for path in rootfs.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.name != "lock":
                path.unlink()
    (rootfs / "etc/gitconfig").write_text(_GITCONFIG)


def _import_rootfs(client: Any, rootfs: Path, tag: str, progress: bool) -> None:
    from docker.utils import parse_repository_tag
    from tqdm import tqdm

    repository, version = parse_repository_tag(tag)
    changes = ['ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', "ENV LANG=C.UTF-8",
               f"WORKDIR {WORKDIR}", 'CMD ["/bin/bash"]']
    tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    stream = tar.stdout
    assert stream is not None  # stdout=PIPE
    with tqdm(desc="docker import", unit="B", unit_scale=True, disable=not progress) as bar:
        def chunks() -> Iterator[bytes]:
            while chunk := stream.read(1 << 20):
                bar.update(len(chunk))
                yield chunk
        try:
            client.api.import_image_from_stream(chunks(), repository=repository, tag=version, changes=changes)
        finally:
            stream.close()
            tar.wait()
    if tar.returncode != 0:
        raise ImageBuildError(f"tar of the root file system failed (exit {tar.returncode})")


# -- fixture task images -----------------------------------------------------------------------


def build_fixture_images(client: Any, tasks: Iterable[Task] | None = None, *, base: str = BASE_IMAGE,
                         force: bool = False, progress: bool = True) -> list[str]:
    """Build the image of each fixture task on top of `base`; return the names built (existing ones are kept)."""
    from tqdm import tqdm

    if not image_exists(client, base):
        raise ImageBuildError(f"base image {base!r} is missing: build it first with `gymenvs swe build-base-image`")
    built = []
    for task in tqdm(list(tasks or load_tasks(FIXTURES)), desc="fixture images", unit="image", disable=not progress):
        name = image_for(task)
        if force or not image_exists(client, name):
            build_image(client, fixture_context(task, base), name)
            built.append(name)
    return built


def fixture_context(task: Task, base: str) -> io.BytesIO:
    """A docker build context: the task's repo under repo/ and a Dockerfile that commits it at /testbed.

    The repo is a directory of fixtures/repos, or for a row with an `upstream` field a release's
    sdist fetched by pip (`gymenvs.swe.tasks.upstream`).
    """
    from gymenvs.swe.tasks import upstream

    spec = task.extra.get("upstream")
    files = upstream.context_files(spec) if spec else _fixture_repo_files(task)
    env = " ".join(f'{key}="{value}"' for key, value in _FIXTURE_AUTHOR.items())
    dockerfile = f"""FROM {base}
{upstream.dockerfile_lines(spec) if spec else ""}COPY repo {WORKDIR}
WORKDIR {WORKDIR}
RUN git init -q && git add -A && {env} git commit -q -m "Initial commit" \\
 && test "$(git rev-parse HEAD)" = "{task.base_commit}" \\
 || {{ echo "the fixture repo does not hash to base_commit {task.base_commit}" >&2; exit 1; }}
{upstream.after_commit_lines() if spec else ""}LABEL {LABEL}.instance="{task.instance_id}"
"""
    return io.BytesIO(tar_archive({"Dockerfile": dockerfile.encode(), **files}))


def _fixture_repo_files(task: Task) -> dict[str, bytes]:
    repo_dir = fixtures_path() / "repos" / task.repo.rsplit("/", 1)[-1]
    if not repo_dir.is_dir():
        raise ImageBuildError(f"fixture task {task.instance_id}: no repo at {repo_dir}")
    files = {}
    for path in sorted(repo_dir.rglob("*")):
        relative = path.relative_to(repo_dir)
        if path.is_file() and "__pycache__" not in relative.parts and path.suffix != ".pyc":
            files[f"repo/{relative.as_posix()}"] = path.read_bytes()
    return files


def build_image(client: Any, context: io.BytesIO, tag: str, *, timeout: float | None = None,
                labels: dict[str, str] | None = None) -> None:
    """Build the image `tag` from a tar build context (its Dockerfile at the root), without pulling;
    `ImageBuildError` with the end of the build's log if it fails, or if it is still running `timeout`
    seconds (wall clock) after it started: then the build's connection is shut, which makes the engine
    cancel the build."""
    log: list[str] = []
    # the SDK's timeout is per read: past the limit, so that the watchdog, not a read, ends a silent build
    options: dict[str, Any] = {"timeout": int(timeout) + 60} if timeout else {}
    timed_out = threading.Event()
    watchdog: threading.Timer | None = None
    try:
        stream = client.api.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True, decode=True,
                                  labels=labels, **options)
        if timeout:
            watchdog = threading.Timer(timeout, _cut_build, (client, stream, timed_out))
            watchdog.daemon = True
            watchdog.start()
        for chunk in stream:
            _check_chunk(chunk, tag, log)
    except ImageBuildError:
        if not timed_out.is_set():
            raise
    except Exception as exc:  # the engine failed, a read timed out (urllib3's own error), or the watchdog cut the stream
        if not timed_out.is_set():
            raise ImageBuildError(f"building {tag} failed: {exc}\n" + "".join(log[-20:])) from None
    finally:
        if watchdog is not None:
            watchdog.cancel()
    if timed_out.is_set():
        raise ImageBuildError(f"building {tag} took more than {timeout:g} s; the build was cancelled\n"
                              + "".join(log[-20:]))


def _cut_build(client: Any, stream: Any, timed_out: threading.Event) -> None:
    """Shut the socket a build's log is read from: the blocked read ends, and the engine cancels the build
    when its client goes. The SDK hands out only the generator reading the response: its frame holds it."""
    timed_out.set()
    frame = getattr(stream, "gi_frame", None)
    response = frame.f_locals.get("response") if frame is not None else None
    if response is None:
        return
    try:
        sock = client.api._get_raw_response_socket(response)
        getattr(sock, "_sock", sock).shutdown(socket.SHUT_RDWR)
    except Exception:  # another transport: closing the response is the next best thing
        response.close()


def _check_chunk(chunk: dict[str, Any], tag: str, log: list[str]) -> None:
    if "error" in chunk:
        raise ImageBuildError(f"building {tag} failed: {chunk['error'].strip()}\n" + "".join(log[-20:]))
    log.append(chunk.get("stream", ""))
