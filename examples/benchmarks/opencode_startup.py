"""Where OpenCode's start-up goes: its time to the first LLM request with each of gymenvs's settings for it on and off.

    python examples/benchmarks/opencode_startup.py [--runs 3] [--image IMAGE]

Runs `opencode run` alone in its derived image (default: the textkit fixture's), with one CPU and no network, as
in an episode, against a stand-in endpoint on the container's loopback that answers 500 and notes when the first
request came; OpenCode reads the config gymenvs renders for it. Variants, each `--runs` times, alternating (median):

- none: none of the settings below;
- catalogue: `OPENCODE_MODELS_PATH` naming an empty model catalogue (opencode-models.json);
- + plugin lock: also the empty node_modules and the lockfile that stop its plugin install;
- + engine: also the JavaScript engine settings (no optimising JIT, one GC thread);
- + no watcher: also `OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER`: what SWEAgent-v0 runs;
- + no watcher, debug log: the same with `--print-logs --log-level DEBUG`; its messages follow (the last run's), in
  seconds since OpenCode was started.

Each line also gives the container's CPU time to the first request (its cgroup's, read by the stand-in; what a
busy host inflates least) and how long its one-CPU limit held it back (throttled). Nothing else runs in the container
while OpenCode starts: the stand-in exits once it has answered, and the script waits for that.

Last, the floor of a reset without a pool: the start of a container of the image as gymenvs starts an episode's
(`Runtime.start`, one CPU, no network; median of `--runs`) plus OpenCode's own start-up with SWEAgent-v0's settings
(`+ no watcher`): what an env that did nothing else would still take to OpenCode's first request.

Needs a Docker engine and the image (`gymenvs swe install-agent opencode`). Prints figures; nothing is asserted.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from datetime import datetime
from importlib import resources

import docker

from gymenvs.container.agent.specs import AGENTS_ROOT, OPENCODE
from gymenvs.container.runtime import Limits, shared_runtime

IMAGE = "gymenvs/swe-fixture.textkit-1:latest-opencode-1.18.33"
LIMITS = {"network_mode": "none", "nano_cpus": 10**9}  # an SWE episode's: one CPU, no network
ENGINE = {key: value for key, value in OPENCODE.environment.items() if key.startswith("BUN_JSC_")}
WATCHER_OFF = {"OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER": OPENCODE.environment["OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER"]}
BASE = {key: value for key, value in OPENCODE.environment.items()
        if key.startswith("OPENCODE_") and key != "OPENCODE_MODELS_PATH" and key not in WATCHER_OFF}
# The container's CPU time and the time its CPU limit held it back, in seconds (cgroup v1 or v2).
STAND_IN = """
import http.server, os, signal, sys, time
signal.alarm(60)  # no request by then: it exits, and the script says so
def cpu():
    if os.path.exists("/sys/fs/cgroup/cpu.stat"):
        stat = dict(line.split() for line in open("/sys/fs/cgroup/cpu.stat"))
        return int(stat["usage_usec"]) / 1e6, int(stat.get("throttled_usec", 0)) / 1e6
    stat = dict(line.split() for line in open("/sys/fs/cgroup/cpu/cpu.stat"))
    return int(open("/sys/fs/cgroup/cpuacct/cpuacct.usage").read()) / 1e9, int(stat["throttled_time"]) / 1e9
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        sys.stderr.write("REQUEST %.3f %.3f %.3f\\n" % (time.time(), *cpu())); sys.stderr.flush()
        self.send_response(500); self.end_headers(); self.wfile.flush(); os._exit(0)
    def log_message(self, *args): pass
sys.stderr.write("BEFORE %.3f %.3f\\n" % cpu()); sys.stderr.flush()
http.server.HTTPServer(("127.0.0.1", 9999), Handler).serve_forever()
"""
SCRIPT = """
set -e
python3 -c "$STAND_IN" 2>/tmp/requests & stand_in=$!
mkdir -p /tmp/gymenvs-opencode "$HOME/.config/opencode"
printf %s "$CONFIG" | sed -e "s|@OPENAI_BASE_URL@|http://127.0.0.1:9999/v1|g" -e "s|@OPENAI_MODEL@|policy|g" \\
  -e "s|@GYMENVS_SIDE_MODEL@|side|g" > /tmp/gymenvs-opencode/opencode.json
if [ -n "$CATALOGUE" ]; then echo '{}' > /tmp/models.json; export OPENCODE_MODELS_PATH=/tmp/models.json; fi
if [ -n "$PLUGIN_LOCK" ]; then
  mkdir -p "$HOME/.config/opencode/node_modules"
  printf %s "$PLUGIN_LOCK" > "$HOME/.config/opencode/package-lock.json"
fi
sleep 0.5
started=$(date +%s.%N)
echo "say hi" | timeout 60 env $ENGINE $WATCHER BINARY run --auto --format json $LOG_FLAGS > /tmp/log 2>&1 &
wait $stand_in || true
grep -q REQUEST /tmp/requests || { echo NO_REQUEST; tail -c 2000 /tmp/log; exit 0; }
set -- $(grep -m1 REQUEST /tmp/requests) $(grep -m1 BEFORE /tmp/requests)
echo "FIRST_REQUEST $(python3 -c "print(round($2 - $started, 3), round($3 - $6, 3), round($4 - $7, 3))")"
echo "STARTED $started"
if [ -n "$LOG_FLAGS" ]; then sleep 0.3; grep -a '^timestamp=' /tmp/log | cut -c1-160; fi
""".replace("BINARY", f"{AGENTS_ROOT}/opencode/node_modules/opencode-linux-x64/bin/opencode")


def run_once(client, image: str, catalogue: bool, lock: bool, engine: bool, watcher_off: bool,
             log: bool) -> tuple[list[float], str]:
    """Seconds to the first request, the container's CPU seconds to it and its throttled seconds; the output."""
    package = resources.files("gymenvs.container.agent")
    environment = {**BASE, "OPENCODE_CONFIG": "/tmp/gymenvs-opencode/opencode.json", "OPENAI_API_KEY": "x",
                   "STAND_IN": STAND_IN, "CONFIG": package.joinpath("opencode.json").read_text(),
                   "CATALOGUE": "1" if catalogue else "",
                   "PLUGIN_LOCK": package.joinpath("opencode-plugin-lock.json").read_text() if lock else "",
                   "ENGINE": " ".join(f"{key}={value}" for key, value in ENGINE.items()) if engine else "",
                   "WATCHER": " ".join(f"{key}={value}" for key, value in WATCHER_OFF.items()) if watcher_off else "",
                   "LOG_FLAGS": "--print-logs --log-level DEBUG" if log else ""}
    output = client.containers.run(image, ["bash", "-c", SCRIPT], environment=environment, **LIMITS, remove=True,
                                   stderr=True).decode()
    if "FIRST_REQUEST" not in output:
        raise RuntimeError(f"OpenCode made no request within 60 s:\n{output}")
    return [float(figure) for figure in output.split("FIRST_REQUEST ")[1].split()[:3]], output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--image", default=IMAGE)
    args = parser.parse_args()
    client = docker.from_env()
    variants = {"none": (False, False, False, False, False), "catalogue": (True, False, False, False, False),
                "+ plugin lock": (True, True, False, False, False), "+ engine": (True, True, True, False, False),
                "+ no watcher": (True, True, True, True, False),
                "+ no watcher, debug log": (True, True, True, True, True)}
    runs: dict[str, list[tuple[list[float], str]]] = {name: [] for name in variants}
    for _ in range(args.runs):  # the variants alternate, so that a change in the host's load falls on all of them
        for name, settings in variants.items():
            runs[name].append(run_once(client, args.image, *settings))
    for name, results in runs.items():
        times, cpu, throttled = ([figures[i] for figures, _ in results] for i in range(3))
        print(f"{name:<24} first request after: median {statistics.median(times):.2f} s "
              f"({' '.join(f'{t:.2f}' for t in times)}); CPU median {statistics.median(cpu):.2f} s, "
              f"throttled {statistics.median(throttled):.2f} s", flush=True)
    print_timeline(runs["+ no watcher, debug log"][-1][1])
    own = statistics.median(figures[0] for figures, _ in runs["+ no watcher"])
    start = statistics.median(container_start(args.image) for _ in range(args.runs))
    print(f"floor without a pool: gymenvs's container start (median) {start:.2f} s + OpenCode's own start-up "
          f"(+ no watcher, median) {own:.2f} s = {start + own:.2f} s")


def container_start(image: str) -> float:
    """Seconds gymenvs's runtime takes to start a container of `image` as an episode's (one CPU, no network)."""
    started = time.perf_counter()
    sandbox = shared_runtime().start(image, role="benchmark", episode_id="opencode-startup", limits=Limits(cpus=1.0))
    seconds = time.perf_counter() - started
    sandbox.remove()
    return seconds


def print_timeline(output: str) -> None:
    """The debug log's messages, as seconds since OpenCode was started, and the first request."""
    started = float(output.split("STARTED ")[1].split()[0])
    for line in output.splitlines():
        found = re.match(r'timestamp=(\S+) .*?message=("[^"]*"|\S+)', line)
        if found:
            at = datetime.fromisoformat(found.group(1).replace("Z", "+00:00")).timestamp()
            print(f"{at - started:6.3f} s  {found.group(2)}")
    print(f"{float(output.split('FIRST_REQUEST ')[1].split()[0]):6.3f} s  the first request")


if __name__ == "__main__":
    main()
