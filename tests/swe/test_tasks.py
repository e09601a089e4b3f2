"""Task loading through `datasets` (local JSON / JSONL / parquet), image names, apt mirrors, env config."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gymenvs.container.images import debian_mirror
from gymenvs.swe.images import check_template, image_for
from gymenvs.swe.tasks import FIXTURES, Task, load_tasks, parse_test_list, task_from_row
from swe.swe_support import FIXTURE_TASKS

ROW = {
    "instance_id": "octo__widgets-12",
    "repo": "octo/widgets",
    "base_commit": "0123456789abcdef0123456789abcdef01234567",
    "patch": "diff --git a/w.py b/w.py\n",
    "test_patch": "diff --git a/tests/test_w.py b/tests/test_w.py\n--- a/tests/test_w.py\n+++ b/tests/test_w.py\n"
                  "diff --git a/tests/data/x.json b/tests/data/x.json\n",
    "problem_statement": "Widgets break.",
    "version": "1.0",
}


def test_the_fixture_tasks_ship_with_the_package_in_swe_gym_shape():
    assert len(FIXTURE_TASKS) >= 3
    for task in FIXTURE_TASKS:
        assert task.fail_to_pass and task.pass_to_pass and task.patch and task.test_patch
        assert not set(task.fail_to_pass) & set(task.pass_to_pass)
        assert task.image == image_for(task) and task.image.startswith("gymenvs/")
        assert all(name.split("::")[0] in task.test_files for name in task.fail_to_pass + task.pass_to_pass)


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_local_files_load_through_datasets_in_both_list_shapes(tmp_path, suffix):
    import datasets

    swe_bench = {**ROW, "FAIL_TO_PASS": json.dumps(["tests/test_w.py::test_a"]), "PASS_TO_PASS": "[]"}
    swe_gym = {**ROW, "instance_id": "octo__widgets-13", "FAIL_TO_PASS": ["tests/test_w.py::test_b"], "PASS_TO_PASS": None}
    path = tmp_path / f"tasks{suffix}"
    if suffix == ".parquet":  # one file holds one column type: SWE-bench's JSON strings here
        datasets.Dataset.from_list([swe_bench]).to_parquet(str(path))
    elif suffix == ".json":
        path.write_text(json.dumps([swe_gym]))
    else:
        path.write_text(json.dumps(swe_bench) + "\n")
    (task,) = load_tasks(str(path))
    row = swe_gym if suffix == ".json" else swe_bench
    assert task.instance_id == row["instance_id"] and task.repo == "octo/widgets" and task.version == "1.0"
    assert task.fail_to_pass == (("tests/test_w.py::test_b",) if suffix == ".json" else ("tests/test_w.py::test_a",))
    assert task.pass_to_pass == ()
    assert task.test_files == ["tests/test_w.py", "tests/data/x.json"]


def test_threads_loading_one_dataset_at_once_read_it_one_at_a_time_and_share_the_tasks(tmp_path, monkeypatch):
    # `datasets.load_dataset` is not thread-safe (two at once broke tqdm's lock): the slots of a thread
    # vector env all load their tasks when they are built, so the cached loader takes a lock.
    from gymenvs.swe.tasks import tasks as module

    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({**ROW, "FAIL_TO_PASS": ["t::a"], "PASS_TO_PASS": []}) + "\n")
    inside, most = [0], [0]
    real_load_rows = module.load_rows

    def counted_load_rows(source, split):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.2)  # long enough for every thread to arrive while one is loading
            return real_load_rows(source, split)
        finally:
            inside[0] -= 1

    monkeypatch.setattr(module, "load_rows", counted_load_rows)
    with ThreadPoolExecutor(4) as pool:
        loaded = list(pool.map(lambda _: load_tasks(str(path)), range(4)))
    assert most[0] == 1
    assert all(tasks is loaded[0] for tasks in loaded)  # loaded once, then from the cache


def test_test_lists_accept_json_strings_lists_and_null():
    assert parse_test_list('["a", "b"]') == ("a", "b")
    assert parse_test_list(["a"]) == ("a",)
    assert parse_test_list(None) == parse_test_list("") == ()
    with pytest.raises(ValueError, match="not a JSON list"):
        parse_test_list("a, b")
    with pytest.raises(ValueError, match="list of test names"):
        parse_test_list(3)


def test_a_row_missing_a_field_is_a_clear_error():
    row = {**ROW, "FAIL_TO_PASS": [], "PASS_TO_PASS": []}
    del row["test_patch"]
    with pytest.raises(ValueError, match=r"instance_id='octo__widgets-12'.*lacks required field\(s\) \['test_patch'\]"):
        task_from_row(row)
    with pytest.raises(ValueError, match="'base_commit' must be a non-empty string"):
        task_from_row({**ROW, "base_commit": " ", "FAIL_TO_PASS": [], "PASS_TO_PASS": []})


def test_bad_sources_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_tasks(str(tmp_path / "nope.jsonl"))
    (tmp_path / "tasks.csv").write_text("x")
    with pytest.raises(ValueError, match="expected a .json, .jsonl, .parquet file"):
        load_tasks(str(tmp_path / "tasks.csv"))
    duplicate = json.dumps({**ROW, "FAIL_TO_PASS": [], "PASS_TO_PASS": []})
    (tmp_path / "twice.jsonl").write_text(duplicate + "\n" + duplicate + "\n")
    with pytest.raises(ValueError, match="twice"):
        load_tasks(str(tmp_path / "twice.jsonl"))


def test_image_names_follow_the_row_the_dataset_convention_or_a_template():
    swe_bench = Task(**{k: ROW[k] for k in ("instance_id", "repo", "base_commit", "test_patch", "problem_statement")},
                     fail_to_pass=(), pass_to_pass=())
    assert image_for(swe_bench) == "swebench/sweb.eval.x86_64.octo_1776_widgets-12:latest"
    swe_gym = Task(**{**swe_bench.__dict__, "instance_id": "Project-MONAI__MONAI-6969", "repo": "Project-MONAI/MONAI"})
    assert image_for(swe_gym) == "xingyaoww/sweb.eval.x86_64.project-monai_s_monai-6969:latest"
    assert image_for(swe_bench, "mirror.local/{swebench_id}:v1") == "mirror.local/octo_1776_widgets-12:v1"
    own = Task(**{**swe_bench.__dict__, "image": "my/image:1"})
    assert image_for(own, "ignored/{instance_id}") == "my/image:1"
    with pytest.raises(ValueError, match="image_template='x/{name}'"):
        check_template("x/{name}")


def test_the_debian_mirror_comes_from_the_machines_apt_sources(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# a comment\nURIs: http://mirror.example.invalid/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb deb-src\nURIs: http://mirror.example.invalid/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n")
    assert debian_mirror("bookworm", tmp_path) == "http://mirror.example.invalid/debian"
    (tmp_path / "sources.list.d" / "debian.sources").unlink()
    (tmp_path / "sources.list").write_text("deb [arch=amd64 signed-by=/k.gpg] http://old.example.invalid/debian bookworm main\n")
    assert debian_mirror("bookworm", tmp_path) == "http://old.example.invalid/debian"
    with pytest.raises(RuntimeError, match="no apt source for Debian 'trixie'"):
        debian_mirror("trixie", tmp_path)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"instance_ids": ["nope"]}, "instance_ids=\\['nope'\\]"),
    ({"mem_limit": "lots"}, "mem_limit"),
    ({"command_timeout_s": 0}, "command_timeout_s"),
    ({"image_template": "x/{oops}"}, "image_template"),
    ({"dataset": "/nonexistent/tasks.jsonl"}, "does not exist"),
])
def test_bad_env_config_is_a_value_error_at_construction(kwargs, message):
    from gymenvs.container.tools_env import ToolsEnv
    from gymenvs.swe.family import SWEFamily

    with pytest.raises(ValueError, match=message):
        ToolsEnv(SWEFamily, **kwargs)


def test_importing_gymenvs_registers_swe_without_importing_docker_or_datasets():
    code = ("import sys, gymnasium, gymenvs; assert 'gymenvs/SWE-v0' in gymnasium.registry; "
            "print(sorted(m for m in ('docker', 'datasets', 'gymenvs.swe') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_fixture_rows_keep_extra_columns():
    (task,) = [t for t in load_tasks(FIXTURES) if t.instance_id.endswith("textkit-1")]
    assert task.extra["created_at"] and "hints_text" not in task.extra  # known fields are not duplicated


def test_the_fixtures_ship_inside_the_tasks_package():
    from gymenvs.swe.tasks import fixtures_path

    assert fixtures_path().parent.name == "tasks" and (fixtures_path() / "tasks.jsonl").is_file()
    assert len(load_tasks(FIXTURES)) == len(FIXTURE_TASKS)
