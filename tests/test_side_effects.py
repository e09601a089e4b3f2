"""`import gymenvs` registers its env ids and does nothing else to the process: it changes no
third-party class (no `__getattr__` on `gymnasium.Wrapper`), adds no import hook to `sys.meta_path`
and installs no signal handler. Checked in a fresh interpreter, on the checkout these tests are in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Run in a fresh interpreter: what the process looks like before and after `import gymenvs`.
PROBE = """
import inspect, json, signal, sys
import gymnasium, gymnasium.spaces, gymnasium.vector, gymnasium.wrappers

SIGNALS = ("SIGINT", "SIGTERM")
CLASSES = sorted(
    {value for module in (gymnasium, gymnasium.spaces, gymnasium.vector, gymnasium.wrappers)
     for value in vars(module).values() if inspect.isclass(value) and value.__module__.startswith("gymnasium")},
    key=lambda cls: f"{cls.__module__}.{cls.__qualname__}",
)

def snapshot():
    return {
        "meta_path": [repr(finder) for finder in sys.meta_path],
        "signals": {name: repr(signal.getsignal(getattr(signal, name))) for name in SIGNALS},
        "classes": {f"{cls.__module__}.{cls.__qualname__}": {name: id(value) for name, value in vars(cls).items()}
                    for cls in CLASSES},
    }

before = snapshot()
import gymenvs
after = snapshot()
print(json.dumps({
    "gymenvs": gymenvs.__file__,
    "registered": len(gymenvs.list_envs()),
    "wrapper_getattr": "__getattr__" in gymnasium.Wrapper.__dict__,
    "meta_path": [before["meta_path"], after["meta_path"]],
    "signals": [before["signals"], after["signals"]],
    "changed_classes": sorted(name for name in before["classes"] if before["classes"][name] != after["classes"][name]),
    "classes_checked": len(CLASSES),
}))
"""


def probe_import() -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_import_gymenvs_changes_no_third_party_class_import_hook_or_signal_handler():
    found = probe_import()
    assert Path(found["gymenvs"]).resolve().parent == ROOT / "gymenvs"  # this checkout's code
    assert found["registered"] > 0 and found["classes_checked"] > 10
    assert not found["wrapper_getattr"], "import gymenvs gave gymnasium.Wrapper a __getattr__"
    assert found["changed_classes"] == []
    before, after = found["meta_path"]
    assert after == before, "import gymenvs changed sys.meta_path"
    before, after = found["signals"]
    assert after == before, "import gymenvs installed a signal handler"
