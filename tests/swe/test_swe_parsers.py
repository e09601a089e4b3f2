"""Log parsers on real logs (produced here by pytest, unittest and sympy's runner, or recorded from
Django and sympy runs), diff filtering, output capping and shell quoting. No Docker needed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gymenvs.swe.logparsers import parse_django, parse_pytest, parse_sympy
from gymenvs.swe.output import OutputCapture, decode_output
from gymenvs.swe.patches import filter_diff, split_diff
from gymenvs.swe.shell import ansi_c_quote

DATA = Path(__file__).parent / "data"

PYTEST_SUITE = '''
import pytest

def test_passes():
    print("PASSED test_spoof.py::test_fails")  # printed output (shown under -rA) must not count
    print("test_spoof.py::test_fails PASSED")

def test_fails():
    assert 1 == 2

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

def test_errors(broken):
    pass

@pytest.mark.skip(reason="not today")
def test_skipped():
    pass

@pytest.mark.xfail(reason="known bug")
def test_xfails():
    assert False

@pytest.mark.xfail(reason="fixed already")
def test_xpasses():
    pass

@pytest.mark.parametrize("text", ["a - b", "c"])
def test_param(text):
    assert text != "c"
'''


def run(args, cwd, **kwargs):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120, **kwargs)


def test_pytest_rA_log_from_a_real_run(tmp_path):
    (tmp_path / "test_spoof.py").write_text(PYTEST_SUITE)
    result = run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_spoof.py"], tmp_path)
    assert "short test summary info" in result.stdout
    assert parse_pytest(result.stdout) == {
        "test_spoof.py::test_passes": "PASSED",
        "test_spoof.py::test_fails": "FAILED",
        "test_spoof.py::test_errors": "ERROR",
        "test_spoof.py::test_xfails": "XFAIL",
        "test_spoof.py::test_xpasses": "XPASS",
        "test_spoof.py::test_param[a - b]": "PASSED",
        "test_spoof.py::test_param[c]": "FAILED",
    }  # skipped tests appear as "SKIPPED [1] file:line: reason", without a node id


def test_pytest_verbose_progress_lines_add_skipped_tests(tmp_path):
    (tmp_path / "test_spoof.py").write_text(PYTEST_SUITE)
    result = run([sys.executable, "-m", "pytest", "-v", "-rA", "-p", "no:cacheprovider", "test_spoof.py"], tmp_path)
    statuses = parse_pytest(result.stdout)
    assert statuses["test_spoof.py::test_skipped"] == "SKIPPED"
    assert statuses["test_spoof.py::test_passes"] == "PASSED" and statuses["test_spoof.py::test_fails"] == "FAILED"


def test_django_log_recorded_from_runtests():
    assert parse_django((DATA / "django_runtests.log").read_text()) == {
        "test_assignment_from_choice_enum (model_fields.test_charfield.TestCharField)": "PASSED",
        "test_emoji (model_fields.test_charfield.TestCharField)": "PASSED",
        "test_lookup_integer_in_charfield (model_fields.test_charfield.TestCharField)": "FAILED",
        # the docstring line carries the result, as SWE-bench names such tests
        "CharField passes its max_length attribute to form fields created using": "PASSED",
        "test_charfield_raises_error_on_empty_string (model_fields.test_charfield.ValidationTests)": "ERROR",
        "test_choices_validation_supports_named_groups (model_fields.test_charfield.ValidationTests)": "SKIPPED",
        "test_enum_choices_cleans_valid_string (model_fields.test_charfield.ValidationTests)": "XFAIL",
        "test_unicode_repr (forms_tests.tests.test_forms.FormsTestCase)": "PASSED",  # "ok" after interleaved output
        "test_widget_output (forms_tests.tests.test_forms.FormsTestCase)": "FAILED",
    }


def test_django_format_from_a_real_unittest_run(tmp_path):
    """Django's runner is unittest's at verbosity 2: the same lines, written by the real thing."""
    (tmp_path / "test_app.py").write_text(textwrap.dedent('''
        import sys, unittest

        class Case(unittest.TestCase):
            def test_ok(self):
                pass
            def test_fail(self):
                self.assertEqual(1, 2)
            def test_error(self):
                raise RuntimeError("boom")
            @unittest.skip("not today")
            def test_skip(self):
                pass
            def test_noisy(self):
                sys.stderr.write("Internal Server Error: /x/\\n")
    '''))
    result = run([sys.executable, "-m", "unittest", "-v", "test_app"], tmp_path)
    prefix = "test_app.Case."
    statuses = {name.split(" (")[0]: status for name, status in parse_django(result.stderr).items()}
    assert statuses == {"test_ok": "PASSED", "test_fail": "FAILED", "test_error": "ERROR", "test_skip": "SKIPPED",
                        "test_noisy": "PASSED"}
    assert all(prefix.rstrip(".") in name for name in parse_django(result.stderr))


def test_sympy_log_recorded_from_bin_test():
    assert parse_sympy((DATA / "sympy_bin_test.log").read_text()) == {
        "test_bug1": "PASSED", "test_Symbol": "PASSED", "test_arit0": "FAILED", "test_div": "ERROR",
        "test_pow_im": "XFAIL", "test_Mod_is_integer": "SKIPPED",
        "sympy/core/tests/test_arit.py:test_div": "FAILED", "sympy/core/tests/test_arit.py:test_arit0": "FAILED",
    }


def test_sympy_log_from_a_real_sympy_runner(tmp_path):
    pytest.importorskip("sympy")
    (tmp_path / "test_demo.py").write_text(textwrap.dedent('''
        from sympy.testing.pytest import XFAIL, skip

        def test_ok():
            assert 1 + 1 == 2
        def test_fails():
            assert 1 + 1 == 3
        def test_errors():
            raise RuntimeError("boom")
        def test_skipped():
            skip("not today")
        @XFAIL
        def test_expected_failure():
            assert False
    '''))
    code = ("from sympy.testing.runtests import PyTestReporter, SymPyTests\n"
            "tests = SymPyTests(PyTestReporter(verbose=True, colors=False, force_colors=False))\n"
            "tests._root_dir = '.'\ntests._testfiles.append('test_demo.py')\ntests.test()\n")
    result = run([sys.executable, "-c", code], tmp_path)
    statuses = parse_sympy(result.stdout)
    assert {k: v for k, v in statuses.items() if ":" not in k} == {
        "test_ok": "PASSED", "test_fails": "FAILED", "test_errors": "ERROR", "test_skipped": "SKIPPED",
        "test_expected_failure": "XFAIL",
    }


# -- diffs -----------------------------------------------------------------------------------------

def section(path: str, body: str = "@@ -1 +1 @@\n-a\n+b\n") -> str:
    return f"diff --git a/{path} b/{path}\nindex 1..2 100644\n--- a/{path}\n+++ b/{path}\n{body}"


def test_grading_drops_tests_conftest_pytest_config_and_startup_hooks():
    diff = "".join(section(p) for p in [
        "pkg/core.py", "tests/test_core.py", "pkg/tests/helpers.py", "test_top.py", "pkg/core_test.py",
        "conftest.py", "pkg/conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml",
        "sitecustomize.py", "pkg/evil.pth", "pkg/__pycache__/core.cpython-311.pyc", "pkg/testing_utils.py",
        "docs/index.rst",
    ])
    kept, dropped = filter_diff(diff, frozenset({"docs/index.rst"}))
    assert [s.paths for s in split_diff(kept)] == [("pkg/core.py",), ("pkg/testing_utils.py",)]
    assert dropped["conftest.py"] == dropped["pkg/conftest.py"] == dropped["pyproject.toml"] == "pytest configuration"
    assert dropped["tests/test_core.py"] == dropped["pkg/tests/helpers.py"] == dropped["pkg/core_test.py"] == "test file"
    assert dropped["sitecustomize.py"] == dropped["pkg/evil.pth"] == "Python start-up hook"
    assert dropped["docs/index.rst"] == "touched by the task's test patch"
    assert len(dropped) == 14


def test_diff_paths_quoted_renamed_and_content_that_looks_like_a_header():
    quoted = 'diff --git "a/caf\\303\\251 x.py" "b/caf\\303\\251 x.py"\n--- "a/caf\\303\\251 x.py"\n+++ "b/caf\\303\\251 x.py"\n'
    assert split_diff(quoted)[0].paths == ("café x.py",)
    rename = "diff --git a/pkg/old.py b/tests/test_new.py\nsimilarity index 90%\nrename from pkg/old.py\nrename to tests/test_new.py\n"
    assert filter_diff(rename) == ("", {"tests/test_new.py": "test file"})
    sneaky = section("pkg/sql.py", "@@ -1,2 +1 @@\n--- a/conftest.py\n+select 1\n")
    assert filter_diff(sneaky) == (sneaky, {})


# -- output and quoting ----------------------------------------------------------------------------

def test_output_keeps_head_and_tail_within_budget():
    capture = OutputCapture(100)
    for _ in range(10_000):
        capture.feed(b"0123456789" * 100)
    assert capture.total == 10_000_000 and len(capture.raw()) == 100 and capture.elided == 10_000_000 - 100
    assert capture.text().startswith("0123456789" * 5) and "bytes of output elided" in capture.text()
    small = OutputCapture(100)
    small.feed(b"hello\n")
    assert small.text() == "hello\n" and small.elided == 0


def test_decoding_is_safe_for_binary_and_invalid_utf8():
    text = decode_output(b"ok \xff\xfe\x00 \x1b[31mred\x1b[0m\r\nline\rnext \xe2\x82")
    assert text == "ok \ufffd\ufffd\ufffd red\nline\nnext \ufffd"
    text.encode("utf-8")  # always valid Unicode


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=200))
def test_ansi_c_quoting_gives_bash_back_the_exact_text(text):
    result = subprocess.run(["bash", "-c", f"printf %s {ansi_c_quote(text)}"], capture_output=True, timeout=30)
    assert result.stdout.decode("utf-8") == text.replace("\x00", "")
    assert "\n" not in ansi_c_quote(text)
