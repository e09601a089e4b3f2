"""The services an agent left running, up again when a Harbor task's tests run, without letting them near the reward.

Many terminal tasks ask the agent to start or fix a service, and their tests probe it (`curl 127.0.0.1:8080`).
Grading runs the tests on a snapshot of the agent's container, after every process in it stopped
(docs/terminal-security.md), so such a service is gone. Here it is brought back beside the tests:

1. `record_services(sandbox)`, in the agent's container just before it stops: every process that holds a
   listening TCP socket (read from /proc), with its command line, working directory, environment and user,
   and the ports that listen;
2. `ServiceReplay.start(...)`: a second container from the same snapshot joins the grading container's
   network namespace, and nothing else of it; each recorded service is started there again, as it was
   started, and the tests wait (up to `READY_SECONDS`) until the recorded ports listen.

A replayed service answers the tests over the network, but it has its own filesystem and processes: it
cannot write the grading container's /logs/verifier, read /tests, or outlive the grading (its container
is removed with the grading run's). What it serves is what the agent left on disk, started afresh: state
it held only in memory is not replayed.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import shlex
from dataclasses import dataclass
from typing import Any

from gymenvs.container.runtime import Sandbox, SandboxError

#: Seconds the tests wait for the replayed services' ports to listen.
READY_SECONDS = 10.0
#: Services started again at most (the first ones by pid): a task needs a few; an agent cannot make grading slow.
MAX_SERVICES = 16
#: Bytes of the recording read back; past it the agent's container holds more than services worth replaying.
_RECORD_LIMIT = 1 << 20

# For each process holding a socket that listens (state 0A in /proc/net/tcp*), one line:
# `service PID PPID UID GID PORTS CWD CMDLINE ENVIRON`: PORTS its listening ports (hex, comma-separated), the last
# three base64 (NUL-separated, as /proc has them). Run with bash in the agent's container; it writes nothing there.
_RECORD = r"""
listening=$(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == "0A" {split($2, a, ":"); print $10 ":" a[2]}' | sort -u)
[ -n "$listening" ] || exit 0
for proc in /proc/[0-9]*; do
  pid=${proc#/proc/}
  [ "$pid" = "$$" ] && continue
  ports=""
  for fd in "$proc"/fd/*; do
    link=$(readlink "$fd" 2>/dev/null) || continue
    case "$link" in socket:\[*\]) inode=${link#socket:[}; inode=${inode%]} ;; *) continue ;; esac
    port=$(printf '%s\n' $listening | awk -F: -v i="$inode" '$1 == i {print $2; exit}')
    [ -n "$port" ] && ports="$ports,$port"
  done
  [ -n "$ports" ] || continue
  ppid=$(awk '/^PPid:/ {print $2}' "$proc/status")
  ids=$(awk '/^Uid:/ {u=$2} /^Gid:/ {g=$2} END {print u, g}' "$proc/status")
  cwd=$(readlink "$proc/cwd"); cwd=$(printf '%s' "$cwd" | base64 -w0)
  echo "service $pid $ppid $ids ${ports#,} $cwd $(base64 -w0 < "$proc/cmdline") $(base64 -w0 < "$proc/environ")"
done
"""


@dataclass(frozen=True)
class Service:
    """One process that listened when the agent's turn ended, as it was started."""

    pid: int
    ppid: int
    uid: int
    gid: int
    ports: tuple[int, ...]
    cwd: str
    argv: tuple[str, ...]
    environment: tuple[str, ...]

    def command(self) -> str:
        """A bash command that starts it again, detached: its working directory, its environment only, its user."""
        run = " ".join(shlex.quote(arg) for arg in self.argv)
        if self.uid != 0:
            run = f"setpriv --reuid={self.uid} --regid={self.gid} --clear-groups {run}"
        environment = " ".join(shlex.quote(pair) for pair in self.environment if "=" in pair and not pair.startswith("-"))
        return (f"cd {shlex.quote(self.cwd)} 2>/dev/null || cd /\n"
                f"setsid nohup env -i {environment} {run} >/dev/null 2>&1 < /dev/null &")


@dataclass(frozen=True)
class Recording:
    """What `record_services` found: the services to start again."""

    services: tuple[Service, ...] = ()

    @property
    def ports(self) -> tuple[int, ...]:
        """The ports the tests wait for."""
        return tuple(sorted({port for service in self.services for port in service.ports}))

    def to_list(self) -> list[dict[str, Any]]:
        """The services as JSON data (`VerifierResult.recorded`), which `from_list` reads back."""
        return [dataclasses.asdict(service) for service in self.services]

    @classmethod
    def from_list(cls, services: list[dict[str, Any]]) -> Recording:
        return cls(tuple(Service(**{**entry, **{key: tuple(entry[key]) for key in ("ports", "argv", "environment")}})
                         for entry in services))


def record_services(sandbox: Sandbox, *, ignore: tuple[str, ...] = ()) -> Recording:
    """The listening services of the agent's (still running) container, but those whose command line names a
    path under one of `ignore` (gymenvs' own processes, such as an agent's channel); an empty recording when
    there are none or when they cannot be read (a container without bash, base64 or awk: grading goes on
    without them). Where the runtime reads from outside that nothing listens (`Sandbox.listens_on_tcp`), nothing
    runs in the container."""
    if sandbox.listens_on_tcp() is False:
        return Recording()
    try:
        result = sandbox.run(_RECORD, timeout=10, output_limit=_RECORD_LIMIT)
    except SandboxError:
        return Recording()
    if result.exit_code != 0:
        return Recording()
    return parse_recording(result.output.raw().decode("utf-8", "replace"), ignore=ignore)


def parse_recording(text: str, *, ignore: tuple[str, ...] = ()) -> Recording:
    """The recording's lines as services: the outermost process of each (a worker sharing its parent's socket
    is started by its parent), not those naming a path under `ignore`; a malformed line is left out."""
    services: list[Service] = []
    for line in text.splitlines():
        fields = line.split(" ")
        if fields[0] != "service" or len(fields) != 9:
            continue
        try:
            services.append(_service(fields[1:]))
        except (ValueError, binascii.Error):
            continue
    pids = {service.pid for service in services}
    ours = tuple(root.rstrip("/") + "/" for root in ignore)
    kept = [s for s in services if s.ppid not in pids and s.argv and not any(root in arg for arg in s.argv for root in ours)]
    return Recording(tuple(sorted(kept, key=lambda service: service.pid)[:MAX_SERVICES]))


def _service(fields: list[str]) -> Service:
    pid, ppid, uid, gid, ports, cwd, cmdline, environ = fields
    return Service(int(pid), int(ppid), int(uid), int(gid), tuple(sorted({int(p, 16) for p in ports.split(",")})),
                   _decode(cwd), tuple(_nul_separated(cmdline)), tuple(_nul_separated(environ)))


def _decode(text: str) -> str:
    return base64.b64decode(text, validate=True).decode("utf-8", "surrogateescape")


def _nul_separated(text: str) -> list[str]:
    return [part for part in _decode(text).split("\0") if part]


class ServiceReplay:
    """The container the recorded services run in again, in the grading container's network namespace."""

    def __init__(self, sandbox: Sandbox, recording: Recording):
        self.sandbox = sandbox
        self.recording = recording
        #: Whether every recorded port listened before the tests ran.
        self.ready = False

    @classmethod
    def start(cls, snapshot: str, grader: Sandbox, recording: Recording, *, role: str, episode_id: str) -> ServiceReplay:
        """Start `recording`'s services from `snapshot` beside `grader` and wait until their ports listen."""
        sandbox = grader.runtime.start(snapshot, role=role, episode_id=episode_id, limits=grader.limits,
                                       workdir=grader.workdir, network_of=grader)
        replay = cls(sandbox, recording)
        try:
            sandbox.run("\n".join(service.command() for service in recording.services), timeout=10)
            replay.ready = replay.wait_for()
        except SandboxError:
            replay.remove()
            raise
        return replay

    def wait_for(self, seconds: float = READY_SECONDS) -> bool:
        """Whether every recorded port listens within `seconds` (the tests run either way, and say what they found)."""
        if not self.recording.ports:
            return True
        wanted = " ".join(f"{port:04X}" for port in self.recording.ports)
        listens = "awk -v p=\"$port\" '$4 == \"0A\" {split($2, a, \":\"); if (a[2] == p) found = 1} END {exit !found}'"
        script = (f"for _ in $(seq {int(seconds * 20)}); do missing=0; for port in {wanted}; do "
                  f"{listens} /proc/net/tcp /proc/net/tcp6 2>/dev/null || missing=1; done; "
                  "[ $missing = 0 ] && exit 0; sleep 0.05; done; exit 1")
        return self.sandbox.run(script, timeout=seconds + 5).exit_code == 0

    def note(self) -> str:
        """A line for the grading log: what was started again, and whether it listened in time."""
        commands = "; ".join(" ".join(service.argv)[:120] for service in self.recording.services)
        ports = ", ".join(map(str, self.recording.ports))
        listened = "listening" if self.ready else f"not all listening after {READY_SECONDS:g} s"
        return f"[gymenvs] started again for the tests: {commands} (ports {ports}: {listened})"

    def remove(self) -> None:
        self.sandbox.remove()
