"""Attacks on Harbor-task grading (`gymenvs.terminal.grading.grade_task`), against the real Docker engine.

Each attack runs in the agent's container of a tiny task ("write hello to /app/out.txt", checked
by a test.sh that uses `grep`), then the container is graded; none solves the task, so each must
score 0 (a hanging verifier: no reward, infra). Controls show what grading does give (1 to a solved
task, test.sh's exit status, the task's network), and the inherent rows what it does not stop.
`test_table` checks every row against docs/terminal-security.md's table (`-k table -s` prints it).
"""

from __future__ import annotations

import shlex
import textwrap
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gymenvs.container.runtime import Limits
from gymenvs.terminal.grading import VerifierResult, grade_task
from gymenvs.terminal.task import TerminalTask
from gymenvs.terminal.verifier import Verifier

BASE = "gymenvs/swe-base:bookworm"
CHECK = 'if grep -qx hello /app/out.txt; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi'
#: A test.sh that writes a reward only on success (as many do, e.g. under `set -e`): a reward file
#: already there would stand.
ONLY_ON_SUCCESS = "if grep -qx hello /app/out.txt; then echo 1 > /logs/verifier/reward.txt; fi"
FAKE_TOOL = "#!/bin/sh\nexit 0\n"
PYTEST = ("if python3 -m pytest -q -p no:cacheprovider /tests/test_out.py >&2; then echo 1; else echo 0; fi "
          "> /logs/verifier/reward.txt")
PASS_ALL = ("import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
            "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")
PYTEST_FILE = "def test_hello():\n    assert open('/app/out.txt').read().strip() == 'hello'\n"
NO_NETWORK = "! test -e /sys/class/net/eth0"
HAS_NETWORK = "if test -e /sys/class/net/eth0; then echo 1; else echo 0; fi > /logs/verifier/reward.txt"
FAKE_TESTS = "mkdir -p /tmp/mine && printf 'echo 1 > /logs/verifier/reward.txt\\n' > /tmp/mine/test.sh"
#: Waits (up to 10 s) until something listens on 127.0.0.1:PORT: a service is recorded only once it listens.
UNTIL_LISTENING = "for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.1; done"
#: A service that listens (so grading starts it again beside the tests) and keeps writing a reward of 1.
REWARD_WRITING_SERVICE = ("import os, socket, time\n"
                          "server = socket.socket()\nserver.bind(('127.0.0.1', 8081))\nserver.listen()\n"
                          "while True:\n    os.makedirs('/logs/verifier', exist_ok=True)\n"
                          "    open('/logs/verifier/reward.txt', 'w').write('1')\n    time.sleep(0.02)\n")
#: The tests fetch /app/out.txt from a web server the agent left running on port 8080.
FETCH_FROM_SERVICE = ("if python3 -c \"import sys, urllib.request; served = urllib.request.urlopen("
                      "'http://127.0.0.1:8080/out.txt', timeout=5).read(); sys.exit(served.strip() != b'hello')\"; "
                      "then echo 1; else echo 0; fi > /logs/verifier/reward.txt")

#: name -> (what the agent does in its container, the task's test.sh or None for CHECK)
ATTACKS: dict[str, tuple[str, str | None]] = {
    "pre-written reward.txt": ("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt", ONLY_ON_SUCCESS),
    "pre-written reward.json": (
        "mkdir -p /logs/verifier && echo '{\"reward\": 1}' > /logs/verifier/reward.json", ONLY_ON_SUCCESS),
    "background process rewriting the reward": (
        "setsid nohup bash -c 'while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; sleep 0.05; done' "
        ">/dev/null 2>&1 < /dev/null & disown; sleep 0.3", ONLY_ON_SUCCESS),
    "/logs/verifier a symlink to the agent's reward": (
        "mkdir -p /tmp/r /logs && echo 1 > /tmp/r/reward.txt && ln -s /tmp/r /logs/verifier", ONLY_ON_SUCCESS),
    "/logs a symlink to the agent's folder": (
        "mkdir -p /tmp/l/verifier && echo 1 > /tmp/l/verifier/reward.txt && ln -s /tmp/l /logs", ONLY_ON_SUCCESS),
    "fake grep shadowing /usr/bin/grep on PATH": (
        f"printf '{FAKE_TOOL}' > /usr/local/bin/grep && chmod +x /usr/local/bin/grep", None),
    "/usr/bin/grep overwritten": (f"printf '{FAKE_TOOL}' > /usr/bin/grep", None),
    # Docker's own list of changes compares size, mode and time, and misses this one; the layer shows it.
    "/usr/bin/grep overwritten, its size and time kept": (
        f"cp -p /usr/bin/grep /tmp/grep && printf '{FAKE_TOOL}' > /usr/bin/grep && "
        "truncate -s $(stat -c %s /tmp/grep) /usr/bin/grep && touch -r /tmp/grep /usr/bin/grep", None),
    "/usr/local/bin a symlink to a folder of fakes": (
        f"mkdir -p /tmp/bin && printf '{FAKE_TOOL}' > /tmp/bin/grep && chmod +x /tmp/bin/grep && rm -rf /usr/local/bin "
        "&& ln -s /tmp/bin /usr/local/bin", None),
    "/tests a symlink to the agent's tests": (f"{FAKE_TESTS} && ln -s /tmp/mine /tests", None),
    "tests/test.sh pre-placed, tests edited through a symlink": (
        f"{FAKE_TESTS} && mkdir -p /tests && ln -s /tmp/mine/test.sh /tests/test.sh", None),
    "/conftest.py turning failures into passes (pytest)": (f"printf \"{PASS_ALL}\" > /conftest.py", PYTEST),
    "/pytest.ini making pytest only collect, exit 0 (pytest)": ("printf '[pytest]\\naddopts = --collect-only\\n' > /pytest.ini",
                                                                 PYTEST),
    "verifier that hangs": ("true", "sleep 600"),
    "reward.json with non-numbers": ("true", "echo '{\"reward\": \"1\", \"style\": true}' > /logs/verifier/reward.json"),
    "reward.json with NaN": ("true", "echo '{\"reward\": NaN}' > /logs/verifier/reward.json"),
    "huge reward.txt": ("true", "yes 1 | head -c 20000000 > /logs/verifier/reward.txt"),
    "reward.txt a symlink to a file of 1": ("true", "echo 1 > /tmp/one && ln -s /tmp/one /logs/verifier/reward.txt"),
    "a service the agent started, listening and writing the reward": (
        f"printf '%s' {shlex.quote(REWARD_WRITING_SERVICE)} > /tmp/service.py && "
        f"(setsid nohup python3 /tmp/service.py >/dev/null 2>&1 < /dev/null &) && {UNTIL_LISTENING.format(port=8081)}",
        ONLY_ON_SUCCESS),
    "process left by the tests, writing the reward 0.02 s after test.sh exits": (
        "true", "setsid nohup bash -c \"while kill -0 $$ 2>/dev/null; do sleep 0.005; done; sleep 0.02; "
        "echo 1 > /logs/verifier/reward.txt\" >/dev/null 2>&1 < /dev/null &\necho 0 > /logs/verifier/reward.txt"),
}
#: Two rows that are not attacks: the grading can give 1 (and a reward.json's named scores).
CONTROLS: dict[str, tuple[str, str | None]] = {
    "control: task solved": ("echo hello > /app/out.txt", None),
    "control: solved, checked by pytest": ("echo hello > /app/out.txt", PYTEST),
    "control: solved, [verifier] user = nobody": (
        "echo hello > /app/out.txt",
        '[ "$(id -un)" = nobody ] && grep -qx hello /app/out.txt && echo 1 > /logs/verifier/reward.txt'),
    "control: solved, reward.json scores": ("echo hello > /app/out.txt",
                                            "echo '{\"reward\": 1, \"style\": 0.5}' > /logs/verifier/reward.json"),
    "control: solved, test.sh exits 3 after writing the reward": ("echo hello > /app/out.txt", f"{CHECK}\nexit 3"),
    # 1 when the agent's loop (which appends a line to /app/ticks every 0.05 s) wrote nothing while the tests watched
    "control: the agent's background process does not run during grading": (
        "setsid nohup bash -c 'while :; do date +%s%N >> /app/ticks; sleep 0.05; done' >/dev/null 2>&1 < /dev/null & "
        "disown; sleep 0.3", 'a=$(wc -l < /app/ticks); sleep 0.5; b=$(wc -l < /app/ticks)\n'
        'if [ "$a" -gt 0 ] && [ "$a" = "$b" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt'),
    "control: a service the agent left running answers the tests": (
        "echo hello > /app/out.txt && (setsid nohup python3 -m http.server 8080 --bind 127.0.0.1 >/dev/null 2>&1 "
        f"< /dev/null &) && {UNTIL_LISTENING.format(port=8080)}", FETCH_FROM_SERVICE),
    # the agent's container has no network (as with `internet=False`); grading follows the task's network mode
    "control: grading has the network the task allows, not the agent's": (NO_NETWORK, HAS_NETWORK),
    "control: no network in grading when the task has none": (NO_NETWORK, HAS_NETWORK),
}
#: Attacks grading does not stop (docs/terminal-security.md, "inherent"): the tests run the agent's state.
INHERENT: dict[str, tuple[str, str | None]] = {
    "a `pytest` package in the workdir, for `python3 -m pytest` (inherent)": (
        "mkdir -p /app/pytest && echo 'raise SystemExit(0)' > /app/pytest/__main__.py && touch /app/pytest/__init__.py", PYTEST),
    # test.sh installs a tool the image lacks (as Terminal-Bench 2's install curl, then uv) and runs it by name: a fake
    # the agent put earlier on PATH under that name runs instead (toolguard only restores names the image has)
    "a tool test.sh installs, shadowed in advance earlier on PATH (inherent)": (
        f"printf '{FAKE_TOOL}' > /usr/local/bin/checker && chmod +x /usr/local/bin/checker",
        "printf '#!/bin/sh\\ngrep -qx hello /app/out.txt\\n' > /usr/bin/checker && chmod +x /usr/bin/checker\n"
        "if checker; then echo 1; else echo 0; fi > /logs/verifier/reward.txt"),
}
HANG_TIMEOUT_S = 4.0
pytestmark = [pytest.mark.docker, pytest.mark.slow]
#: The attacks whose reward file is refused, or whose test.sh wrote none (the others: a 0 that test.sh wrote).
REASONS = {**{name: "bad_reward" for name in ATTACKS if name.startswith(("reward.json", "huge", "reward.txt"))},
           **{name: "no_reward" for name, (_, test_sh) in ATTACKS.items() if test_sh == ONLY_ON_SUCCESS}}


def make_task(root: Path, name: str, test_sh: str | None) -> TerminalTask:
    user = 'user = "nobody"' if name.endswith("[verifier] user = nobody") else ""
    internet = "true" if name == "control: grading has the network the task allows, not the agent's" else "false"
    folder = root / name.replace(" ", "-").replace("/", "_")
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "instruction.md").write_text("Write the line `hello` to /app/out.txt.\n")
    (folder / "task.toml").write_text(textwrap.dedent(f"""\
        schema_version = "1.0"
        [verifier]
        timeout_sec = 60
        {user}
        [environment]
        cpus = 1
        memory_mb = 512
        storage_mb = 2048
        allow_internet = {internet}
        """))
    (folder / "environment" / "Dockerfile").write_text(f"FROM {BASE}\nWORKDIR /app\n")
    (folder / "tests" / "test.sh").write_text(f"#!/bin/bash\n{test_sh or CHECK}\n")
    (folder / "tests" / "test_out.py").write_text(PYTEST_FILE)
    return TerminalTask.from_dir(folder)


def attack(runtime, client, root: Path, name: str, agent: str, test_sh: str | None, *,
           ahead: bool) -> tuple[VerifierResult, str]:
    """Run `agent` in a fresh agent container of the task, grade it; the result and the container's state after
    (seen from outside, by the plain docker `client`). With `ahead`, grading takes a verifier started before the
    agent ran, as an episode's grading does, and copies the agent's changes into it."""
    task = make_task(root, name, test_sh)
    limits = Limits(mem_limit="512m", network=False, disk_limit=None)
    sandbox = runtime.start(BASE, role="verifier-attack", episode_id=task.name, workdir="/app", limits=limits)
    verifier = Verifier.start(runtime, BASE, task, limits=limits, workdir="/app", nonce=uuid.uuid4().hex[:12]) if ahead else None
    try:
        done = sandbox.run(agent, timeout=30)
        assert done.exit_code == 0, done.output.text()
        result = grade_task(sandbox, task, timeout_s=HANG_TIMEOUT_S if test_sh == "sleep 600" else None, ahead=verifier)
        return result, client.api.inspect_container(sandbox.id)["State"]["Status"]
    finally:
        sandbox.remove()


@pytest.fixture(scope="module", params=["ahead", "snapshot"])
def outcomes(request, runtime, docker_client, swe_images, tmp_path_factory):
    """Every attack and control, graded once for the module (four at a time): in a verifier started ahead, the
    agent's changes copied in (what an episode does where the runtime hands them over), and in a snapshot of the
    agent's container (where it does not, or services are started again from it)."""
    root = tmp_path_factory.mktemp("harbor-attacks")
    rows = {**ATTACKS, **CONTROLS, **INHERENT}
    ahead = request.param == "ahead"
    with ThreadPoolExecutor(4) as pool:
        futures = {name: pool.submit(attack, runtime, docker_client, root, name, *rows[name], ahead=ahead) for name in rows}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("name", [name for name in ATTACKS if name != "verifier that hangs"])
def test_an_attack_scores_zero(outcomes, name):
    result, _ = outcomes[name]
    assert (result.outcome, result.reward, result.reason) == ("model", 0.0, REASONS.get(name, "failed")), result


def test_a_hanging_verifier_is_an_infra_timeout_without_a_reward(outcomes):
    result, _ = outcomes["verifier that hangs"]
    assert (result.outcome, result.reason, result.reward) == ("infra", "grading_timeout", None), result


def test_the_controls_score_one_with_named_scores(outcomes):
    solved, _ = outcomes["control: task solved"]
    scored, _ = outcomes["control: solved, reward.json scores"]
    assert (solved.reward, solved.reason) == (1.0, "solved"), solved
    assert outcomes["control: solved, checked by pytest"][0].reward == 1.0
    assert outcomes["control: solved, [verifier] user = nobody"][0].reward == 1.0
    assert (scored.reward, scored.scores) == (1.0, {"reward": 1.0, "style": 0.5}), scored


def test_the_exit_status_of_test_sh_is_kept(outcomes):
    """test.sh's own status, not the status of the kill-all that follows it."""
    exits_3, _ = outcomes["control: solved, test.sh exits 3 after writing the reward"]
    assert (exits_3.reward, exits_3.test_exit_code) == (1.0, 3), exits_3
    assert "tests/test.sh exited 3" in exits_3.log_tail
    assert outcomes["control: task solved"][0].test_exit_code == 0


def test_grading_has_the_network_of_the_task_not_of_the_agents_container(outcomes):
    """The agent's containers here have no network (the attack asserts it), as `internet=False` makes them;
    the tests see eth0 when the task allows the internet (docs/terminal.md: test.sh often installs its tools)."""
    assert outcomes["control: grading has the network the task allows, not the agent's"][0].reward == 1.0
    assert outcomes["control: no network in grading when the task has none"][0].reward == 0.0


def test_the_inherent_attacks_still_work(outcomes):
    """What docs/terminal-security.md calls inherent: if one starts scoring 0, move it to ATTACKS and the doc's table."""
    for name in INHERENT:
        assert outcomes[name][0].reward == 1.0, outcomes[name][0]


def test_a_service_the_agent_left_running_answers_the_tests_but_cannot_write_the_reward(outcomes):
    """Grading starts the agent's listening services again beside the tests, sharing only their network: the web
    server answers them, and the service that kept writing reward.txt writes its own container's copy."""
    served, _ = outcomes["control: a service the agent left running answers the tests"]
    assert (served.reward, served.reason) == (1.0, "solved"), served
    assert served.services == ("[gymenvs] started again for the tests: python3 -m http.server 8080 --bind 127.0.0.1 "
                               "(ports 8080: listening)"), served
    writer, _ = outcomes["a service the agent started, listening and writing the reward"]
    assert (writer.reward, writer.reason) == (0.0, "no_reward"), writer
    # It did run beside the tests (a 0 without that would prove nothing): its reward.txt is its own container's.
    assert writer.services == "[gymenvs] started again for the tests: python3 /tmp/service.py (ports 8081: listening)", writer
    assert outcomes["control: task solved"][0].services == ""  # nothing listened: nothing started again


def test_the_agents_processes_are_stopped_and_its_tools_put_back(outcomes):
    """The agent's loop appending to /app/ticks left the file as it was while test.sh watched it for 0.5 s."""
    watched, state = outcomes["control: the agent's background process does not run during grading"]
    assert (watched.reward, state) == (1.0, "exited"), watched
    shadowed, _ = outcomes["fake grep shadowing /usr/bin/grep on PATH"]
    overwritten, _ = outcomes["/usr/bin/grep overwritten"]
    assert shadowed.restored == ["/usr/local/bin/grep: added in front of the image's /usr/bin/grep, now a link to it"]
    assert overwritten.restored == ["/usr/bin/grep: changed by the agent, restored"]
    kept, _ = outcomes["/usr/bin/grep overwritten, its size and time kept"]
    assert kept.restored == ["/usr/bin/grep: changed by the agent, restored"]


def documented_rows() -> dict[str, tuple[str, str, str]]:
    """docs/terminal-security.md's table of attacks: name -> (reward, outcome, reason)."""
    text = (Path(__file__).parents[2] / "docs" / "terminal-security.md").read_text()
    table = text.split("## The attacks and their rewards", 1)[1].split("\n\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) >= 4 and cells[1] not in ("reward", "---"):
            rows[cells[0].strip("`")] = (cells[1], cells[2], cells[3])
    return rows


def test_table(outcomes):
    """Every row graded as docs/terminal-security.md's table says (`pytest -k table -s` prints the table)."""
    lines = ["| attack | reward | outcome | reason | detail |", "|---|---|---|---|---|"]
    measured = {}
    for name, (result, _) in outcomes.items():
        detail = "; ".join(result.restored) or result.detail
        lines.append(f"| {name} | {result.reward} | {result.outcome} | {result.reason} | {detail[:110]} |")
        measured[name] = (str(result.reward), result.outcome, result.reason)
    print("\n" + "\n".join(lines))
    assert measured == documented_rows()

