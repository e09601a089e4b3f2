"""Host-side grading of an agent's changes, as the SWE-bench harness resolves an instance.

One job per module: `grading` (a fresh container, the changes, the tests, the verdict), `specs` (how
a task's tests run), `logparsers`, `report` (the harness's verdict on a log), `patches` (which paths
of a diff are protected), `changes` (what the engine says changed, copied across), `results_plugin`
(the pytest plugin copied into the grading container) and `evaluate` (a file of predictions graded
into the harness's report layout).
"""

from gymenvs.swe.grading.grading import (
    TEST_ENVIRONMENT,
    TEST_USER,
    FreshGradingContainer,
    GradeReport,
    check_against_runner,
    eval_script,
    extract_diff,
    grade,
    grade_sandbox,
    plugin_module,
    start_grading_container,
)

__all__ = [
    "TEST_ENVIRONMENT", "TEST_USER", "FreshGradingContainer", "GradeReport", "check_against_runner", "eval_script",
    "extract_diff", "grade", "grade_sandbox", "plugin_module", "start_grading_container",
]
