"""Docs that cannot drift: every figure names the command that gives it, and the quick ones are rerun.

A figure in README.md or docs/*.md is marked with an HTML comment (unseen on the rendered page)
just before the paragraph, list item or table that states it:

    <!-- figure: gymenvs eval gymenvs/Wordle-v0 -n 200 --no-progress | rerun | success rate = 92.0% | mean turns = 4.49 -->
    <!-- figure: examples/benchmarks/vector_throughput.py --slots 64 | not rerun: timings, minutes under load -->

`rerun` marks a quick command whose figures do not depend on the machine (`rerun slow`: one of several
seconds, rerun in the full suite only): this test runs it and compares, for each
`LABEL = VALUE [± TOLERANCE]`, the output line that starts with LABEL with VALUE,
and checks that VALUE is what the text after the marker says. `not rerun: why` lists the slow or
timed ones (a timing cannot be asserted); their scripts must exist. Every section of the docs that
states a measured figure (a time, a rate, a percentage) must name the command it comes from: a
marker, an `examples/` script, a `gymenvs` command or a test.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"<!-- figure: (?P<body>.*?) -->", re.DOTALL)
CHECK = re.compile(r"^(?P<label>[^=]+?) = (?P<value>\S+)(?: ± (?P<tolerance>[\d.]+))?$")
#: A measured figure: a number with a unit of time, rate or share.
FIGURE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:%|ms|µs|s|min|x|MiB|GiB|steps/s|episodes/s|samples/s)(?![\w/])")
#: What names a figure's source in a section.
SOURCE = re.compile(r"<!-- figure: |examples/[\w/]+\.py|`gymenvs \w+|tests/[\w/]+\.py")


@dataclass(frozen=True)
class Check:
    label: str
    value: str
    tolerance: float | None


@dataclass(frozen=True)
class Figure:
    page: str
    line: int
    command: str
    rerun: bool
    slow: bool
    reason: str
    checks: tuple[Check, ...]
    text: str  # the paragraph, list item or table after the marker

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def read_figures(page: Path) -> list[Figure]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in MARKER.finditer(text):
        command, mode, *checks = [part.strip() for part in " ".join(match["body"].split()).split(" | ")]
        after = text[match.end() :].lstrip("\n")
        found.append(
            Figure(
                page=str(page.relative_to(ROOT)),
                line=text.count("\n", 0, match.start()) + 1,
                command=command,
                rerun=mode in ("rerun", "rerun slow"),
                slow=mode == "rerun slow",
                reason=mode.removeprefix("not rerun:").strip() if mode.startswith("not rerun:") else "",
                checks=tuple(parse_check(check) for check in checks),
                text=re.split(r"\n\s*\n", after, maxsplit=1)[0],
            )
        )
    return found


def parse_check(check: str) -> Check:
    match = CHECK.match(check)
    if match is None:
        raise ValueError(f"figure check {check!r}: expected LABEL = VALUE [± TOLERANCE]")
    tolerance = match["tolerance"]
    return Check(match["label"], match["value"], None if tolerance is None else float(tolerance))


FIGURES = [figure for page in PAGES for figure in read_figures(page)]


def command_argv(command: str) -> list[str]:
    """The marker's command as this interpreter runs it (`gymenvs ...` is `python -m gymenvs.cli ...`)."""
    argv = shlex.split(command)
    if argv[0] == "gymenvs":
        return [sys.executable, "-m", "gymenvs.cli", *argv[1:]]
    if argv[0] == "python":
        return [sys.executable, *argv[1:]]
    if argv[0].endswith(".py"):
        return [sys.executable, *argv]
    raise ValueError(f"{command!r}: a figure's command is `gymenvs ...`, `python ...` or a Python script")


def number(text: str) -> float:
    match = re.search(r"-?\d+(?:\.\d+)?", text.replace(",", ""))
    if match is None:
        raise ValueError(f"no number in {text!r}")
    return float(match.group())


def test_the_docs_mark_figures():
    assert any(figure.rerun for figure in FIGURES) and any(not figure.rerun for figure in FIGURES)


@pytest.mark.parametrize("figure", FIGURES, ids=str)
def test_every_marker_names_a_command_and_says_what_the_text_states(figure):
    argv = command_argv(figure.command)
    script = next((arg for arg in argv[1:] if arg.endswith(".py")), None)
    assert script is None or (ROOT / script).is_file(), f"{figure}: {script} does not exist"
    if figure.rerun:
        assert figure.checks, f"{figure}: a rerun figure names the values it checks"
    else:
        assert figure.reason, f"{figure}: say why it is not rerun (`not rerun: why`)"
    for check in figure.checks:
        assert check.value in figure.text, f"{figure}: the marker says {check.label} = {check.value}; the text does not"


@pytest.mark.parametrize("figure", [pytest.param(figure, marks=[pytest.mark.slow] * figure.slow)
                                    for figure in FIGURES if figure.rerun], ids=str)
def test_a_quick_figure_is_what_its_command_prints_today(figure):
    result = subprocess.run(
        command_argv(figure.command), cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    lines = [line.strip() for line in result.stdout.splitlines()]
    for check in figure.checks:
        printed = next((line for line in lines if line.startswith(check.label)), None)
        assert printed is not None, f"{figure}: `{figure.command}` printed no line starting with {check.label!r}"
        if check.tolerance is None:
            assert check.value in printed, f"{figure}: the docs say {check.label} {check.value}; the command prints {printed!r}"
        else:
            assert abs(number(printed[len(check.label):]) - number(check.value)) <= check.tolerance, (
                f"{figure}: the docs say {check.label} {check.value} ± {check.tolerance}; the command prints {printed!r}"
            )


def sections(page: Path) -> list[tuple[int, str]]:
    """(first line, text) of each section (a heading and what follows, to the next heading)."""
    text = page.read_text(encoding="utf-8")
    starts = [0, *(match.start() for match in re.finditer(r"(?m)^#{1,6} ", text))]
    return [(text.count("\n", 0, start) + 1, text[start:end]) for start, end in zip(starts, [*starts[1:], len(text)])]


def unsourced_figures() -> list[str]:
    found = []
    for page in PAGES:
        for first_line, section in sections(page):
            if SOURCE.search(section):
                continue
            prose = re.sub(r"```.*?```", lambda block: "\n" * block.group().count("\n"), section, flags=re.DOTALL)
            for offset, line in enumerate(prose.splitlines()):
                if FIGURE.search(line):
                    found.append(f"{page.relative_to(ROOT)}:{first_line + offset}: {line.strip()}")
    return found


def test_every_section_that_states_a_figure_names_its_command():
    assert unsourced_figures() == []


# -- single facts that drifted once ----------------------------------------------------------


def readme_extras() -> dict[str, str]:
    """The README's table of extras: name -> what it says the extra installs."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return dict(re.findall(r"(?m)^\| `(\w+)` \| (.*?) \|", readme))


def test_the_readme_lists_every_extra_with_what_it_installs():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    described = readme_extras()
    assert sorted(described) == sorted(extras)
    for name, requirements in extras.items():
        if name == "all":
            left_out = set(extras) - {"all"} - set(re.findall(r"\w+", requirements[0].partition("[")[2]))
            assert sorted(re.findall(r"`(\w+)`", described[name])) == sorted(left_out), "the README's `all` row"
            continue
        packages = {re.match(r"[\w.\-\[\]]+", requirement).group() for requirement in requirements}
        assert set(re.findall(r"`([^`]+)`", described[name])) == packages, f"the README's `{name}` row"


@pytest.mark.parametrize(
    ("game", "thinking_aloud", "bare_move"),
    [
        ("TowerOfHanoi-v0", "The smallest disk goes to C first: [A C]", "[A C]"),
        ("LightsOut-v0", "Press the centre: [2 2]", "[2 2]"),
    ],
)
def test_which_textarena_games_let_the_model_think_aloud(game, thinking_aloud, bare_move):
    """docs/environments.md: most games find the bracketed move in free text; LightsOut takes only the bare move."""
    import gymnasium as gym

    import gymenvs  # noqa: F401  (registers the envs)

    paragraph = (ROOT / "docs" / "environments.md").read_text(encoding="utf-8")
    strict = game.removesuffix("-v0") in paragraph.split("A few accept only the bare")[1].split("For those")[0]
    env = gym.make("gymenvs/TextArena-v0", game=game)
    try:
        env.reset(seed=0)
        assert ("error" in env.step(thinking_aloud)[4]) == strict
        env.reset(seed=0)
        assert "error" not in env.step(bare_move)[4]
    finally:
        env.close()


if __name__ == "__main__":  # the list of marked figures: `python tests/test_docs.py`
    for figure in FIGURES:
        print(f"{figure}  {'rerun' if figure.rerun else 'not rerun (' + figure.reason + ')'}  {figure.command}")
