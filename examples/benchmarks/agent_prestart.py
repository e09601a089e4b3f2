"""Would starting an agent CLI ahead of its task meet the warm pool's 0.5 s target? Each CLI's time to its first
LLM request when started with its task (as SWEAgent-v0 starts it), against the time from handing the task to a
CLI started ahead of it that waits for the task on its standard input.

    python examples/benchmarks/agent_prestart.py [--runs 3] [--ahead 4] [--agents claude-code codex opencode pi]

Each run is one container of the CLI's derived image (the textkit fixture's), limited to one CPU with no network,
as in an episode, with the agent's files written where an episode writes them and its environment as the env
sets it, against a stand-in endpoint on the container's loopback that answers 500 and notes when the first
request came. Two variants per CLI, each `--runs` times (median):

- cold: the CLI started with its task (SWEAgent-v0's command for it); the time from its start;
- ahead: the command a warm pool starts (`AgentSpec.ahead_command`), its standard input held open, `--ahead`
  seconds before the task is written to its standard input (and closed); the time from that write.

The "ahead" variant is what a warm pool does without patching a CLI: start it in the pooled container before the
episode's task is known (each reads the task from standard input when it is given none on its command line; Claude
Code with `--input-format stream-json`, its task a user message: given no prompt, plain `claude -p` waits only 3 s
for its standard input; OpenCode as its own server, with its session created, through opencode_ahead.py), so that
only what it does after reading the task is left for `reset`. A request before the task stops the script.
Needs a Docker engine and the derived images (`gymenvs swe install-agent NAME`). Prints figures; nothing is asserted.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import tarfile

import docker

from gymenvs.container.agent.specs import AGENTS, MOUNT

IMAGE = "gymenvs/swe-fixture.textkit-1:latest"
TASK = "Print the word hello with echo, then stop."
ORIGIN = "http://127.0.0.1:9999"
#: The CLIs with a command reading the task on standard input (`AgentSpec.ahead_command`).
AHEAD = sorted(name for name, spec in AGENTS.items() if spec.ahead_command)
STAND_IN = """
import http.server, sys, time
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        sys.stderr.write("REQUEST %.3f %s\\n" % (time.time(), self.path)); sys.stderr.flush()
        self.send_response(500); self.end_headers()
    def do_GET(self):
        self.do_POST()
    def log_message(self, *args): pass
http.server.HTTPServer(("127.0.0.1", 9999), Handler).serve_forever()
"""
# fd 4 holds the FIFO's write end, so that the CLI's open of its read end does not block and it sees EOF only
# once the task is written and fd 4 closed.
SCRIPT = """
python3 -c "$STAND_IN" 2>/tmp/requests &
mkfifo /tmp/task-fifo
sleep 0.5
if [ -n "$AHEAD" ]; then
  exec 4<>/tmp/task-fifo
  bash -c "$AGENT_COMMAND" </tmp/task-fifo >/tmp/log 2>&1 4>&- &
  sleep "$AHEAD"
  grep -q REQUEST /tmp/requests && echo "EARLY_REQUEST"
  started=$(date +%s.%N)
  printf '%s' "$TASK" >&4
  exec 4>&-
else
  started=$(date +%s.%N)
  bash -c "$AGENT_COMMAND" </dev/null >/tmp/log 2>&1 &
fi
for _ in $(seq 1000); do grep -q REQUEST /tmp/requests && break; sleep 0.01; done
grep -q REQUEST /tmp/requests || { echo "NO_REQUEST"; tail -c 2000 /tmp/log; exit 0; }
echo "FIRST_REQUEST $(python3 -c "print(round($(grep -m1 REQUEST /tmp/requests | cut -d' ' -f2) - $started, 3))")"
"""


def environment(agent: str) -> dict[str, str]:
    """The agent's environment as the env sets it (`AgentEnv._agent_environment`), for the stand-in endpoint."""
    spec = AGENTS[agent]
    return {"OPENAI_API_KEY": "x", "GYMENVS_API_KEY": "x", "ANTHROPIC_AUTH_TOKEN": "x", "OPENAI_MODEL": "policy",
            "ANTHROPIC_MODEL": "policy", "GYMENVS_SIDE_MODEL": "side", "OPENAI_BASE_URL": f"{ORIGIN}/v1",
            "OPENAI_API_BASE": f"{ORIGIN}/v1", "GYMENVS_BASE_URL": f"{ORIGIN}/v1", "ANTHROPIC_BASE_URL": ORIGIN,
            "GYMENVS_ORIGIN": ORIGIN, "GYMENVS_TASK_FILE": f"{MOUNT}/task.md", "GYMENVS_WORKDIR": "/testbed",
            "GYMENVS_COMMAND_TIMEOUT": "60", "LANG": "C.UTF-8", "TERM": "dumb", "GYMENVS_TASK_STYLE": "repository",
            **spec.environment}


def agent_files(agent: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in {**AGENTS[agent].file_contents(), "task.md": TASK.encode()}.items():
            info = tarfile.TarInfo(f"{MOUNT.lstrip('/')}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def run_once(client: docker.DockerClient, agent: str, ahead: float | None) -> float:
    spec = AGENTS[agent]
    command = spec.command if ahead is None else spec.ahead_command
    container = client.containers.run(f"{IMAGE}-{spec.image_suffix}", ["sleep", "120"], detach=True, init=True,
                                      network_mode="none", nano_cpus=10**9, working_dir="/testbed",
                                      labels={"gymenvs.benchmark": "agent_prestart"})
    try:
        container.put_archive("/", agent_files(agent))
        variables = {**environment(agent), "STAND_IN": STAND_IN, "AGENT_COMMAND": f"cd /testbed && {command}",
                     "TASK": spec.task_input(TASK).decode(), "AHEAD": "" if ahead is None else f"{ahead:g}"}
        result = container.exec_run(["bash", "-c", SCRIPT], environment=variables)
        output = result.output.decode(errors="replace")
        if "EARLY_REQUEST" in output or "NO_REQUEST" in output:
            raise RuntimeError(f"{agent} made a request before it was given its task, or none in 10 s:\n{output}")
        return float(output.split("FIRST_REQUEST ")[1].split()[0])
    finally:
        container.remove(force=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ahead", type=float, default=4.0)
    parser.add_argument("--agents", nargs="+", default=AHEAD, choices=AHEAD)
    args = parser.parse_args()
    client = docker.from_env()
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for agent in args.agents:
        cold, ahead = [], []
        for _ in range(args.runs):  # alternating, so that a change in load falls on both
            cold.append(run_once(client, agent, None))
            ahead.append(run_once(client, agent, args.ahead))
        print(f"{agent:<12} first request: cold {statistics.median(cold):.2f} s ({' '.join(f'{t:.2f}' for t in cold)}); "
              f"started {args.ahead:g} s ahead, after the task: {statistics.median(ahead):.2f} s "
              f"({' '.join(f'{t:.2f}' for t in ahead)})", flush=True)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
