"""MiniWoB++: web tasks (click a button, fill a form, log in, ...) in a real headless Chromium.

The tasks are the HTML pages that Farama's `miniwob` package ships, opened from `file://` URLs
(no server). Its `SeleniumInstance` starts the episodes (seeding, start) and its JavaScript core
(`core.getDOMInfo`, `core.elementClick`, the reward globals) is what a step reads and clicks, in one
round trip per read. It drives a `Browser` of ours: Debian's Chromium, kept off the network,
reaped when its owner dies.
"""

from __future__ import annotations

import shutil
import weakref
from functools import cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import PositiveFloat, PositiveInt

from gymenvs.core import ActionError, Outcome, TextEnv, tool, validate_config
from gymenvs.core.images import IMAGE_KEY, TEXT_KEY, content_blocks, text_image_space
from gymenvs.envs.browser import Browser
from gymenvs.envs.optional import require

#: JavaScript timers take at most 2**31 - 1 ms; that long is "no time limit" for a MiniWoB episode.
NO_TIME_LIMIT_MS = 2**31 - 1
SCROLL_PIXELS = 100
#: One round trip to the browser for what a step reads: MiniWoB's episode state and, while the
#: episode runs, the instruction and the DOM (miniwob's own reads take one round trip each).
READ_PAGE = """
var page = {done: WOB_DONE_GLOBAL, env_reward: WOB_REWARD_GLOBAL, raw_reward: WOB_RAW_REWARD_GLOBAL, reason: WOB_REWARD_REASON};
if (!page.done) { page.utterance = core.getUtterance(); page.dom = core.getDOMInfo(); }
return page;
"""
_SPECIAL_KEYS_HELP = (
    "a character, or <Enter>, <Tab>, <Backspace>, <Escape>, <ArrowUp>, ... with optional C-, S-, A-, M- modifiers (e.g. C-a)"
)


def _miniwob():
    require("miniwob.selenium_instance", extra="miniwob", needed_by="gymenvs/MiniWoB-v0")
    return require("miniwob", extra="miniwob", needed_by="gymenvs/MiniWoB-v0")


@cache
def miniwob_tasks() -> tuple[str, ...]:
    """The MiniWoB++ task names the installed `miniwob` package ships (its `html/miniwob/*.html`)."""
    html = Path(_miniwob().__file__).parent / "html" / "miniwob"
    return tuple(sorted(page.stem for page in html.glob("*.html")))


class MiniWoBEnv(TextEnv):
    """MiniWoB-v0. The observation is the task's instruction and a list of the page's elements, each
    with the id the tools take (`[7] button "Submit"`); with `observation="screenshot+text"` it is
    `{"text": ..., "image": 210x160 RGB screenshot}` and `info["content"]` holds both as chat content
    blocks. Tools: `click(element)`, `type(element, text)`, `press(key)`, `scroll(direction, element)`.
    The reward is MiniWoB's own, when the task ends it (1 solved, -1 failed, partial credit on some
    tasks). A bad element id or key is an observation with `info["error"]`. Free text is not understood.

    Args:
        task: a MiniWoB++ task, e.g. "click-button", "enter-text", "click-checkboxes", "login-user".
        observation: "text", or "screenshot+text" to add a screenshot of the task area.
        time_limit_s: MiniWoB's own wall-clock limit per episode, with its time-scaled reward (None:
            no clock, the reward is MiniWoB's raw reward, the episode ends at the turn limit).
        data_mode: "train" or "test" (a few tasks draw different data for each).
        chromium, chromedriver: Debian's Chromium and its driver.
        max_turns: actions allowed per episode (invalid ones included).
        render_mode: None or "ansi".
    """

    thread_affine = True  # one browser per slot, driven from the thread that started it

    default_max_turns = 20

    @validate_config
    def __init__(
        self,
        *,
        task: str = "click-button",
        observation: Literal["text", "screenshot+text"] = "text",
        time_limit_s: PositiveFloat | None = None,
        data_mode: Literal["train", "test"] = "train",
        chromium: str = "/usr/bin/chromium",
        chromedriver: str = "/usr/bin/chromedriver",
        max_turns: PositiveInt | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        if task not in miniwob_tasks():
            raise ValueError(f"task={task!r} is not a MiniWoB++ task; allowed: {', '.join(miniwob_tasks())}")
        self.task = task
        self.observation_mode = observation
        self.time_limit_s = time_limit_s
        instance = _miniwob().selenium_instance.SeleniumInstance(index=0, subdomain=task, headless=True, data_mode=data_mode)
        self._instance = instance
        if observation == "screenshot+text":
            self.observation_space = text_image_space(  # type: ignore[assignment]  # TextEnv declares text
                self.max_observation_length, (instance.task_height, instance.task_width)
            )
        self._browser = Browser(
            chromium=shutil.which(chromium) or chromium,
            chromedriver=shutil.which(chromedriver) or chromedriver,
            viewport=(instance.window_width, instance.window_height),
        )
        self._closer = weakref.finalize(self, self._browser.close)
        try:
            self._open_task_page()
        except BaseException:
            self.close()
            raise
        self._utterance = ""
        self._elements: dict[int, str] = {}
        self._screenshot = None

    def _open_task_page(self) -> None:
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions
        from selenium.webdriver.support.wait import WebDriverWait

        driver = self._instance.driver = self._browser.driver
        try:
            driver.get(self._instance.url)
        except TimeoutException:  # a renderer starved of CPU (many browsers starting at once): once more
            driver.get(self._instance.url)
        WebDriverWait(driver, 60).until(expected_conditions.presence_of_element_located((By.ID, self._instance.SYNC_SCREEN_ID)))
        inner_size = driver.execute_script("return [window.innerWidth, window.innerHeight];")
        self._instance.inner_width, self._instance.inner_height = inner_size

    # -- episodes ------------------------------------------------------------------------

    def _start_episode(self, options: dict[str, Any]) -> str:
        instance = self._instance
        time_limit_ms = NO_TIME_LIMIT_MS if self.time_limit_s is None else int(self.time_limit_s * 1000)
        instance.force_stop()
        instance.driver.execute_script(f"core.EPISODE_MAX_TIME = {time_limit_ms};")
        instance.begin_task(seed=int(self.np_random.integers(2**31)))
        return self._page_text()

    @tool
    def click(self, element: int) -> Outcome:
        """Click an element of the page.

        Args:
            element: The element's id, the number in brackets in the page listing.
        """
        return self._in_browser(lambda: self._click(element))

    @tool
    def type(self, element: int, text: str) -> Outcome:
        """Click an input field, then type text into it.

        Args:
            element: The input field's id, the number in brackets in the page listing.
            text: The text to type.
        """
        from miniwob.selenium_actions import execute_type_text

        def click_and_type() -> None:
            self._click(element)
            execute_type_text(text, self._instance.driver)

        return self._in_browser(click_and_type)

    @tool
    def press(self, key: str) -> Outcome:
        """Press a key or a key combination on the focused element.

        Args:
            key: A character, or a special key such as <Enter>, <Tab>, <Backspace>, <ArrowDown>, optionally with
                modifiers C- (Control), S- (Shift), A- (Alt), M- (Meta), e.g. C-a.
        """
        from miniwob.selenium_actions import execute_press_key

        return self._in_browser(lambda: execute_press_key(_checked_key(key), self._instance.driver))

    @tool
    def scroll(self, direction: Literal["up", "down"], element: int | None = None) -> Outcome:
        """Scroll the page, or a scrollable element, with the mouse wheel.

        Args:
            direction: Which way to scroll.
            element: The id of the element to scroll (default: the task area).
        """
        from miniwob.selenium_actions import execute_scroll_coords

        def wheel() -> None:
            left, top = self._center(element)
            amount = SCROLL_PIXELS if direction == "down" else -SCROLL_PIXELS
            execute_scroll_coords(left, top, amount, 0, self._instance.driver)

        return self._in_browser(wheel)

    # -- acting and observing ------------------------------------------------------------

    def _in_browser(self, action) -> Outcome:
        if self.time_limit_s is None or not self._episode_done():  # with a clock, the task may have ended meanwhile
            action()
        page = self._instance.driver.execute_script(READ_PAGE)
        if not page["done"]:
            return Outcome(self._page_text(page))
        reward = float(page["env_reward"] if self.time_limit_s is not None else page["raw_reward"])
        reason = page.get("reason")
        if self._screenshot is not None:  # the page shows MiniWoB's start cover now: a blank image
            self._screenshot = np.zeros_like(self._screenshot)
        text = f"Task: {self._utterance}\nThe episode is over: reward {reward:g}" + (f" ({reason})." if reason else ".")
        info = {"raw_reward": float(page["raw_reward"]), "reason": None if reason is None else str(reason)}
        return Outcome(text, reward=reward, terminated=True, info=info)

    def _episode_done(self) -> bool:
        return bool(self._instance.get_metadata()["done"])

    def _click(self, element: int) -> None:
        self._check_element(element)
        result = self._instance.driver.execute_script(f"return core.elementClick({int(element)});")
        if result is not True:
            raise ActionError(f"clicking element {element} failed: {result}")

    def _center(self, element: int | None) -> tuple[float, float]:
        if element is None:
            return self._instance.task_width / 2, self._instance.task_height / 2
        self._check_element(element)
        box = self._instance.driver.execute_script(
            f"var r = core.previousDOMInfo[{int(element)}].getBoundingClientRect(); "
            "return [r.left + r.width / 2, r.top + r.height / 2];"
        )
        return float(box[0]), float(box[1])

    def _check_element(self, element: int) -> None:
        if element not in self._elements:
            known = ", ".join(map(str, sorted(self._elements)))
            raise ActionError(f"there is no element {element} on the page; the element ids are: {known}")

    def _page_text(self, page: dict[str, Any] | None = None) -> str:
        """The instruction and the element list, from `READ_PAGE`'s result (read now if not given)."""
        from miniwob.dom import DOMElement
        from miniwob.observation import serialize_dom_element
        from miniwob.screenshot import get_screenshot, pil_to_numpy_array

        page = page or self._instance.driver.execute_script(READ_PAGE)
        utterance = page["utterance"]
        self._utterance = utterance["utterance"] if isinstance(utterance, dict) else str(utterance)
        elements = [serialize_dom_element(element) for element in DOMElement(page["dom"]).subtree_elements]
        lines, self._elements = describe_elements(elements)
        if self.observation_mode == "screenshot+text":
            instance = self._instance
            screenshot = get_screenshot(
                instance.driver, instance.inner_width, instance.inner_height, instance.task_width, instance.task_height
            )
            self._screenshot = pil_to_numpy_array(screenshot)
        return f"Task: {self._utterance}\nPage elements ([id] tag, text, value):\n" + "\n".join(lines)

    def _observation(self, text: str, info: dict[str, Any]) -> Any:
        if self.observation_mode == "text":
            return text
        assert self._screenshot is not None, "_start_episode and every step take a screenshot in this mode"
        observation = {TEXT_KEY: text, IMAGE_KEY: self._screenshot.copy()}  # callers keep observations: never share one
        info["content"] = content_blocks(observation)
        return observation

    # -- the rest of the gymnasium API ---------------------------------------------------

    def close(self) -> None:
        closer = getattr(self, "_closer", None)
        if closer is not None:
            closer()
        super().close()

    def browser_pids(self) -> list[int]:
        """The processes of this env's browser (chromedriver, Chromium and its helpers)."""
        return self._browser.pids()

    def _episode_state(self) -> dict[str, Any]:
        return {"task": self.task, "utterance": self._utterance, "element_ids": sorted(self._elements)}


def describe_elements(elements: list[dict[str, Any]]) -> tuple[list[str], dict[int, str]]:
    """One line per visible element, `[ref] tag#id.class "text" value=...`, and each ref's line.

    A run of text beside other elements (a pseudo-element with a negative ref) is listed without an
    id: it cannot be clicked.
    """
    lines, by_ref = [], {}
    for element in elements:
        ref = int(element["ref"])
        if ref < 0:
            lines.append(f"    {str(element.get('text', ''))!r}")
            continue
        tag = str(element["tag"])
        if element.get("id"):
            tag += f"#{element['id']}"
        classes = element.get("classes")
        if isinstance(classes, str) and classes.strip() and classes != "SVG_CLASS":
            tag += "." + ".".join(classes.split())
        parts = [f"[{ref}] {tag}"]
        text = element.get("text")
        if text:
            parts.append(repr(str(text)))
        value = element.get("value")
        if str(tag).startswith(("input_checkbox", "input_radio")):
            parts.append("(checked)" if value == "True" else "(not checked)")
        elif value:
            parts.append(f"value={value!r}")
        flags = element.get("flags")
        if flags is not None and flags[0]:
            parts.append("(focused)")
        line = " ".join(parts)
        lines.append(line)
        by_ref[ref] = line
    return lines, by_ref


def _checked_key(key: str) -> str:
    from miniwob.constants import WEBDRIVER_MODIFIER_KEYS, WEBDRIVER_SPECIAL_KEYS

    raw = key
    while raw[:2] in WEBDRIVER_MODIFIER_KEYS:
        raw = raw[2:]
    if f"<{raw}>" in WEBDRIVER_SPECIAL_KEYS:  # "Enter" means "<Enter>"
        key, raw = key[: len(key) - len(raw)] + f"<{raw}>", f"<{raw}>"
    if len(raw) != 1 and raw not in WEBDRIVER_SPECIAL_KEYS:
        raise ActionError(f"unknown key {key!r}: a key is {_SPECIAL_KEYS_HELP}")
    return key
