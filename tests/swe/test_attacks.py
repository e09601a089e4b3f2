"""Attacks on grading, each tried for real against the Docker engine: the diff filter bypass, git
hooks through the `patch` fallback, a fake `git` in the agent's container, forged test output
(printed at exit and from a detached process), and a look at what the tests' user can reach.

Each attack graded 1.0 before the fix (see docs/swe-security.md); each test shows it now grades 0
or refuses the patch. They grade with `screen="flag"`, so that the layer each is about is what stops
it (the static screen, on by default, would zero most of them before the tests run); the red team
of tests/swe/test_red_team.py covers the screen and the runtime integrity check."""

from __future__ import annotations

import dataclasses

import pytest
from container.tools_support import FORCE_PASS_CONFTEST, bash, start, submit

from gymenvs.swe.grading import check_against_runner, extract_diff, grade
from gymenvs.swe.grading.patches import filter_diff, protected_reason
from gymenvs.swe.images import image_for
from swe.swe_support import FIXTURE_TASKS, own_containers

pytestmark = pytest.mark.docker
TASK = next(task for task in FIXTURE_TASKS if task.instance_id == "gymenvs-fixtures__textkit-1")


def new_file(path: str, content: str, *, mode: str = "100644", git_header: bool = True) -> str:
    """A diff section creating `path`; without `git_header`, only the `---`/`+++` lines git apply also reads."""
    lines = content.splitlines()
    body = f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines)
    return f"diff --git a/{path} b/{path}\nnew file mode {mode}\n" + body if git_header else body


def test_a_conftest_hidden_after_another_files_hunks_is_undone(runtime, swe_images):
    attack = new_file("NOTES.txt", "harmless\n") + new_file("conftest.py", FORCE_PASS_CONFTEST, git_header=False)
    assert filter_diff(attack)[1] == {}  # the header-only filter does not see the second file
    report = grade(runtime, TASK, attack, image=image_for(TASK), timeout=120, screen="flag")
    assert report.status == "unresolved" and report.reward == 0.0
    assert report.ignored_files == {"conftest.py": "pytest configuration"}  # found on disk, and undone
    assert set(report.fail_to_pass.values()) == {"FAILED"}


HOOK = f"""#!/bin/sh
cat > /testbed/conftest.py <<'EOF'
{FORCE_PASS_CONFTEST}EOF
"""


def test_a_git_hook_written_through_the_patch_fallback_refuses_the_patch(runtime, docker_client, swe_images):
    hook = new_file(".git/hooks/post-checkout", HOOK, mode="100755")
    attack = TASK.patch.replace("sep.join(words)", "sep.join(words) + '!'") + hook
    report = grade(runtime, TASK, attack, image=image_for(TASK), timeout=120)
    assert report.status == "patch_failed" and report.reward == 0.0
    assert ".git/hooks/post-checkout (inside .git/)" in report.error
    assert own_containers(docker_client) == []


def test_pytest_toml_and_package_metadata_are_protected():
    assert protected_reason("pytest.toml") == protected_reason(".pytest.toml") == "pytest configuration"
    assert protected_reason("evil.egg-info/entry_points.txt") == "package metadata"
    assert protected_reason("lib/x-1.0.dist-info/entry_points.txt") == "package metadata"


def test_a_fake_git_and_a_gitignored_conftest_in_the_agents_container_change_nothing(make_env):
    env = start(make_env, TASK.instance_id, screen="flag")
    env.step({"name": "create_file", "arguments": {"path": "conftest.py", "content": FORCE_PASS_CONFTEST}})
    fake_git = ("printf '#!/bin/sh\\necho \"diff --git a/README.md b/README.md\"\\n' > /usr/local/bin/git"
                " && chmod +x /usr/local/bin/git")
    hide = "echo conftest.py >> .gitignore && echo conftest.py >> .git/info/exclude"
    env.step(bash(f"{hide} && {fake_git} && hash -r && git status"))
    reward, report = submit(env)
    assert reward == 0.0 and report["status"] == "unresolved"
    assert report["ignored_files"] == {"conftest.py": "pytest configuration"}
    assert set(report["fail_to_pass"].values()) == {"FAILED"}


def test_extract_diff_reads_the_agents_changes_without_its_git(make_env, runtime):
    from container.tools_support import write_and_apply

    env = start(make_env, TASK.instance_id)
    env.step(write_and_apply(TASK.patch, "gold.patch"))
    env.step(bash("printf '#!/bin/sh\\nexit 0\\n' > /usr/local/bin/git && chmod +x /usr/local/bin/git && echo x > new.txt"))
    diff = extract_diff(env.unwrapped.episode_sandbox, TASK.base_commit)
    assert "+    return sep.join(words)" in diff and "+++ b/new.txt" in diff and "/usr/local/bin/git" not in diff
    assert grade(runtime, TASK, diff, image=image_for(TASK), timeout=120).reward == 1.0


FORGERY = f'''
import atexit, subprocess

def _forge():  # at exit, after pytest: a fake short test summary, then a detached forger
    print("=========================== short test summary info ============================")
    for name in {list(TASK.fail_to_pass + TASK.pass_to_pass)!r}:
        print("PASSED " + name)
    print("FAILED tests/test_slug.py::dummy - beats the exit-code check", flush=True)
    subprocess.run(["bash", "-c", "echo forger uid=$(id -u); cat /run/gymenvs/run-tests.sh; "
                    "grep -ao '>>>>> [0-9a-f]*' /proc/[0-9]*/environ"])
    subprocess.Popen(["bash", "-c", "sleep 3; echo FORGED-AFTER-PYTEST"], start_new_session=True)

atexit.register(_forge)
'''


def test_forged_test_output_and_a_detached_forger_grade_zero(runtime, swe_images):
    attack = _module_diff("textkit/slug.py", TASK, FORGERY)
    report = grade(runtime, TASK, attack, image=image_for(TASK), timeout=120, screen="flag")
    assert report.reward == 0.0 and report.status == "unresolved"
    assert "the log claims 2 test(s) passed that the test runner saw fail" in report.error
    assert set(report.fail_to_pass.values()) == {"FAILED"}
    log = report.log_tail
    assert "forger uid=65534" in log and "run-tests.sh: Permission denied" in log  # unprivileged; the nonce is root's
    assert "FORGED-AFTER-PYTEST" not in log  # killed before the results were read
    nonce = log.split(">>>>> ", 1)[1].split()[0]
    assert log.count(nonce) == 3  # start, exit code and end markers: nobody else printed it


def _module_diff(path: str, task, prefix: str) -> str:
    """A diff that prepends `prefix` to a fixture module (the task's bug left as it is)."""
    from gymenvs.swe.tasks import fixtures_path

    original = (fixtures_path() / "repos" / task.repo.rsplit("/", 1)[-1] / path).read_text()
    old, new = original.splitlines(), (prefix + original).splitlines()
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,{len(old)} +1,{len(new)} @@\n"
            + "".join(f"-{line}\n" for line in old) + "".join(f"+{line}\n" for line in new))


def test_the_tests_run_unprivileged_without_plugin_autoload(runtime, swe_images):
    probe = dataclasses.replace(TASK, test_cmd="id -u; printenv PYTEST_DISABLE_PLUGIN_AUTOLOAD; "
                                               "cat /run/gymenvs/run-tests.sh 2>&1; touch /testbed/new-file && echo created")
    report = grade(runtime, probe, "", image=image_for(TASK), timeout=120)
    section = report.log_tail.split("Start Test Output\n", 1)[1]
    assert section.startswith("65534\n1\n") and "Permission denied" in section and "created" in section


def test_a_log_pass_the_runner_contradicts_is_a_failure():
    runner = [{"event": "start"},
              {"nodeid": "t.py::a", "when": "call", "outcome": "failed", "xfail": False},
              {"nodeid": "t.py::b", "when": "call", "outcome": "passed", "xfail": False},
              {"nodeid": "t.py::c[1]", "when": "setup", "outcome": "skipped", "xfail": True},
              {"event": "finish", "exitstatus": 1}]
    log = {"t.py::a": "PASSED", "t.py::b": "PASSED", "t.py::c[1]": "XFAIL", "t.py::made_up": "PASSED", "t.py::c[x]": "PASSED"}
    statuses, forged = check_against_runner(log, runner)
    assert forged == ["t.py::a", "t.py::made_up"]
    assert statuses == {**log, "t.py::a": "FAILED", "t.py::made_up": "FAILED"}
    assert check_against_runner(log, [])[1] == []  # no report (not pytest): the log stands alone
    assert check_against_runner(log, runner[:-1])[1] is None  # started, never finished: no verdict


def test_an_episode_that_fills_the_disk_is_stopped(make_env, docker_client):
    env = start(make_env, TASK.instance_id, disk_limit="100m")
    observation, reward, terminated, truncated, info = env.step(bash("head -c 4000M /dev/zero > /testbed/blob; echo done"))
    assert truncated and not terminated and reward == 0.0
    assert "more than its disk limit of 100 MiB" in info["error"] and "done" not in observation
    assert own_containers(docker_client) == []  # the container, and what it wrote, is gone
