"""A pytest plugin that grading loads into the tests' run (`PYTEST_PLUGINS=gymenvs_results_<hash>`).

It writes every test report, as pytest makes it, to a file descriptor that the root grading runner
opened on a root-only file: a JSON line per report, framed by a start and a finish record. Output
the code under test prints (a fake short test summary at exit, say) never reaches that file, so
grading checks the log's verdicts against it. Code that deliberately writes to that descriptor
from inside the pytest process is not stopped: see docs/swe-security.md.

This file is copied into the grading container as is, under a module name that changes with every
grading run (so the repository cannot ship a module of that name): it imports only the standard library.
"""

import json
import os

_stream = None
_config = None


def pytest_configure(config):
    global _stream, _config
    _config = config
    fd = os.environ.pop("GYMENVS_RESULTS_FD", None)
    if fd is None or hasattr(config, "workerinput"):  # an xdist worker: its controller reports
        return
    try:
        _stream = os.fdopen(int(fd), "w", buffering=1)
    except (OSError, ValueError):
        return
    _write({"event": "start"})


def pytest_runtest_logreport(report):
    if _stream is not None:
        nodeid = _config.cwd_relative_nodeid(report.nodeid)  # as the -rA summary names it
        _write({"nodeid": nodeid, "when": report.when, "outcome": report.outcome,
                "xfail": hasattr(report, "wasxfail")})


def pytest_sessionfinish(session, exitstatus):
    if _stream is not None:
        _write({"event": "finish", "exitstatus": int(exitstatus)})


def _write(record):
    try:
        _stream.write(json.dumps(record) + "\n")
    except (OSError, ValueError):
        pass
