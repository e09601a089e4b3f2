"""What the runtime integrity check of grading's report plugin costs per test: `_machinery()`, the
fingerprint of pytest's machinery it takes after each test's teardown, timed with `timeit`.

    python examples/benchmarks/swe_integrity_cost.py
    docker run --rm -v $PWD:/src:ro gymenvs/swe-fixture.textkit-1:latest \
        python3 /src/examples/benchmarks/swe_integrity_cost.py      # with a task image's pytest

Loads the plugin from its file, as grading's runs load it (without a results descriptor, so it
writes nothing; it needs nothing but pytest), and prints the mean time of one call, on this
machine under whatever load it has.
"""

from __future__ import annotations

import importlib.util
import sys
import timeit
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parents[2] / "gymenvs" / "swe" / "grading" / "results_plugin.py"


def main() -> None:
    spec = importlib.util.spec_from_file_location("gymenvs_results_cost", PLUGIN)
    assert spec is not None and spec.loader is not None
    plugin = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = plugin
    spec.loader.exec_module(plugin)
    calls, seconds = timeit.Timer(plugin._machinery).autorange()
    print(f"pytest {pytest.__version__}: _machinery() {seconds / calls * 1e3:.3f} ms per call ({calls} calls)")


if __name__ == "__main__":
    main()
