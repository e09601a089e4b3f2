"""The browser's processes are found by the marker in their environment, also under a pid an earlier
scan saw: a long run starts thousands of processes and pids wrap (at 32,768 by default)."""

import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from gymenvs.envs.browser import MARKER_ENV, find_browser_processes, kill_browser_processes

NEXT_PID = Path("/proc/sys/kernel/ns_last_pid")


def start_under_pid(pid: int, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start `argv` as process `pid` by setting the kernel's last pid just before (root only; another
    process may take it first, hence the retries)."""
    for _ in range(100):
        NEXT_PID.write_text(str(pid - 1))
        process = subprocess.Popen(argv, env=env)
        if process.pid == pid:
            return process
        process.kill()
        process.wait()
    pytest.fail(f"could not start a process as pid {pid}")


@pytest.mark.slow  # processes started under chosen pids and every process scanned five times: about 2 s
@pytest.mark.skipif(not os.access(NEXT_PID, os.W_OK), reason="needs root to choose the next pid")
def test_a_browser_under_a_reused_pid_is_found_with_its_children_and_killed(tmp_path):
    marker = str(tmp_path / "browser")
    earlier = subprocess.Popen(["sleep", "60"])
    assert find_browser_processes(marker) == []  # this scan sees `earlier`, not ours
    earlier.kill()
    earlier.wait()

    # A "browser" whose process takes `earlier`'s pid, with a child that has no marker of its own.
    argv = ["sh", "-c", f"env -u {MARKER_ENV} sleep 60 & wait"]
    browser = start_under_pid(earlier.pid, argv, {**os.environ, MARKER_ENV: marker})
    try:
        child = _wait_for_child(browser.pid)
        for _ in range(3):  # every scan, not only the first after the reuse
            assert sorted(process.pid for process in find_browser_processes(marker)) == sorted([browser.pid, child])
        kill_browser_processes(marker)
        assert browser.wait(timeout=5) is not None
        assert find_browser_processes(marker) == []
    finally:
        browser.kill()
        browser.wait()


def _wait_for_child(pid: int) -> int:
    for _ in range(500):
        children = psutil.Process(pid).children()
        if children:
            return children[0].pid
        time.sleep(0.01)
    pytest.fail("the browser's child did not start")
