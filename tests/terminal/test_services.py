"""Reading the services an agent left running (`gymenvs.terminal.services`), without an engine: the recording's
lines become the services to start again (the outermost process of each, not gymenvs' own), and each is started
again as it was (its directory, its environment only, its user). The engine half is in test_tamper.py."""

from __future__ import annotations

import base64

from gymenvs.terminal.services import Service, parse_recording


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def line(pid: int, ppid: int, ports: str, argv: list[str], *, uid: int = 0, cwd: str = "/app",
         environment: tuple[str, ...] = ("PATH=/usr/bin",)) -> str:
    return (f"service {pid} {ppid} {uid} {uid} {ports} {b64(cwd)} {b64(chr(0).join(argv) + chr(0))} "
            f"{b64(chr(0).join(environment) + chr(0))}")


def test_the_outermost_process_of_each_service_is_kept_and_gymenvs_own_are_not():
    text = "\n".join([
        line(40, 1, "1F90", ["gunicorn", "app:app", "-b", "0.0.0.0:8080"]),
        line(41, 40, "1F90", ["gunicorn", "app:app", "-b", "0.0.0.0:8080"]),  # a worker on its parent's socket
        line(50, 1, "2382,2383", ["python3", "-m", "http.server", "9090"], uid=1000, cwd="/srv/my dir"),
        line(60, 1, "A1B2", ["python3", "/run/gymenvs/forwarder.py"]),  # an agent's channel
        "service 70 1 0 0 1F91 not-base64!",  # malformed: left out
        "some noise",
    ])
    recording = parse_recording(text, ignore=("/run/gymenvs",))
    assert [(s.pid, s.ports) for s in recording.services] == [(40, (8080,)), (50, (9090, 9091))]
    assert recording.ports == (8080, 9090, 9091)
    assert recording.services[1].cwd == "/srv/my dir" and recording.services[1].argv == ("python3", "-m", "http.server", "9090")


def test_a_service_is_started_again_detached_with_its_own_directory_environment_and_user():
    root = Service(1, 0, 0, 0, (8080,), "/srv/my dir", ("python3", "-c", "print('hi there')"), ("A=1 2", "PATH=/bin"))
    assert root.command() == ("cd '/srv/my dir' 2>/dev/null || cd /\n"
                              "setsid nohup env -i 'A=1 2' PATH=/bin python3 -c 'print('\"'\"'hi there'\"'\"')' "
                              ">/dev/null 2>&1 < /dev/null &")
    user = Service(1, 0, 1000, 100, (8080,), "/", ("server",), ())
    assert "setpriv --reuid=1000 --regid=100 --clear-groups server" in user.command()


def test_at_most_max_services_are_started_again():
    """An agent that leaves hundreds of listeners cannot make grading slow: the first MAX_SERVICES (by pid) are kept."""
    from gymenvs.terminal.services import MAX_SERVICES

    text = "\n".join(line(pid, 1, f"{pid:04X}", ["server", str(pid)]) for pid in range(300, 100, -1))
    assert [s.pid for s in parse_recording(text).services] == list(range(101, 101 + MAX_SERVICES))


def test_nothing_listening_is_an_empty_recording():
    assert parse_recording("").services == () and parse_recording("").ports == ()
