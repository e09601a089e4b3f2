"""gymenvs/MiniWoB-v0 in Debian's headless Chromium: tasks solved by a policy that reads the page
text, bad ids as observations, screenshots through check_env, and no browser left behind."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import gymenvs  # noqa: F401  (registers the envs)

if not (shutil.which("chromium") and shutil.which("chromedriver")):
    pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/setup installs them)", allow_module_level=True)

from gymenvs.envs import browser  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def envs():
    """One env per task, built once: each owns a browser."""
    built = {}

    def get(task, **kwargs):
        key = (task, tuple(sorted(kwargs.items())))
        if key not in built:
            built[key] = gym.make("gymenvs/MiniWoB-v0", task=task, **kwargs)
        return built[key]

    yield get
    for env in built.values():
        env.close()


# -- a scripted policy that reads the observation ------------------------------------------------


def element_id(observation, pattern):
    """The id of the first element whose line matches `pattern`."""
    for line in observation.splitlines():
        match = re.match(r"\[(\d+)\] (.*)", line)
        if match and re.search(pattern, match.group(2)):
            return int(match.group(1))
    raise AssertionError(f"no element matching {pattern!r} in:\n{observation}")


def instruction(observation):
    return observation.splitlines()[0].removeprefix("Task: ")


def click(element):
    return {"name": "click", "arguments": {"element": element}}


def type_text(element, text):
    return {"name": "type", "arguments": {"element": element, "text": text}}


def solve_click_button(observation):
    label = re.search(r'Click on the "(.*)" button', instruction(observation)).group(1)
    return [click(element_id(observation, rf"^button.* '{re.escape(label)}'$"))]


def solve_enter_text(observation):
    text = re.search(r'Enter "(.*)" into the text field', instruction(observation)).group(1)
    return [type_text(element_id(observation, r"^input_text"), text), click(element_id(observation, r"^button.*'Submit'"))]


def solve_click_checkboxes(observation):
    wanted = re.search(r"Select (.*) and click Submit", instruction(observation)).group(1)
    words = [] if wanted == "nothing" else [word.strip() for word in wanted.split(",")]
    lines = observation.splitlines()
    actions = []
    for index, line in enumerate(lines):  # a checkbox's label text is the line after it
        match = re.match(r"\[(\d+)\] input_checkbox", line)
        if match and lines[index + 1].strip().strip("'") in words:
            actions.append(click(int(match.group(1))))
    return [*actions, click(element_id(observation, r"^button.*'Submit'"))]


def solve_login_user(observation):
    username, password = re.search(r'username "(.*)" and the password "(.*)" into', instruction(observation)).groups()
    return [
        type_text(element_id(observation, r"^input_text#username"), username),
        type_text(element_id(observation, r"^input_password#password"), password),
        click(element_id(observation, r"^button.*'Login'")),
    ]


def solve_focus_text(observation):
    return [click(element_id(observation, r"^input_text"))]


POLICIES = {
    "click-button": solve_click_button,
    "enter-text": solve_enter_text,
    "click-checkboxes": solve_click_checkboxes,
    "login-user": solve_login_user,
    "focus-text": solve_focus_text,
}


@pytest.mark.parametrize("task", POLICIES)
def test_a_scripted_policy_solves_the_task_from_the_page_text(envs, task):
    env = envs(task)
    for seed in (0, 1):
        observation, _ = env.reset(seed=seed)
        for action in POLICIES[task](observation):
            observation, reward, terminated, truncated, info = env.step(action)
        assert terminated and reward == 1.0, observation
        assert "episode is over" in observation and info["raw_reward"] == 1.0


def test_a_wrong_answer_gets_minwobs_negative_reward(envs):
    env = envs("click-button")
    observation, _ = env.reset(seed=0)
    label = re.search(r'Click on the "(.*)" button', instruction(observation)).group(1)
    wrong = element_id(observation, rf"^button.* '(?!{re.escape(label)}')")
    _, reward, terminated, _, _ = env.step(click(wrong))
    assert terminated and reward == -1.0


def test_bad_element_ids_and_keys_are_observations(envs):
    env = envs("enter-text")
    page, _ = env.reset(seed=0)
    for action, message in [
        (click(999), "no element 999"),
        (type_text(-3, "x"), "no element -3"),
        ({"name": "press", "arguments": {"key": "<NoSuchKey>"}}, "unknown key"),
        ({"name": "scroll", "arguments": {"direction": "sideways"}}, "direction"),
        ("click the button", "free text is not understood"),
    ]:
        observation, reward, terminated, truncated, info = env.step(action)
        assert message in info["error"] and info["error"] in observation
        assert not (terminated or truncated) and reward == 0.0
    field = element_id(page, r"^input_text")
    env.step(type_text(field, "ab"))
    env.step({"name": "press", "arguments": {"key": "Backspace"}})  # "Backspace" means "<Backspace>"
    observation, *_ = env.step({"name": "scroll", "arguments": {"direction": "down"}})
    assert re.search(rf"\[{field}\] input_text.* value='a'", observation)


def test_same_seed_same_task(envs):
    env = envs("click-checkboxes")
    assert env.reset(seed=4)[0] == env.reset(seed=4)[0]
    assert len({env.reset(seed=seed)[0] for seed in range(5)}) > 1


def test_screenshot_and_text_observations_pass_check_env(envs):
    env = envs("enter-text", observation="screenshot+text")
    check_env(env.unwrapped, skip_render_check=True)
    observation, info = env.reset(seed=0)
    image = observation["image"]
    assert image.shape == (210, 160, 3) and image.dtype == np.uint8 and image.std() > 0  # a rendered page
    assert observation["text"].startswith("Task: Enter")
    assert [block["type"] for block in info["content"]] == ["image_url", "text"]
    field = element_id(observation["text"], r"^input_text")
    typed, *_ = env.step(type_text(field, "WWWWWWWW"))
    assert (typed["image"] != image).any()  # the screenshot shows the typed text


BUTTON_BOXES = """
return Array.from(document.querySelectorAll('#area button')).map(function (button) {
  var r = button.getBoundingClientRect();
  return [r.left, r.top, r.right, r.bottom, getComputedStyle(button).backgroundColor];
});
"""


def test_the_screenshot_is_the_whole_task_area_pixel_for_pixel(envs):
    """count-shape's answer buttons sit at rows 185 to 206 of the 210-row task area: each button's box,
    read from the DOM, is filled with the button's own background colour in the image."""
    env = envs("count-shape", observation="screenshot+text")
    image = env.reset(seed=0)[0]["image"]
    assert image.shape == (210, 160, 3)
    boxes = env.unwrapped._instance.driver.execute_script(BUTTON_BOXES)
    assert len(boxes) >= 2 and min(box[3] for box in boxes) > 200  # the test needs content in the bottom rows
    for left, top, right, bottom, css_colour in boxes:
        inside = image[round(top) + 3 : round(bottom) - 3, round(left) + 3 : round(right) - 3].reshape(-1, 3)
        colours, counts = np.unique(inside, axis=0, return_counts=True)
        expected = [int(value) for value in re.findall(r"\d+", css_colour)[:3]]
        assert colours[counts.argmax()].tolist() == expected, (left, top, css_colour)
        assert (image[round(top) - 2, round(left) : round(right)] == 255).all()  # white just above the button


@pytest.mark.parametrize("num_envs", [1, 4])
def test_thread_backend_vector_env_one_browser_per_slot(num_envs):
    vector_env = gym.make_vec("gymenvs/MiniWoB-v0", num_envs=num_envs, task="click-button", backend="thread")
    try:
        observations, _ = vector_env.reset(seed=0)
        actions = [solve_click_button(observation)[0] for observation in observations]
        _, rewards, terminated, _, _ = vector_env.step(actions)
        assert terminated.all() and (rewards == 1.0).all()
        browsers = [set(pids) for pids in vector_env.call("browser_pids")]
        assert all(browsers) and len(set.union(*browsers)) == sum(map(len, browsers))  # no browser is shared
    finally:
        vector_env.close()
    assert not running(set.union(*browsers))


# -- no browser left behind -------------------------------------------------------------------


def running(pids):
    import psutil

    alive = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.add(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def wait_until_gone(pids, timeout=15):
    deadline = time.monotonic() + timeout
    while running(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return running(pids)


def test_close_leaves_no_browser_process_or_directory():
    env = gym.make("gymenvs/MiniWoB-v0", task="click-button")
    pids = env.unwrapped.browser_pids()
    directory = env.unwrapped._browser.directory
    assert len(pids) >= 3 and directory.is_dir()  # chromedriver, chromium and its helpers
    env.close()
    env.close()  # idempotent
    assert not running(pids) and not directory.exists()


OWNER = """
import json, sys, time, gymnasium as gym, gymenvs
env = gym.make("gymenvs/MiniWoB-v0", task="click-button")
env.reset(seed=0)
from gymenvs.envs import browser
print(json.dumps({"browser": env.unwrapped.browser_pids(), "guard": browser._guard[1].pid}), flush=True)
time.sleep(600)
"""


def start_owner():
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    return owner, json.loads(owner.stdout.readline())


def test_sigkill_of_the_owner_leaves_no_browser_behind():
    owner, pids = start_owner()
    assert running(pids["browser"])
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    assert not wait_until_gone(pids["browser"] + [pids["guard"]])


def test_the_reaper_removes_browsers_whose_owner_and_guard_were_killed():
    owner, pids = start_owner()
    os.kill(pids["guard"], signal.SIGKILL)
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    time.sleep(0.5)
    assert running(pids["browser"])  # nobody cleaned up ...
    browser.reap_orphans()  # ... until the next browser starts, which runs the reaper
    assert not wait_until_gone(pids["browser"])
    assert not [entry for entry in browser.BROWSER_ROOT.iterdir() if entry.name.startswith(f"{owner.pid}-")]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"task": "no-such-task"}, "not a MiniWoB"),
        ({"observation": "video"}, "observation"),
        ({"chromium": "/nonexistent/chromium"}, "chromium not found"),
    ],
)
def test_bad_config_is_an_error_at_construction(kwargs, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        gym.make("gymenvs/MiniWoB-v0", **kwargs)
