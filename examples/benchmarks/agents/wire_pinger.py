"""An agent that only calls, in one wire format: GYMENVS_PINGS requests over one keep-alive connection
(stdlib only). GYMENVS_WIRE = chat | responses | anthropic; GYMENVS_STREAM=1 asks for server-sent events.
Each request carries a system prompt, the task and one tool, as a coding agent's first turn does; with
GYMENVS_HISTORY_KB=N, also about N KB of earlier turns before the task, as a later turn does.
It connects to GYMENVS_ORIGIN, or to the unix socket GYMENVS_SOCKET when that is set (an agent on the host
calling its episode's channel)."""

import http.client
import json
import os
import socket
import urllib.parse

WIRE = os.environ["GYMENVS_WIRE"]
STREAM = os.environ.get("GYMENVS_STREAM") == "1"
SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
SYSTEM, TASK = "You are a benchmark agent.", "Fix the failing test."
MODEL = os.environ.get("OPENAI_MODEL", "m")
BODIES = {
    "chat": ("/v1/chat/completions", {
        "model": MODEL, "stream": STREAM, "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}],
        "tools": [{"type": "function", "function": {"name": "bash", "description": "Run a command.", "parameters": SCHEMA}}]}),
    "responses": ("/v1/responses", {
        "model": MODEL, "stream": STREAM, "instructions": SYSTEM, "input": [{"role": "user", "content": TASK}], "store": False,
        "tools": [{"type": "function", "name": "bash", "description": "Run a command.", "parameters": SCHEMA}]}),
    "anthropic": ("/v1/messages?beta=true", {
        "model": MODEL, "stream": STREAM, "max_tokens": 1024, "system": SYSTEM, "messages": [{"role": "user", "content": TASK}],
        "tools": [{"name": "bash", "description": "Run a command.", "input_schema": SCHEMA}]}),
}



class UnixConnection(http.client.HTTPConnection):
    def __init__(self, socket_path):
        super().__init__("localhost")
        self.socket_path = socket_path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.socket_path)


if os.environ.get("GYMENVS_SOCKET"):
    connection = UnixConnection(os.environ["GYMENVS_SOCKET"])
else:
    url = urllib.parse.urlparse(os.environ["GYMENVS_ORIGIN"])
    connection = http.client.HTTPConnection(url.hostname, url.port)


def with_history(body, kilobytes):
    """`body` with about `kilobytes` KB of earlier user and assistant turns before its last message."""
    turns = []
    for number in range(max(0, kilobytes)):  # a turn pair of about 1 KB each
        turns += [{"role": "user", "content": f"Output of step {number}:\n" + "x" * 500},
                  {"role": "assistant", "content": f"Step {number + 1}: " + "y" * 480}]
    key = "input" if WIRE == "responses" else "messages"
    return {**body, key: [*body[key][:-1], *turns, body[key][-1]]}


path, body = BODIES[WIRE]
body = with_history(body, int(os.environ.get("GYMENVS_HISTORY_KB", "0")))
data = json.dumps(body)
headers = {"Authorization": "Bearer " + os.environ["GYMENVS_API_KEY"], "Content-Type": "application/json"}
for _ in range(int(os.environ.get("GYMENVS_PINGS", "1000"))):
    connection.request("POST", path, data, headers)
    response = connection.getresponse()
    reply = response.read()
    assert response.status == 200 and b"bash" in reply, reply[:300]
