"""Record the real test logs of the SWE parity suite (tests/swe/test_swe_parity.py).

Every log is the output of a real runner in a container from the base image, without network:

- pytest 7.2 (Debian's) and pytest 8.3 (from its wheel) on a suite that passes, fails, errors,
  skips, xfails, xpasses and has parametrised ids with spaces; the test suite of a real package
  (itsdangerous 2.1.0 from its sdist, with the regression test of its 2.1.1 fix, which fails);
  pytest that cannot start (a missing plugin, exit 4) or cannot collect;
- Django's own `tests/runtests.py` from the Django sdist, on a few of its test modules;
- sympy's test runner from the sympy sdist, on a few of its test files. The sdist does not ship
  `bin/test`, a thin wrapper over `sympy.test(...)`: we call that function as it does.

Failures come from small bugs put into the library code before the run (see BUGS), so the logs
hold real FAILED / ERROR results. Each log is framed as the SWE-bench harness frames it
(`>>>>> Start Test Output`, `>>>>> End Test Output`, `>>>>> Test Exit Code: N`), and
manifest.json names the harness parser for each.

    .venv/bin/python tests/swe/data/parity/record.py      # needs Docker and the package index
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import docker

HERE = Path(__file__).parent
BASE_IMAGE = "gymenvs/swe-base:bookworm"
SDISTS = ["Django==4.2.16", "sympy==1.12.1", "itsdangerous==2.1.0", "itsdangerous==2.1.1"]
WHEELS = ["asgiref==3.8.1", "sqlparse==0.5.1", "mpmath==1.3.0", "pytest==8.3.3", "pluggy==1.5.0",
          "iniconfig==2.0.0", "packaging==24.1", "freezegun==1.5.1", "python-dateutil==2.9.0.post0", "six==1.16.0"]

STATUS_SUITE = '''
import logging
import unittest

import pytest


def test_passes():
    print("some output of a passing test")


def test_fails():
    assert [1, 2] == [1, 3]


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


def test_errors_in_setup(broken):
    pass


@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown broke")


def test_errors_in_teardown(broken_teardown):
    pass


@pytest.mark.skip(reason="not today")
def test_skipped_by_mark():
    pass


def test_skipped_inside():
    pytest.skip("not here either")


@pytest.mark.xfail(reason="known bug")
def test_xfails():
    assert False


@pytest.mark.xfail(reason="fixed already")
def test_xpasses():
    pass


@pytest.mark.xfail(reason="fixed, strictly", strict=True)
def test_xpasses_strict():
    pass


def test_logs_an_error():
    logging.getLogger(__name__).error("a logged error, not a test error")


@pytest.mark.parametrize("text", ["x y", "x z", "a - b", "plain", "log(photon cts)"])
def test_params(text):
    assert text != "x z"


class TestGroup:
    def test_in_class(self):
        pass

    @pytest.mark.parametrize("n", [1, 2])
    def test_in_class_param(self, n):
        assert n == 1


class LegacyCase(unittest.TestCase):
    def test_unittest_pass(self):
        pass

    @unittest.skip("legacy skip")
    def test_unittest_skip(self):
        pass

    @unittest.expectedFailure
    def test_unittest_expected_failure(self):
        self.assertEqual(1, 2)
'''

#: Small bugs put into each library before its run: (file, old text, new text).
BUGS = {
    "django": [
        ("django/utils/text.py", '"f": "3",', '"f": "4",'),
        ("django/utils/text.py", "def get_valid_filename(name):\n", "def get_valid_filename(name):\n    name.no_such_method()\n"),
    ],
    "sympy": [
        ("sympy/utilities/iterables.py", "def rotate_left(x, y):\n", "def rotate_left(x, y):\n    y += 1\n"),
        ("sympy/utilities/iterables.py", "def kbins(l, k, ordered=None):\n", "def kbins(l, k, ordered=None):\n    l.no_such_method()\n"),
    ],
}

UNPACK = "mkdir -p /deps && for w in /cache/wheels/*.whl; do python3 -m zipfile -e $w /deps/$(basename $w .whl); done"


def scenarios() -> dict[str, tuple[str, str]]:
    """name -> (harness parser, bash that prepares and runs one test command in /work)."""
    pytest8 = "/deps/pytest-8.3.3-py3-none-any:/deps/pluggy-1.5.0-py3-none-any:/deps/iniconfig-2.0.0-py3-none-any:/deps/packaging-24.1-py3-none-any"
    its_deps = "/deps/freezegun-1.5.1-py3-none-any:/deps/python_dateutil-2.9.0.post0-py2.py3-none-any:/deps/six-1.16.0-py2.py3-none-any"
    suite = f"mkdir -p /work/tests && cd /work && cat > tests/test_statuses.py <<'EOF'\n{STATUS_SUITE}\nEOF\n"
    return {
        "pytest7_statuses": ("parse_log_pytest", suite + "RUN pytest -rA -p no:cacheprovider tests"),
        "pytest8_statuses": ("parse_log_pytest", suite + f"RUN env PYTHONPATH={pytest8} python3 -m pytest -rA -p no:cacheprovider tests"),
        "pytest7_plugin_missing": ("parse_log_pytest", suite + "RUN pytest -rA -p no:cacheprovider -p xdist tests"),
        "pytest7_config_needs_plugin": ("parse_log_pytest", suite + "printf '[pytest]\\naddopts = -n 2\\n' > pytest.ini\n"
                                        "RUN pytest -rA -p no:cacheprovider tests"),
        "pytest7_collection_error": ("parse_log_pytest", suite + "echo 'import not_installed' > tests/test_broken.py\n"
                                     "RUN pytest -rA -p no:cacheprovider tests"),
        "pytest7_itsdangerous": ("parse_log_pytest", "mkdir -p /work && cd /work && tar xzf /cache/sdist/itsdangerous-2.1.0.tar.gz --strip-components=1\n"
                                 + "tar xzf /cache/sdist/itsdangerous-2.1.1.tar.gz --strip-components=1 "
                                 "itsdangerous-2.1.1/tests/test_itsdangerous/test_timed.py\n"
                                 + f"RUN env PYTHONPATH=src:{its_deps} pytest -rA -p no:cacheprovider tests"),
        "django_runtests": ("parse_log_django", "mkdir -p /work && cd /work && tar xzf /cache/sdist/Django-4.2.16.tar.gz --strip-components=1\n"
                            + bugs("django") + "cd tests\nRUN env PYTHONPATH=/deps/asgiref-3.8.1-py3-none-any:"
                            "/deps/sqlparse-0.5.1-py3-none-any:.. python3 ./runtests.py --verbosity 2 --settings=test_sqlite "
                            "--parallel 1 basic utils_tests.test_text"),
        "sympy_test": ("parse_log_sympy", "mkdir -p /work && cd /work && tar xzf /cache/sdist/sympy-1.12.1.tar.gz --strip-components=1\n"
                       + bugs("sympy") + "RUN env PYTHONPATH=/deps/mpmath-1.3.0-py3-none-any SYMPY_USE_CACHE=no "
                       "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' python3 -c "
                       "'import sys, sympy; sys.exit(not sympy.test(*sys.argv[1:], verbose=True))' "
                       "sympy/utilities/tests/test_iterables.py sympy/core/tests/test_arit.py"),
    }


def bugs(library: str) -> str:
    code = "\n".join(f"p = {path!r}; s = open(p).read(); assert {old!r} in s, p; open(p, 'w').write(s.replace({old!r}, {new!r}, 1))"
                     for path, old, new in BUGS[library])
    return f"python3 - <<'EOF'\n{code}\nEOF\n"


def framed(script: str) -> str:
    """The scenario's bash with its RUN line framed by the harness's markers."""
    run = ("echo \"+ : '>>>>> Start Test Output'\"\n{}\ncode=$?\necho \"+ : '>>>>> End Test Output'\"\n"
           "echo \">>>>> Test Exit Code: $code\"")
    lines = [run.format(line.removeprefix("RUN ") + " 2>&1") if line.startswith("RUN ") else line for line in script.split("\n")]
    return f"set -u\n{UNPACK} >/dev/null\n" + "\n".join(lines) + "\n"


def download(cache: Path) -> None:
    """The sdists and wheels, each fetched once by pip into `cache`."""
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps"]
    for kind, option, requirements in (("sdist", "--no-binary", SDISTS), ("wheels", "--only-binary", WHEELS)):
        for requirement in requirements:
            name, version = requirement.split("==")
            if not list((cache / kind).glob(f"{name.replace('-', '_')}-{version}*")) + list((cache / kind).glob(f"{name}-{version}*")):
                subprocess.run([*pip, option, ":all:", "-d", str(cache / kind), requirement], check=True)


def record(cache: Path, names: list[str]) -> dict[str, str]:
    client = docker.from_env()
    parsers = {}
    for name, (parser, script) in scenarios().items():
        if names and name not in names:
            continue
        output = client.containers.run(BASE_IMAGE, ["bash", "-c", framed(textwrap.dedent(script))], remove=True,
                                       network_mode="none", volumes={str(cache): {"bind": "/cache", "mode": "ro"}},
                                       stdout=True, stderr=True, environment={"LANG": "C.UTF-8"})
        text = output.decode("utf-8", "replace")
        (HERE / f"{name}.log").write_text(text)
        parsers[name] = parser
        print(f"{name}: {len(text.splitlines())} lines, {text.strip().splitlines()[-1]}")
    return parsers


def main() -> None:
    names = sys.argv[1:]
    cache = Path(tempfile.gettempdir()) / "gymenvs-parity-downloads"
    download(cache)
    parsers = record(cache, names)
    manifest = HERE / "manifest.json"
    known = json.loads(manifest.read_text()) if manifest.exists() else {}
    manifest.write_text(json.dumps({**known, **parsers}, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
