"""The viewer's pages in headless Chromium (Debian's, as the browser envs use it): the run page sorts and filters, the
episode page shows a real SWE episode's conversation, diff and grading log, the token page shows each token of a
training sample by who produced it, and a single-file episode works from disk with nothing fetched.

Each test saves a screenshot: into $GYMENVS_SCREENSHOTS when set (docs/images is made this way, see
docs/trajectories.md), else into the test's temporary folder."""

import json
import os
import shutil
from pathlib import Path

import pytest
from viewer_support import FIXTURES, SWE, add_other_producers

from gymenvs.eval import evaluate_policy
from gymenvs.eval.policies import make_policy
from gymenvs.trajectories.viewer import Run, ViewerServer, standalone_html

if not (shutil.which("chromium") and shutil.which("chromedriver")):
    pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/setup installs them)", allow_module_level=True)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tokenizer(_tiny):
    return _tiny[1]


@pytest.fixture(scope="module")
def run_folder(_tiny, tmp_path_factory):
    """Episodes of four producers: an evaluation (Wordle, a random and a scripted policy; Echo), a real SWE-v0 episode,
    a Harbor trial's trajectory, and a training rollout of the tiny model, with its tokens."""
    import torch

    from wrappers.trl import Sampling, TransformersGenerator, make_rollout_func

    folder = tmp_path_factory.mktemp("run")
    for policy, count in (("random", 6), ("scripted", 3)):
        evaluate_policy("gymenvs/Wordle-v0", make_policy(policy, "gymenvs/Wordle-v0"), num_episodes=count, seed=10 * count,
                        trajectories=folder / f"wordle-{policy}", progress=False)
    evaluate_policy("gymenvs/Echo-v0", make_policy("scripted", "gymenvs/Echo-v0"), num_episodes=2,
                    env_kwargs={"max_turns": 2}, trajectories=folder / "echo", progress=False)
    add_other_producers(folder, trial_result=False)

    model, tokenizer = _tiny
    rollout = make_rollout_func("gymenvs/Echo-v0", env_kwargs={"max_turns": 3}, max_tokens_per_turn=8,
                                trajectories=folder / "rollout")
    torch.manual_seed(0)
    generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=1.0))
    rollout.run([[{"role": "user", "content": "Say something."}]], generator, tokenizer, max_completion_length=200)
    rollout.close()
    return folder


@pytest.fixture(scope="module")
def run(run_folder):
    return Run.open(run_folder)


@pytest.fixture(scope="module")
def server(run, tokenizer):
    with ViewerServer(run, decode=lambda ids: tokenizer.batch_decode([[token] for token in ids])).start() as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    from gymenvs.envs.browser import Browser

    browser = Browser(chromium=shutil.which("chromium"), chromedriver=shutil.which("chromedriver"), viewport=(1280, 860))
    yield browser.driver
    browser.close()


@pytest.fixture
def screenshot(browser, tmp_path):
    folder = Path(os.environ.get("GYMENVS_SCREENSHOTS") or tmp_path)

    def save(name: str) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(folder / name))
        return folder / name

    return save


def open_page(driver, url: str, ready: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")
    driver.get(url)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.ready"))
    assert driver.execute_script("return document.body.dataset.ready") == ready, driver.find_element("id", "page").text


def texts(driver, selector: str) -> list[str]:
    return driver.execute_script(f"return [...document.querySelectorAll({json.dumps(selector)})].map(e => e.textContent)")


def choose(driver, select_id: str, value: str) -> None:
    driver.execute_script(f"const s = document.getElementById('{select_id}'); s.value = {json.dumps(value)};"
                          "s.dispatchEvent(new Event('input'))")


def index_of(run, file: str) -> int:
    return next(row["id"] for row in run.rows if row["file"] == file)


def training_index(run) -> int:
    """The rollout's episode (its file is named by the seed the rollout drew)."""
    [row] = [row for row in run.rows if row["file"].startswith("rollout/batch-000001/")]
    return row["id"]


def test_the_run_page_lists_every_episode_and_sorts_and_filters_them(browser, server, run, screenshot):
    open_page(browser, server.url, "run")
    assert len(texts(browser, "#episodes tbody tr")) == len(run.rows) == 14
    assert texts(browser, "#outcomes .chip") == ["model 13", "– 1"]  # the Harbor trial says no outcome
    tasks = {row["task"] for row in run.rows if row["reward"] is not None}
    assert len(texts(browser, "#reward-by-task .bar")) == len(tasks)
    assert sum(int(t.split(": ")[1].split()[0]) for t in texts(browser, "#turns-histogram title")) == len(run.rows)

    browser.find_element("css selector", '#episodes th[data-key="reward"]').click()
    browser.find_element("css selector", '#episodes th[data-key="reward"]').click()  # again: highest first
    rewards = [float(t) for t in texts(browser, "#episodes tbody td:nth-child(4)") if t != "–"]
    assert rewards == sorted(rewards, reverse=True)
    assert rewards[0] == max(row["reward"] for row in run.rows if row["reward"] is not None)

    choose(browser, "show", "failed")
    failed = [row for row in run.rows if row["reward"] is None or row["reward"] <= 0 or row["end"] == "failed"]
    assert len(texts(browser, "#episodes tbody tr")) == len(failed) > 0
    assert set(browser.execute_script("return [...document.querySelectorAll('#episodes tbody tr')].map(r => r.className)")) == {
        "failed"}
    choose(browser, "show", "all")
    choose(browser, "task", "Wordle-v0")
    assert len(texts(browser, "#episodes tbody tr")) == 9
    assert browser.find_element("id", "shown").text == f"9 of {len(run.rows)} shown"
    choose(browser, "task", "")
    screenshot("viewer-run.png")


def test_the_episode_page_shows_the_conversation_the_diff_and_the_grading_log(browser, server, run, screenshot):
    open_page(browser, server.url + f"#/episode/{index_of(run, SWE)}", "episode")
    trajectory = json.loads((FIXTURES / SWE).read_text())
    assert len(texts(browser, ".step")) == len(trajectory["steps"]) == 6
    assert texts(browser, ".call .name") == ["bash", "bash", "grep", "bash", "submit"]
    assert texts(browser, ".step .error") == [f"invalid action: {trajectory['steps'][3]['extra']['error']}"]
    assert "README.md" in texts(browser, ".result pre")[0]
    report = trajectory["extra"]["gymenvs"]["report"]
    assert texts(browser, "#log pre") == [report["log"]]  # the whole log, not its tail
    patch = trajectory["extra"]["gymenvs"]["patch"]
    added = [line for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert texts(browser, "#diff .add") == added
    screenshot("viewer-episode.png")
    browser.execute_script("document.querySelector('#log').open = true; document.getElementById('grading').scrollIntoView()")
    screenshot("viewer-grading.png")


def test_another_producers_trajectory_opens(browser, server, run):
    open_page(browser, server.url + f"#/episode/{index_of(run, 'harbor/hello-world__abc/agent/trajectory.json')}", "episode")
    assert texts(browser, ".call .name") == ["bash_command", "bash_command", "mark_task_complete"]
    assert "terminus-2 2.0.0" in browser.find_element("css selector", ".facts").text


def test_the_token_page_shows_every_token_by_who_produced_it(browser, server, run, tokenizer, screenshot):
    from gymenvs.trajectories.tokens import training_sequences

    index = training_index(run)
    [trained] = training_sequences(run.episode(index))
    open_page(browser, server.url + f"#/episode/{index}", "episode")
    browser.find_element("id", "token-link").click()
    open_page(browser, browser.current_url, "tokens")
    ids = browser.execute_script("return [...document.querySelectorAll('.sample .tok')].map(e => +e.dataset.id)")
    assert ids == trained["prompt_ids"] + trained["completion_ids"]
    masks = browser.execute_script("return [...document.querySelectorAll('.sample .tok[data-mask]')].map(e => +e.dataset.mask)")
    assert masks == trained["env_mask"]  # 1 exactly on the sampled tokens, 0 on the env's
    shown = browser.execute_script("return [...document.querySelectorAll('.sample .tok')].map(e => e.textContent)")
    decoded = tokenizer.batch_decode([[token] for token in ids])
    assert shown == [text.replace("\n", "↵\n").replace("\t", "→\t") for text in decoded]
    policy_titles = browser.execute_script("return [...document.querySelectorAll('.sample .tok.p-policy')].map(e => e.title)")
    sampled = [logprob for logprob, mask in zip(trained["logprobs"], trained["env_mask"]) if mask]
    assert [float(title.split("logprob ")[1].split()[0]) for title in policy_titles] == pytest.approx(sampled, abs=1e-4)
    heads = texts(browser, ".turn-head")
    assert heads[0] == "prompt" and heads[1:] == [f"step {2 + turn} · turn {1 + turn}" for turn in range(3)]
    screenshot("viewer-tokens.png")


def test_one_episode_as_a_single_file_opens_from_disk_and_fetches_nothing(browser, run, tokenizer, tmp_path, screenshot):
    index = training_index(run)
    page = tmp_path / "episode.html"
    page.write_text(standalone_html(run, index, lambda ids: tokenizer.batch_decode([[token] for token in ids])))
    open_page(browser, page.as_uri(), "episode")
    assert len(texts(browser, ".step")) == len(run.episode(index).steps)
    browser.find_element("id", "token-link").click()
    open_page(browser, browser.current_url, "tokens")
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0


def test_text_in_a_trajectory_stays_text(browser, tmp_path):
    data = json.loads((FIXTURES / SWE).read_text())
    data["steps"][1]["message"] = "<img src=x onerror=\"window.pwned = 1\"></script><script>window.pwned = 2</script>"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "hostile.json").write_text(json.dumps(data))
    page = tmp_path / "hostile.html"
    page.write_text(standalone_html(Run.open(tmp_path / "run"), 0))
    open_page(browser, page.as_uri(), "episode")
    assert browser.execute_script("return window.pwned") is None
    assert data["steps"][1]["message"] in texts(browser, ".message")


def test_side_calls_are_marked_and_folded_away(browser, tmp_path):
    from gymenvs.trajectories import TrajectoryRecorder, write_trajectory

    def call(side, reply):  # one call of an agent program, as `info["trajectory"]` keeps it
        return {"request": {"model": "gymenvs-side" if side else "gymenvs-model", "messages": [{"role": "user", "content": "…"}]},
                "response": {"choices": [{"message": {"role": "assistant", "content": reply}}]}, "status": 200,
                "wire": "chat", "side": side, "agent_seconds": 0.5, "policy_seconds": 0.01}

    recorder = TrajectoryRecorder(agent_name="claude-code", agent_version="2.1")
    recorder.add_step("user", "Fix the bug.")
    recorder.add_step("agent", "looking", observation="ls output")
    recorder.add_step("agent", "done", observation="The agent finished.")
    calls = [call("title", "Fixing a bug"), call(None, "looking"), call("count_tokens", "12"), call(None, "done")]
    write_trajectory(recorder.finish(reward=1.0, info={"trajectory": calls}, end="terminated"), tmp_path / "run")
    page = tmp_path / "side.html"
    page.write_text(standalone_html(Run.open(tmp_path / "run"), 0))
    open_page(browser, page.as_uri(), "episode")
    assert texts(browser, ".step .badge.side") == ["side call: title", "side call: count_tokens"]
    assert browser.execute_script("return [...document.querySelectorAll('details.side-call')].map(d => d.open)") == [False, False]
    assert texts(browser, "article.step .message") == ["Fix the bug.", "looking", "done"]
