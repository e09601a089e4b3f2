"""`gymenvs view`: a run's rows read from its files, the data and pages the viewer serves, a single-file episode, and
the command. The pages themselves are driven in Chromium by test_viewer_browser.py."""

import json
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from viewer_support import FIXTURES, SWE, add_other_producers

from gymenvs.eval import evaluate_policy
from gymenvs.eval.policies import make_policy
from gymenvs.trajectories.viewer import Run, ViewerServer, standalone_html
from gymenvs.trajectories.viewer.pages import DATA_ELEMENT, asset


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """A run of several producers: Wordle episodes of a random policy, Echo episodes, a real SWE-v0 episode, a Harbor
    trial's trajectory (with its result.json beside it, which is not a trajectory)."""
    folder = tmp_path_factory.mktemp("run")
    evaluate_policy("gymenvs/Wordle-v0", make_policy("random", "gymenvs/Wordle-v0"), num_episodes=3,
                    trajectories=folder / "wordle", progress=False)
    evaluate_policy("gymenvs/Echo-v0", make_policy("scripted", "gymenvs/Echo-v0"), num_episodes=2,
                    env_kwargs={"max_turns": 2}, trajectories=folder / "echo", progress=False)
    add_other_producers(folder, trial_result=True)
    return folder


def test_a_run_has_one_row_per_trajectory_and_skips_other_json_saying_why(run_folder):
    run = Run.open(run_folder)
    files = [row["file"] for row in run.rows]
    assert files == ["echo/Echo-v0-seed0.json", "echo/Echo-v0-seed1.json", "harbor/hello-world__abc/agent/trajectory.json",
                     SWE, "wordle/Wordle-v0-seed0.json", "wordle/Wordle-v0-seed1.json", "wordle/Wordle-v0-seed2.json"]
    assert [row["id"] for row in run.rows] == list(range(7))
    assert run.skipped == [{"file": "harbor/hello-world__abc/result.json",
                            "why": "not an ATIF trajectory (no schema_version ATIF-v1.x)"}]
    swe = run.rows[files.index(SWE)]
    assert (swe["task"], swe["env"], swe["reward"], swe["outcome"], swe["end"], swe["turns"]) == (
        "gymenvs-fixtures__textkit-1", "gymenvs/SWE-v0", 1.0, "model", "terminated", 5)
    echo = run.rows[0]
    assert (echo["task"], echo["seed"], echo["reward"], echo["turns"], echo["outcome_reason"]) == (
        "Echo-v0", 0, 2.0, 2, "turn_limit")
    harbor = run.rows[2]  # another producer's: its trial's result.json gives the task, reward and time
    assert (harbor["task"], harbor["reward"], harbor["seconds"], harbor["turns"], harbor["agent"], harbor["outcome"]) == (
        "hello-world", 1.0, 90.5, 2, "terminus-2", None)


def test_a_run_of_one_file_and_a_path_that_does_not_exist(run_folder, tmp_path):
    assert [row["file"] for row in Run.open(run_folder / SWE).rows] == [SWE]
    with pytest.raises(FileNotFoundError, match="does not exist: expected an ATIF trajectory file or a folder of them"):
        Run.open(tmp_path / "nowhere")


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


def test_the_server_answers_the_page_its_assets_and_the_data(run_folder):
    with ViewerServer(Run.open(run_folder)).start() as server:
        assert server.url.startswith("http://127.0.0.1:")
        status, kind, page = get(server.url)
        assert (status, kind) == (200, "text/html; charset=utf-8") and b'src="assets/viewer.js"' in page
        assert get(server.url + "assets/viewer.css")[:2] == (200, "text/css; charset=utf-8")
        status, _, body = get(server.url + "api/run")
        run = json.loads(body)
        assert status == 200 and len(run["episodes"]) == 7 and run["skipped"][0]["file"].endswith("result.json")
        status, _, body = get(server.url + "api/episode/3")
        episode = json.loads(body)
        assert (episode["row"]["file"], episode["previous"], episode["next"]) == (SWE, 2, 4)
        assert episode["trajectory"]["extra"]["gymenvs"]["report"]["log"]  # the whole grading log, for the page
        assert episode["samples"] == []  # an eval episode holds no tokens
        assert get(server.url + "api/episode/7")[0] == 404
        assert get(server.url + "api/episode/x")[0] == 404
        assert get(server.url + "../../etc/passwd")[0] == 404
        status, kind, body = get(server.url + "export/3.html")
        assert (status, kind) == (200, "text/html; charset=utf-8") and DATA_ELEMENT.encode() in body


def test_a_broken_file_opened_says_what_is_wrong(tmp_path):
    (tmp_path / "broken.json").write_text(json.dumps({"schema_version": "ATIF-v1.8", "steps": []}))
    with ViewerServer(Run.open(tmp_path)).start() as server:
        status, _, body = get(server.url + "api/episode/0")
    assert status == 422 and "not an ATIF trajectory: missing field(s) agent" in json.loads(body)["error"]


def test_the_page_fetches_nothing_from_the_network():
    for name in ("index.html", "viewer.js", "viewer.css"):
        assert not re.search(r"(https?:)?//[\w.-]+\.\w", asset(name).replace("http://127.0.0.1", "")), name
        assert "@import" not in asset(name)


def test_one_episode_as_a_single_html_file_holds_its_data_inert(run_folder, tmp_path):
    hostile = tmp_path / "run"
    hostile.mkdir()
    data = json.loads((FIXTURES / SWE).read_text())
    data["steps"][0]["message"] = "</script><script>window.pwned = 1</script>"
    (hostile / "episode.json").write_text(json.dumps(data))
    page = standalone_html(Run.open(hostile), 0)
    assert 'src="assets/' not in page and 'href="assets/' not in page  # script and style inlined
    assert page.count("</script>") == 2  # the data element's and the script's own: the message cannot close either
    embedded = re.search(rf'<script type="application/json" id="{DATA_ELEMENT}">(.*?)</script>', page, re.S)[1]
    assert json.loads(embedded)["episodes"]["0"]["trajectory"]["steps"][0]["message"] == data["steps"][0]["message"]


@pytest.mark.slow  # the `gymenvs` command in three processes: about 2 s
def test_the_command_writes_one_episode_as_html_and_refuses_what_it_cannot_open(run_folder, tmp_path):
    command = [sys.executable, "-m", "gymenvs.cli", "view"]
    out = tmp_path / "episode.html"
    done = subprocess.run([*command, str(run_folder), "--html", str(out), "--episode", "3"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == f"{out}: episode 3 ({SWE})\n"
    assert "gymenvs-fixtures__textkit-1" in out.read_text()
    done = subprocess.run([*command, str(run_folder), "--html", str(out), "--episode", "7"], capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (2, f"gymenvs view: --episode 7: {run_folder} holds 7 episodes\n")
    done = subprocess.run([*command, str(tmp_path / "nowhere")], capture_output=True, text=True)
    assert done.returncode == 2 and "does not exist" in done.stderr


def test_a_run_being_written_shows_its_new_episodes_and_keeps_each_episodes_id(run_folder, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    for name in ("b.json", "d.json"):
        shutil.copy(FIXTURES / SWE, folder / name)
    (folder / "c.json").write_text('{"schema_version": "ATIF-v1.8", "steps": [')  # a file being written
    run = Run.open(folder)
    assert [(row["id"], row["file"]) for row in run.rows] == [(0, "b.json"), (1, "d.json")]
    assert run.skipped[0]["file"] == "c.json" and "Expecting value" in run.skipped[0]["why"]

    shutil.copy(FIXTURES / SWE, folder / "c.json")  # written out now
    shutil.copy(FIXTURES / SWE, folder / "a.json")
    (folder / "b.json").unlink()
    run.refresh()
    assert [(row["id"], row["file"]) for row in run.rows] == [(1, "d.json"), (2, "a.json"), (3, "c.json")]
    assert run.skipped == [] and run.neighbours(2)[1:] == (1, 3)
    with pytest.raises(KeyError, match="episode 0: the run has no such episode"):
        run.episode(0)
    with ViewerServer(run).start() as server:
        shutil.copy(FIXTURES / SWE, folder / "e.json")
        assert [row["file"] for row in json.loads(get(server.url + "api/run")[2])["episodes"]][-1] == "e.json"
        assert get(server.url + "api/episode/0")[0] == 404
