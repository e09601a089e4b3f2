"""Images every container env needs: one present locally (`ensure_image`), and the base image built offline.

`build_base_image`: Debian (python3, pytest, git) bootstrapped with `debootstrap` from the machine's
own apt mirror and turned into an image through the runtime (`Runtime.import_image`). The fixture
tasks of both families (gymenvs/swe/tasks/fixtures, gymenvs/terminal/fixtures) are built on it, so
nothing is pulled from a registry.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from gymenvs.container.runtime import ImageBuildError, ImageMissing, Runtime

BASE_IMAGE = "gymenvs/swe-base:bookworm"
BASE_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-pytest", "git", "patch")
#: The base image's working directory (where the SWE fixtures keep their repository).
BASE_WORKDIR = "/testbed"
_GITCONFIG = ("[safe]\n\tdirectory = *\n"
              "[user]\n\tname = gymenvs agent\n\temail = agent@gymenvs.invalid\n"
              "[init]\n\tdefaultBranch = main\n")


def ensure_image(runtime: Runtime, name: str, *, pull: bool = False, registry: str | None = None,
                 hint: str = "pull or build it") -> None:
    """Make sure `name` is present: from `registry` (a registry holding gymenvs' images, `push_image`) if given,
    then from its own registry if `pull`; `ImageMissing` saying how to get it (`hint`)."""
    if runtime.image_exists(name):
        return
    if registry is not None:
        try:
            pull_from_registry(runtime, name, registry)
            return
        except ImageMissing:
            if not pull:
                raise
    if not pull:
        raise ImageMissing(f"image {name!r} is not present locally; {hint}, or pass pull=True to pull it from its registry")
    try:
        runtime.pull(name)
    except ImageMissing as exc:
        raise ImageMissing(f"image {name!r} is not present locally and could not be pulled ({exc}); {hint}") from None


def in_registry(name: str, registry: str) -> str:
    """The name `name` has in `registry` ("host:port" or "host:port/prefix"): `registry/name`."""
    return f"{registry}/{name}"


def pull_from_registry(runtime: Runtime, name: str, registry: str) -> None:
    """Pull `name` from `registry` and tag it `name`, as the envs call it; `ImageMissing` if the registry lacks it."""
    remote = in_registry(name, registry)
    try:
        runtime.pull(remote)
    except ImageMissing as exc:
        raise ImageMissing(f"image {name!r} is not present locally and not in registry {registry!r} ({exc}); push it "
                           "there from a machine that has it (`--push REGISTRY` of the build commands)") from None
    runtime.tag(remote, name)


def push_image(runtime: Runtime, name: str, registry: str) -> str:
    """Tag the local image `name` as `registry/name` and push it there; the name it has in the registry."""
    remote = in_registry(name, registry)
    runtime.tag(name, remote)
    runtime.push(remote)
    return remote


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


def build_base_image(runtime: Runtime, *, tag: str = BASE_IMAGE, suite: str = BASE_SUITE, mirror: str | None = None,
                     packages: Sequence[str] = BASE_PACKAGES, force: bool = False, progress: bool = True) -> bool:
    """Build the base image offline from a Debian mirror; False if it already exists (and not `force`)."""
    if runtime.image_exists(tag) and not force:
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
        _import_rootfs(runtime, rootfs, tag, progress)
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


def _import_rootfs(runtime: Runtime, rootfs: Path, tag: str, progress: bool) -> None:
    from tqdm import tqdm

    repository, _, version = tag.rpartition(":") if ":" in tag.rsplit("/", 1)[-1] else (tag, "", "latest")
    changes = ['ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', "ENV LANG=C.UTF-8",
               f"WORKDIR {BASE_WORKDIR}", 'CMD ["/bin/bash"]']
    tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    stream = tar.stdout
    assert stream is not None  # stdout=PIPE
    with tqdm(desc="docker import", unit="B", unit_scale=True, disable=not progress) as bar:
        def chunks() -> Iterator[bytes]:
            while chunk := stream.read(1 << 20):
                bar.update(len(chunk))
                yield chunk
        try:
            runtime.import_image(chunks(), repository, version, changes)
        finally:
            stream.close()
            tar.wait()
    if tar.returncode != 0:
        raise ImageBuildError(f"tar of the root file system failed (exit {tar.returncode})")


# -- fixture task images -----------------------------------------------------------------------
