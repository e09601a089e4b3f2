"""OpenCode started ahead of its task, as a warm pool starts it (stdlib only, any python3 >= 3.6).

    python3 opencode_ahead.py OPENCODE [ARGUMENT ...] < TASK

`opencode run` creates its session, through the server it runs in its own process, only after it has read
its task, and a CLI waiting on its standard input can do nothing of that ahead. This starts OpenCode's own
server (`OPENCODE serve`, on the container's loopback), creates the session and has the server load, through
read-only calls, what it would otherwise load on the first prompt (`WARM_UP`), all before the task (or until
the task is given); then it reads the task on its standard input, sends it as the session's prompt, prints
OpenCode's answer and exits when the session has finished with it, 0 unless the answer is an error: what
`opencode run --auto` does with its in-process server. Nothing before the task makes an LLM
request: creating a session and the read-only calls make none.
"""

import json
import os
import re
import select
import shutil
import subprocess
import sys
import threading
import urllib.parse
import urllib.request

#: The permissions of `opencode run --auto`: anything allowed but asking the user, who is not there.
PERMISSIONS = [{"permission": "*", "pattern": "*", "action": "allow"},
               *({"permission": name, "pattern": "*", "action": "deny"} for name in ("question", "plan_enter", "plan_exit"))]
#: Read-only calls that have the server load, ahead, what the first prompt would: its agents, the provider, the
#: tools for the model (the shell tool finds its shell), its file search (a refresh of the project's copy; the file
#: watcher too, where it is on), its commands and skills: what its debug log showed between the prompt and the first
#: request when only the session was created ahead (docs/swe-agents.md, "OpenCode from the pool").
WARM_UP = ("/agent", "/config/providers", "/experimental/tool?provider=gymenvs&model={model}", "/find/file?query=.",
           "/command", "/skill")

#: Calls to the server never go through a proxy the environment may name.
_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Server:
    """OpenCode's server on 127.0.0.1, called over HTTP with JSON bodies."""

    def __init__(self, command):
        self.process = subprocess.Popen([*command, "serve", "--hostname", "127.0.0.1", "--port", "0"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        self.origin = self._listening()
        # The rest of what it prints goes on to this process's output (a pipe nobody reads would fill up).
        threading.Thread(target=shutil.copyfileobj, args=(self.process.stdout, sys.stdout.buffer), daemon=True).start()

    def _listening(self):
        """The origin the server prints once it answers: a call made before then got no answer."""
        for line in self.process.stdout:
            found = re.search(rb"listening on (http://\S+)", line)
            if found:
                return found.group(1).decode()
        sys.exit(f"opencode serve exited with {self.process.wait()}")

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.origin + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with _LOOPBACK.open(request) as response:
            return json.loads(response.read() or b"null")


def task_given():
    """Whether the task is waiting on standard input already (a container taken before its warm-up ended)."""
    return bool(select.select([sys.stdin], [], [], 0)[0])


def main():
    server = Server(sys.argv[1:])
    try:
        session = server.call("POST", "/session", {"permission": PERMISSIONS})["id"]
        for path in WARM_UP:
            if task_given():  # the first prompt loads the rest as it would have
                break
            server.call("GET", path.format(model=urllib.parse.quote(os.environ["OPENAI_MODEL"])))
        task = sys.stdin.buffer.read().decode("utf-8", "replace")
        answer = server.call("POST", f"/session/{session}/message", {"parts": [{"type": "text", "text": task}]})
        print(json.dumps(answer))
        return 1 if answer["info"].get("error") else 0
    finally:
        server.process.terminate()


if __name__ == "__main__":
    sys.exit(main())
