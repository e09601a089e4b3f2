"""Headless Chromium driven by Selenium, that never outlives the Python process that started it.

Each `Browser` is one chromedriver and one Chromium, started from Debian's `chromium` and
`chromium-driver` with the flags that keep Chromium off the network, and a fresh profile in a
directory of its own under `BROWSER_ROOT`, named after the owning process (pid and start time).
Every process of that browser carries the directory in its environment (`GYMENVS_BROWSER_DIR`),
so it can be found whatever its parent. Three things remove them:

- `close()` quits the driver, kills whatever is left and deletes the directory;
- a guard process (one per owning process) waits on a pipe from its owner: when the owner dies,
  even by SIGKILL, the pipe closes and the guard kills the owner's browsers;
- at every browser start, the reaper removes the browsers of owners that are gone (for when the
  guard was killed too).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from gymenvs.envs.optional import require

BROWSER_ROOT = Path(tempfile.gettempdir()) / "gymenvs-browsers"
MARKER_ENV = "GYMENVS_BROWSER_DIR"
#: Flags for Chromium as root in a container: no sandbox, no GPU, and nothing that reaches out
#: to the network on its own (updates, sync, safe browsing, QUIC probes).
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)

_guard_lock = threading.Lock()
_guard: tuple[int, subprocess.Popen] | None = None  # (owner pid, guard process)


def _psutil():
    return require("psutil", extra="miniwob", needed_by="the browser envs")


def owner_prefix(pid: int | None = None) -> str:
    """The directory-name prefix of the browsers a process owns: its pid and start time (pids are reused)."""
    process = _psutil().Process(pid or os.getpid())
    return f"{process.pid}-{int(process.create_time() * 1000)}-"


class Browser:
    """One headless Chromium and its chromedriver. `driver` is the Selenium `WebDriver`.

    `viewport` is the page's size in CSS pixels (`window.innerWidth`, `window.innerHeight`), which a
    screenshot covers pixel for pixel: it is set through the DevTools protocol, because
    `--window-size` sizes the outer window and headless Chromium keeps part of it for its own frame.

    Selenium talks HTTP to chromedriver, so any thread may drive the browser, one at a time.
    """

    def __init__(self, *, chromium: str, chromedriver: str, viewport: tuple[int, int], page_load_timeout_s: float = 120):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        for name, path in (("chromium", chromium), ("chromedriver", chromedriver)):
            if shutil.which(path) is None:
                raise FileNotFoundError(
                    f"{name} not found at {path!r}: install Debian's chromium and chromium-driver (.ci/setup does)"
                )
        reap_orphans()
        BROWSER_ROOT.mkdir(parents=True, exist_ok=True)
        self.directory = Path(tempfile.mkdtemp(prefix=owner_prefix(), dir=BROWSER_ROOT))
        _start_guard()
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        width, height = viewport
        for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={self.directory / 'profile'}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        service = Service(
            executable_path=chromedriver,
            env={**os.environ, MARKER_ENV: str(self.directory)},
            log_output=subprocess.DEVNULL,
        )
        try:
            self.driver = webdriver.Chrome(service=service, options=options)
            self.driver.set_page_load_timeout(page_load_timeout_s)
            self.driver.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
            )
        except BaseException:
            kill_browser_processes(str(self.directory))
            shutil.rmtree(self.directory, ignore_errors=True)
            raise
        self._closed = False

    def pids(self) -> list[int]:
        """The processes of this browser: chromedriver, Chromium and Chromium's helpers."""
        return [process.pid for process in find_browser_processes(str(self.directory))]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.driver.quit()
        except Exception:  # the driver may be dead already; what is left is killed below
            pass
        kill_browser_processes(str(self.directory))
        shutil.rmtree(self.directory, ignore_errors=True)


def find_browser_processes(marker: str, *, prefix: bool = False) -> list[Any]:
    """Processes whose `GYMENVS_BROWSER_DIR` is `marker` (or starts with it, with `prefix=True`), and
    their descendants (Chromium's zygotes start its renderers with an emptied environment)."""
    found: dict[int, Any] = {}
    for process in _fresh_processes():
        value = _marker_of(process)
        if value is not None and (value.startswith(marker) if prefix else value == marker):
            found[process.pid] = process
            found.update((child.pid, child) for child in _children(process))
    return [process for process in found.values() if _is_running(process)]


def _fresh_processes() -> list[Any]:
    """Every running process, each read afresh. Not `psutil.process_iter`: it keeps its `Process`
    objects from one call to the next, and under a pid reused since then (pids wrap, at 32,768 by
    default) `children()` and `kill()` raise `NoSuchProcess` and the next call skips the pid: a
    browser's helpers went unkilled, or the whole browser unseen."""
    psutil = _psutil()
    processes = []
    for pid in psutil.pids():
        try:
            processes.append(psutil.Process(pid))
        except psutil.Error:  # it exited since the list was read
            continue
    return processes


def _marker_of(process: Any) -> str | None:
    """The process's `GYMENVS_BROWSER_DIR`; None when it has none, has exited, or is not ours to read."""
    try:
        return process.environ().get(MARKER_ENV)
    except (_psutil().Error, OSError):
        return None


def _children(process: Any) -> list[Any]:
    try:
        return process.children(recursive=True)
    except (_psutil().Error, OSError):  # it exited after its environment was read
        return []


def _is_running(process: Any) -> bool:
    psutil = _psutil()
    try:
        return process.status() != psutil.STATUS_ZOMBIE  # a zombie is dead: only its parent's wait is missing
    except psutil.Error:
        return False


def kill_browser_processes(marker: str, *, prefix: bool = False) -> None:
    psutil = _psutil()
    processes = find_browser_processes(marker, prefix=prefix)
    for process in processes:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(processes, timeout=5)


def reap_orphans() -> None:
    """Remove the browsers (processes and directories) of owners that no longer run."""
    if not BROWSER_ROOT.is_dir():
        return
    live_owners = set()
    for entry in BROWSER_ROOT.iterdir():
        owner = entry.name.split("-", 2)
        if len(owner) < 3 or not owner[0].isdigit():
            continue
        prefix = f"{owner[0]}-{owner[1]}-"
        if prefix in live_owners or _owner_is_running(int(owner[0]), prefix):
            live_owners.add(prefix)
            continue
        kill_browser_processes(str(entry))
        shutil.rmtree(entry, ignore_errors=True)


def _owner_is_running(pid: int, prefix: str) -> bool:
    psutil = _psutil()
    try:
        return owner_prefix(pid) == prefix
    except psutil.Error:
        return False


def _start_guard() -> None:
    """Start this process's guard unless it runs already (a forked child starts its own)."""
    global _guard
    with _guard_lock:
        if _guard is not None and _guard[0] == os.getpid() and _guard[1].poll() is None:
            return
        marker = str(BROWSER_ROOT / owner_prefix())
        guard = subprocess.Popen(
            [sys.executable, "-m", "gymenvs.envs.browser", marker],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])},
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a signal to the owner's process group does not reach the guard
        )
        _guard = (os.getpid(), guard)


def _guard_main(marker: str) -> None:
    """The guard: block until the owner's end of the pipe closes, then kill the owner's browsers."""
    sys.stdin.buffer.read()
    kill_browser_processes(marker, prefix=True)
    for entry in BROWSER_ROOT.glob(Path(marker).name + "*"):
        shutil.rmtree(entry, ignore_errors=True)


if __name__ == "__main__":
    _guard_main(sys.argv[1])
