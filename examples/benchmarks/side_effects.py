"""What importing gymenvs, and building and resetting its container envs, change in the process.

    python examples/benchmarks/side_effects.py      # PYTHONPATH picks the checkout to measure

In a fresh Python (on the gymenvs this script imports), counts the process-wide changes: third-party
(gymnasium) classes whose attributes `import gymenvs` changed, import hooks it added to `sys.meta_path`,
and signal handlers (SIGINT, SIGTERM) changed by the import, by building gymenvs/SWE-v0 and
gymenvs/TerminalAgent-v0, and by resetting them (which reaches the Docker engine: it must run, with the
fixture images built).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = """
import inspect, json, signal, sys
import gymnasium, gymnasium.spaces, gymnasium.vector, gymnasium.wrappers

CLASSES = [value for module in (gymnasium, gymnasium.spaces, gymnasium.vector, gymnasium.wrappers)
           for value in vars(module).values() if inspect.isclass(value) and value.__module__.startswith("gymnasium")]

def state():
    return ({cls: dict(vars(cls)) for cls in CLASSES}, list(sys.meta_path),
            {name: signal.getsignal(getattr(signal, name)) for name in ("SIGINT", "SIGTERM")})

def handlers_changed(before, after):
    return sorted(name for name in before if before[name] != after[name])

classes, meta_path, signals = state()
import gymenvs
after_classes, after_meta_path, after_import = state()
envs = [gymnasium.make(env_id) for env_id in ("gymenvs/SWE-v0", "gymenvs/TerminalAgent-v0")]
after_build = state()[2]
for env in envs:
    env.reset(seed=0)
after_reset = state()[2]
for env in envs:
    env.close()
print(json.dumps({
    "gymnasium classes changed by import": sum(classes[cls] != after_classes[cls] for cls in CLASSES),
    "import hooks added": len([finder for finder in after_meta_path if finder not in meta_path]),
    "signal handlers changed by import": handlers_changed(signals, after_import),
    "signal handlers changed by building the envs": handlers_changed(after_import, after_build),
    "signal handlers changed by resetting them": handlers_changed(after_build, after_reset),
}))
"""


def main() -> None:
    import gymenvs

    checkout = Path(gymenvs.__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=checkout, timeout=600)
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    for name, value in json.loads(result.stdout.strip().splitlines()[-1]).items():
        print(f"{name}: {value}")


if __name__ == "__main__":
    main()
