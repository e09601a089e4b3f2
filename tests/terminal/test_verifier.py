"""The verifier started ahead (`gymenvs.terminal.verifier`), against the real Docker engine: grading copies the agent's
changes into it from the agent's layer, and its tests see the same files as in a snapshot of the agent's container;
grading runs nothing in the agent's container when nothing there listens, and reaches the verifier's volumes on this
host. The attacks on both ways of grading are in test_tamper.py."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pytest

from gymenvs.container.runtime import Limits
from gymenvs.terminal.grading import grade_task
from gymenvs.terminal.task import TerminalTask
from gymenvs.terminal.verifier import Verifier

pytestmark = pytest.mark.docker

BASE = "gymenvs/swe-base:bookworm"
#: What the agent does to its container's files: every kind of change a layer holds.
AGENT = textwrap.dedent("""\
    set -e
    mkdir -p /app/deep/er && echo nested > /app/deep/er/file
    echo secret > /app/private && chmod 0600 /app/private && chown 65534:65534 /app/private
    printf 'x' > /app/a && ln /app/a /app/b
    ln -s /etc/hostname /app/link
    mkfifo /app/fifo
    touch '/app/with space' && echo runs > /app/tool && chmod 4755 /app/tool
    echo old > /app/old && touch -d '2001-02-03 04:05:06' /app/old
    echo changed >> /etc/issue
    rm /etc/issue.net
    rm -rf /etc/skel && mkdir /etc/skel && echo only > /etc/skel/only
    chmod 0700 /srv
    """)
#: test.sh: every entry of the folders the agent changed (but the engine's own mounts), with kind, mode, owner, size,
#: links (not a folder's: overlayfs counts a merged folder's its own way) and link target, the files' checksums, and
#: the time of the file the agent dated; then a reward of 1.
MANIFEST = textwrap.dedent("""\
    ENGINES='! -path /etc/hostname ! -path /etc/hosts ! -path /etc/resolv.conf'
    for top in /app /etc /srv; do
      find "$top" -xdev -type d -printf '%p %y %m %u %g\\n'  # a folder's link count is overlayfs' own
      find "$top" -xdev ! -type d $ENGINES -printf '%p %y %m %u %g %s %n %l\\n'
      find "$top" -xdev -type f $ENGINES -exec md5sum {} +
    done | sort
    stat -c '%n %Y' /app/old
    echo 1 > /logs/verifier/reward.txt
    """)


def make_task(root: Path) -> TerminalTask:
    folder = root / "manifest"
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "instruction.md").write_text("Change files.\n")
    (folder / "task.toml").write_text('schema_version = "1.0"\n[verifier]\ntimeout_sec = 60\n[environment]\ncpus = 1\n'
                                      'memory_mb = 512\nstorage_mb = 2048\nallow_internet = false\n')
    (folder / "environment" / "Dockerfile").write_text(f"FROM {BASE}\nWORKDIR /app\n")
    (folder / "tests" / "test.sh").write_text(f"#!/bin/bash\n{MANIFEST}")
    return TerminalTask.from_dir(folder)


def graded(runtime, task: TerminalTask, *, ahead: bool):
    """Run AGENT in a container, grade it (in a verifier started ahead, or a snapshot); the result, the engine calls
    grading made on the agent's container."""
    limits = Limits(mem_limit="512m", network=False, disk_limit=None)
    sandbox = runtime.start(BASE, role="verifier-test", episode_id=task.name, workdir="/app", limits=limits)
    verifier = Verifier.start(runtime, BASE, task, limits=limits, workdir="/app", nonce=uuid.uuid4().hex[:12]) if ahead else None
    calls: list[str] = []
    try:
        assert sandbox.run(AGENT, timeout=30).exit_code == 0
        for name in ("run", "open_exec", "commit"):
            setattr(sandbox, name, _counted(getattr(sandbox, name), name, calls))
        return grade_task(sandbox, task, ahead=verifier), calls
    finally:
        sandbox.remove()


def _counted(method, name: str, calls: list[str]):
    def call(*args, **kwargs):
        calls.append(name)
        return method(*args, **kwargs)
    return call


def test_the_verifier_started_ahead_sees_the_agents_files_as_a_snapshot_does(runtime, swe_images, tmp_path):
    task = make_task(tmp_path)
    copied, calls_copied = graded(runtime, task, ahead=True)
    snapshot, calls_snapshot = graded(runtime, task, ahead=False)
    assert (copied.reward, snapshot.reward) == (1.0, 1.0), (copied, snapshot)
    assert calls_copied == [] and calls_snapshot == ["commit"]  # nothing ran in the agent's container: nothing listened
    manifest = copied.log.splitlines()
    assert len(manifest) > 200 and manifest == snapshot.log.splitlines()
    entries = {line.split(" ", 1)[0]: line for line in manifest if line.startswith("/")}
    assert "/etc/issue.net" not in entries and "/etc/skel/.bashrc" not in entries and "/etc/skel/only" in entries
    assert entries["/app/private"].split()[1:5] == ["f", "600", "nobody", "nogroup"]
    assert entries["/app/b"].split()[6] == "2" and entries["/app/link"].split()[1] == "l"
    assert entries["/app/fifo"].split()[1] == "p" and entries["/app/tool"].split()[2] == "4755"
    assert "/app/old 981173106" in manifest and entries["/srv"].split()[2] == "700"


def test_the_verifiers_volumes_are_reached_on_this_host(runtime, swe_images, tmp_path):
    """The tests are written into their volume, and the reward read from its, without an engine call."""
    task = make_task(tmp_path)
    verifier = Verifier.start(runtime, BASE, task, limits=Limits(network=False, disk_limit=None), workdir="/app",
                              nonce=uuid.uuid4().hex[:12])
    try:
        assert verifier.logs_directory is not None
        seen = verifier.sandbox.run("stat -c '%U %a' /tests/test.sh && echo 0.5 > /logs/verifier/reward.txt", timeout=10)
        assert seen.output.text().split() == ["root", "644"]
        assert Path(verifier.logs_directory, "reward.txt").read_text() == "0.5\n"
    finally:
        verifier.remove()
    assert not Path(verifier.logs_directory).exists()
