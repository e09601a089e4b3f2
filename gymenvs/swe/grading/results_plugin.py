"""A pytest plugin that grading loads into the tests' run (`PYTEST_PLUGINS=gymenvs_results_<hash>`).

It writes every test report, as pytest makes it, to a file descriptor that the root grading runner
opened on a root-only file: a JSON line per report, framed by a start and a finish record. Output
the code under test prints (a fake short test summary at exit, say) never reaches that file, so
grading checks the log's verdicts against it.

Each record carries a sequence number and an HMAC under a key read once, at import, from a second
descriptor the runner opened on a root-only file (then closed): a record that code under test writes
to the results descriptor does not verify, and grading calls the run tampered.

It is also a runtime integrity check. pytest imports it before any code of the repository (the
package under test, imported during collection): at import it records the identity (and code) of
pytest's test-calling and reporting machinery, of the import system and tracing hooks, and of this
plugin's own functions; at configure, the terminal reporter; after collection, the registered
plugins and the implementations of the hooks that run and report a test. It checks them again
after each test and at the end of the session; any change is written as a `tampered` record.
What this can and cannot see is in docs/swe-security.md.

This file is copied into the grading container as is, under a module name that changes with every
grading run (so the repository cannot ship a module of that name): it imports only the standard
library at import time (pytest's own modules are already loaded when it is imported).
"""

import builtins
import hashlib
import hmac
import json
import os
import sys

import pytest

#: pytest's machinery that runs a test and turns its result into a report, by module and attribute.
WATCHED = (
    ("_pytest.runner", "runtestprotocol"), ("_pytest.runner", "call_and_report"),
    ("_pytest.runner", "call_runtest_hook"), ("_pytest.runner", "check_interactive_exception"),
    ("_pytest.runner", "CallInfo.from_call"), ("_pytest.runner", "pytest_runtest_makereport"),
    ("_pytest.runner", "pytest_runtest_protocol"), ("_pytest.runner", "pytest_runtest_call"),
    ("_pytest.runner", "pytest_report_teststatus"), ("_pytest.runner", "show_test_item"),
    ("_pytest.reports", "TestReport.__init__"), ("_pytest.reports", "TestReport.from_item_and_call"),
    ("_pytest.reports", "BaseReport.passed"), ("_pytest.reports", "BaseReport.failed"),
    ("_pytest.reports", "BaseReport.skipped"),
    ("_pytest.python", "pytest_pyfunc_call"), ("_pytest.python", "Function.runtest"),
    ("_pytest.python", "Function.setup"), ("_pytest.python", "Function._getobj"),
    ("_pytest.python", "PyobjMixin.obj"), ("_pytest.nodes", "Item.runtest"),
    ("_pytest.main", "pytest_runtestloop"), ("_pytest.main", "wrap_session"),
    ("_pytest.skipping", "pytest_runtest_makereport"), ("_pytest.skipping", "pytest_report_teststatus"),
    ("_pytest.skipping", "pytest_runtest_call"), ("_pytest.skipping", "pytest_runtest_setup"),
    ("_pytest.outcomes", "fail"), ("_pytest.outcomes", "skip"), ("_pytest.outcomes", "xfail"),
    ("_pytest.outcomes", "exit"), ("_pytest.outcomes", "OutcomeException.__init__"),
    ("_pytest.terminal", "TerminalReporter.pytest_runtest_logreport"),
    ("_pytest.terminal", "TerminalReporter.short_test_summary"),
    ("_pytest.terminal", "TerminalReporter.summary_passes"), ("_pytest.terminal", "TerminalReporter.summary_failures"),
    ("_pytest.terminal", "TerminalReporter.summary_errors"), ("_pytest.terminal", "TerminalReporter.summary_stats"),
    ("_pytest.terminal", "TerminalReporter.build_summary_stats_line"),
    ("_pytest.terminal", "TerminalReporter.pytest_sessionfinish"), ("_pytest.terminal", "pytest_report_teststatus"),
    ("_pytest.terminal", "_get_line_with_reprcrash_message"),
    ("_pytest.assertion.rewrite", "AssertionRewritingHook.exec_module"),
    ("_pytest.assertion.rewrite", "AssertionRewritingHook.find_spec"),
    ("_pytest.assertion.rewrite", "rewrite_asserts"), ("_pytest.assertion.rewrite", "AssertionRewriter.run"),
    ("_pytest.assertion.rewrite", "AssertionRewriter.visit_Assert"),
    ("_pytest.config", "PytestPluginManager.register"),
    ("pluggy._hooks", "HookCaller.__call__"), ("pluggy._hooks", "_HookCaller.__call__"),
    ("pluggy._callers", "_multicall"), ("pluggy._manager", "PluginManager._hookexec"),
    ("pluggy._manager", "PluginManager.register"),
    ("builtins", "__import__"), ("builtins", "compile"), ("builtins", "exec"),
    ("json", "dumps"), ("hmac", "new"), ("hmac", "HMAC.hexdigest"), ("os", "write"), ("os", "close"),
    ("_io", "FileIO.write"),
)
#: The hooks whose implementations (which plugin, which function) must not change during the run.
WATCHED_HOOKS = (
    "pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown",
    "pytest_runtest_makereport", "pytest_runtest_logreport", "pytest_pyfunc_call", "pytest_report_teststatus",
    "pytest_terminal_summary", "pytest_sessionfinish", "pytest_runtestloop", "pytest_assertrepr_compare",
    "pytest_runtest_logfinish", "pytest_collection_modifyitems",
)
_ABSENT = object()


def _resolve(module_name, dotted):
    value = sys.modules.get(module_name, _ABSENT)
    for name in dotted.split("."):
        if value is _ABSENT:
            return _ABSENT
        value = getattr(value, name, _ABSENT) if not isinstance(value, type) else value.__dict__.get(name, _ABSENT)
    return value


def _fingerprint(value):
    """What must stay the same about `value`: the object, and its code and closure when it has them."""
    function = getattr(value, "__func__", value)
    closure = getattr(function, "__closure__", None) or ()
    cells = []
    for cell in closure:
        try:
            cells.append(id(cell.cell_contents))
        except ValueError:  # an empty cell
            cells.append(None)
    return (id(value), id(getattr(function, "__code__", None)), id(getattr(function, "__defaults__", None)), tuple(cells))


def _machinery():
    found = {f"{module}.{name}": _fingerprint(_resolve(module, name)) for module, name in WATCHED}
    rewrite_hook = _resolve("_pytest.assertion.rewrite", "AssertionRewritingHook")
    # Libraries append finders (six does): only what comes before the baseline's last finder counts,
    # as a finder appended after it sees no module an earlier one finds.
    finders = tuple(id(finder) for finder in sys.meta_path if type(finder) is not rewrite_hook)
    found["sys.meta_path"] = finders[: _state.get("finders", len(finders))]
    found["sys.path_hooks"] = tuple(map(id, sys.path_hooks))[: _state.get("path_hooks", len(sys.path_hooks))]
    found["sys.gettrace()"] = id(sys.gettrace())
    found["sys.getprofile()"] = id(sys.getprofile())
    found["sys.excepthook"] = id(sys.excepthook)
    for name in ("pytest", "_pytest.runner", "_pytest.reports", "_pytest.python", "_pytest.terminal", "pluggy"):
        found[f"sys.modules[{name!r}]"] = id(sys.modules.get(name))
    for name, function in _OWN.items():
        found[f"results plugin {name}"] = _fingerprint(function)
        found[f"results plugin global {name}"] = id(globals().get(name))
    found["results plugin channel"] = (id(type(_channel)), tuple(sorted(vars(_channel))))
    return found


class _Channel:
    """The results descriptor and the key that signs each record."""

    def __init__(self):
        self.fd, self.key, self.seq = None, b"", 0

    def open(self):
        fd = os.environ.pop("GYMENVS_RESULTS_FD", None)
        key_fd = os.environ.pop("GYMENVS_RESULTS_KEY_FD", None)
        if key_fd is not None:
            try:  # at offset 0: each pytest of a command reads the same key
                self.key = os.pread(int(key_fd), 64, 0)
                os.close(int(key_fd))
            except (OSError, ValueError):
                self.key = b""
        if fd is not None:
            try:
                self.fd = int(fd)
                os.set_inheritable(self.fd, False)  # no child process of the tests gets it
            except (OSError, ValueError):
                self.fd = None

    def write(self, record, _dumps=json.dumps, _write=os.write, _new=hmac.new):
        if self.fd is None:
            return
        self.seq += 1
        body = _dumps({"seq": self.seq, **record}, sort_keys=True)
        mac = _new(self.key, body.encode(), hashlib.sha256).hexdigest()
        try:
            _write(self.fd, (_dumps({"body": body, "mac": mac}) + "\n").encode())
        except OSError:
            pass


_channel = _Channel()
_channel.open()
_write = _Channel.write  # called as a function: an attribute set on the channel object changes nothing
_state: dict = {"config": None, "baseline": None, "plugins": None, "hooks": None, "terminal": None, "reported": set()}


@pytest.hookimpl(trylast=True)  # after the terminal reporter exists
def pytest_configure(config, _state=_state, _channel=_channel, _write=_write):
    if _state["config"] is not None:  # a session inside the tests (pytester): not the one graded
        config.pluginmanager.unregister(sys.modules[__name__])
        return
    _state["config"] = config
    if hasattr(config, "workerinput"):  # an xdist worker: its controller reports
        _channel.fd = None
        return
    _write(_channel, {"event": "start"})
    manager = config.pluginmanager
    _state["plugins"] = {id(plugin): manager.get_name(plugin) for plugin in manager.get_plugins()}
    _state["hooks"] = _hook_impls(manager)
    terminal = manager.get_plugin("terminalreporter")
    _state["terminal"] = (id(terminal), _instance_callables(terminal))


def pytest_collection_finish(session, _state=_state):
    """Collection (which imports the package under test) is over: what pytest itself added since
    configure (conftest modules, its own objects) joins the baseline, anything else is a change."""
    manager = session.config.pluginmanager
    plugins = {id(plugin): plugin for plugin in manager.get_plugins()}
    strangers = [manager.get_name(plugin) for key, plugin in plugins.items()
                 if key not in _state["plugins"] and not _pytest_own(plugin)]
    hooks = _hook_impls(manager)
    lost = [name for name, impls in _state["hooks"].items() if not set(impls) <= set(hooks.get(name, ()))]
    _state["plugins"] = {key: manager.get_name(plugin) for key, plugin in plugins.items()
                         if manager.get_name(plugin) not in strangers}
    _state["hooks"] = {name: tuple(i for i in impls if i[0] not in strangers) for name, impls in hooks.items()}
    _state["check"]("after collection", [f"plugin registered: {name}" for name in strangers]
                    + [f"hook implementations of {name}" for name in lost])


def pytest_runtest_logreport(report, _state=_state, _channel=_channel, _write=_write):
    config = _state["config"]
    if config is None:
        return
    nodeid = config.cwd_relative_nodeid(report.nodeid)  # as the -rA summary names it
    _write(_channel, {"nodeid": nodeid, "when": report.when, "outcome": report.outcome, "xfail": hasattr(report, "wasxfail")})
    if report.when == "teardown":
        _state["check"](nodeid)


def pytest_sessionfinish(session, exitstatus, _state=_state, _channel=_channel, _write=_write):
    _state["check"]("end of session")
    _write(_channel, {"event": "finish", "exitstatus": int(exitstatus)})


def pytest_unconfigure(config, _state=_state):
    _state["check"]("unconfigure")


def _check(when, found=(), _state=_state, _channel=_channel, _write=_write):
    """Write a tampered record for each change since the baseline (and each of `found`) not reported yet."""
    changes = list(found) + [name for name, value in _state["machinery"]().items() if _state["baseline"].get(name) != value]
    config = _state["config"]
    if config is not None and _state["plugins"] is not None:
        manager = config.pluginmanager
        now = {id(plugin): manager.get_name(plugin) for plugin in manager.get_plugins()}
        changes += [f"plugin registered: {now[key]}" for key in now.keys() - _state["plugins"].keys()]
        changes += [f"plugin unregistered: {_state['plugins'][key]}" for key in _state["plugins"].keys() - now.keys()]
        hooks = _hook_impls(manager)
        changes += [f"hook implementations of {name}" for name in WATCHED_HOOKS if hooks.get(name) != _state["hooks"].get(name)]
        terminal = manager.get_plugin("terminalreporter")
        if (id(terminal), _instance_callables(terminal)) != _state["terminal"]:
            changes.append("the terminal reporter (replaced, or a method patched on it)")
    new = [change for change in changes if change not in _state["reported"]]
    if new:
        _state["reported"].update(new)
        _write(_channel, {"event": "tampered", "when": when, "changes": new})


def _pytest_own(plugin):
    """A conftest module, or one of pytest's own objects, that pytest registers during collection."""
    name = getattr(plugin, "__file__", None) or ""
    module = getattr(plugin, "__name__", None) if hasattr(plugin, "__file__") else type(plugin).__module__
    return os.path.basename(name) == "conftest.py" or (module or "").split(".")[0] in ("_pytest", "pytest")


def _hook_impls(manager):
    impls = {}
    for name in WATCHED_HOOKS:
        caller = getattr(manager.hook, name, None)
        if caller is not None:
            impls[name] = tuple((impl.plugin_name, _fingerprint(impl.function), impl.hookwrapper)
                                for impl in caller.get_hookimpls())
    return impls


def _instance_callables(obj):
    return tuple(sorted((name, _fingerprint(value)) for name, value in vars(obj).items() if callable(value))) if obj else ()


_OWN = {function.__name__: function for function in (
    pytest_configure, pytest_collection_finish, pytest_runtest_logreport, pytest_sessionfinish, pytest_unconfigure,
    _check, _machinery, _hook_impls, _pytest_own, _instance_callables, _fingerprint, _resolve, _Channel.write)}
_state.update(check=_check, machinery=_machinery)
_state["baseline"] = _machinery()
_state.update(finders=len(_state["baseline"]["sys.meta_path"]), path_hooks=len(_state["baseline"]["sys.path_hooks"]))
_ = builtins  # the import keeps `builtins` loaded for the watch list
