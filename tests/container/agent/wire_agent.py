"""A test agent (stdlib only) speaking one wire format, as the CLIs do: GYMENVS_WIRE = chat | responses |
anthropic, streamed when GYMENVS_STREAM=1. It makes side calls first (a title call on the side model;
Anthropic: a token count; Responses: a Codex-style compaction marked in its header), then main turns
with one tool, `bash`, running every call of a reply (parallel calls too) until a reply has no tool
call; it prints that text and exits 0. GYMENVS_MALFORMED=1: its second main request is malformed.
It reaches the channel at GYMENVS_ORIGIN, or at the unix socket GYMENVS_SOCKET when that is set (an agent on the
host: tests/trl/rollout/host_agent_support.py)."""

import http.client
import json
import os
import socket
import subprocess
import urllib.request

WIRE = os.environ["GYMENVS_WIRE"]
STREAM = os.environ.get("GYMENVS_STREAM") == "1"
SYSTEM = "You are the wire test agent."
SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "anthropic": "/v1/messages?beta=true"}


def post(path, body, headers=None):
    key = os.environ["GYMENVS_API_KEY"]
    auth = {"x-api-key": key, "anthropic-version": "2023-06-01"} if WIRE == "anthropic" else {"Authorization": "Bearer " + key}
    headers = {**auth, "Content-Type": "application/json", **(headers or {})}
    data = send(path, json.dumps(body).encode(), headers)
    if not body.get("stream"):
        return json.loads(data)
    events = [json.loads(line[6:]) for line in data.decode().split("\n") if line.startswith("data: ") and line != "data: [DONE]"]
    return {"chat": chat_from_chunks, "responses": response_from_events, "anthropic": message_from_events}[WIRE](events)


def send(path, data, headers):
    if "GYMENVS_SOCKET" not in os.environ:
        request = urllib.request.Request(os.environ["GYMENVS_ORIGIN"] + path, data=data, headers=headers)
        with urllib.request.urlopen(request) as response:
            return response.read()
    connection = UnixConnection(os.environ["GYMENVS_SOCKET"])
    try:
        connection.request("POST", path, data, headers)
        response = connection.getresponse()
        assert response.status == 200, (response.status, response.read())
        return response.read()
    finally:
        connection.close()


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.socket_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.socket_path)


def chat_from_chunks(chunks):
    message, calls = {"role": "assistant", "content": ""}, {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            message["content"] += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                entry = calls.setdefault(call["index"], {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                entry["id"] = call.get("id") or entry["id"]
                entry["function"]["name"] += call.get("function", {}).get("name") or ""
                entry["function"]["arguments"] += call.get("function", {}).get("arguments") or ""
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {"choices": [{"message": message}]}


def response_from_events(events):
    assert [e["sequence_number"] for e in events] == list(range(len(events))), "sequence numbers"
    return events[-1]["response"]


def message_from_events(events):
    message = dict(events[0]["message"])
    blocks = []
    for event in events[1:]:
        if event["type"] == "content_block_start":
            blocks.append(dict(event["content_block"], _json=""))
        elif event["type"] == "content_block_delta":
            delta, block = event["delta"], blocks[event["index"]]
            kind = delta["type"]
            if kind == "text_delta":
                block["text"] += delta["text"]
            elif kind == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif kind == "signature_delta":
                block["signature"] = delta["signature"]
            elif kind == "input_json_delta":
                block["_json"] += delta["partial_json"]
        elif event["type"] == "message_delta":
            message["stop_reason"] = event["delta"]["stop_reason"]
    for block in blocks:
        raw = block.pop("_json")
        if block["type"] == "tool_use":
            block["input"] = json.loads(raw or "{}")
    message["content"] = blocks
    return message


def run(command):
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
    return done.stdout + done.stderr


def side_calls(task):
    side_model = os.environ["GYMENVS_SIDE_MODEL"]
    title = [{"role": "user", "content": "Generate a title for this conversation:\n" + task}]
    if WIRE == "anthropic":
        print("tokens:", post("/v1/messages/count_tokens", {"model": "policy", "messages": title})["input_tokens"])
        post(PATHS[WIRE], {"model": side_model, "max_tokens": 16, "messages": title, "stream": STREAM})
    elif WIRE == "responses":
        post(PATHS[WIRE], {"model": side_model, "input": title, "stream": STREAM})
        post(PATHS[WIRE], {"model": "policy", "input": title, "tools": [], "stream": STREAM},
             headers={"x-codex-turn-metadata": json.dumps({"request_kind": "compaction"})})
    else:
        post(PATHS[WIRE], {"model": side_model, "messages": title, "stream": STREAM})


def main():
    task = open(os.environ["GYMENVS_TASK_FILE"]).read()
    side_calls(task)
    state = {"chat": Chat, "responses": Responses, "anthropic": Anthropic}[WIRE](task)
    for turn in range(20):
        if turn == 1 and os.environ.get("GYMENVS_MALFORMED") == "1":
            post(PATHS[WIRE], {"model": "policy", "messages": "not a list", "input": 7, "stream": STREAM})
        text, calls = state.turn()
        if not calls:
            print("final:", text)
            return
        state.results([(call_id, run(json.loads(arguments)["command"])) for call_id, arguments in calls])


class Chat:
    def __init__(self, task):
        self.messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]

    def turn(self):
        tools = [{"type": "function", "function": {"name": "bash", "description": "Run a command.", "parameters": SCHEMA}}]
        body = {"model": "policy", "messages": self.messages, "tools": tools, "stream": STREAM}
        if STREAM:
            body["stream_options"] = {"include_usage": True}
        message = post(PATHS["chat"], body)["choices"][0]["message"]
        self.messages.append(message)
        return message.get("content"), [(c["id"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]

    def results(self, outputs):
        self.messages += [{"role": "tool", "tool_call_id": call_id, "content": output} for call_id, output in outputs]


class Responses:
    """Chains turns with previous_response_id, sending only the new items."""

    def __init__(self, task):
        self.input = [{"role": "user", "content": [{"type": "input_text", "text": task}]}]
        self.previous = None

    def turn(self):
        tools = [{"type": "function", "name": "bash", "description": "Run a command.", "parameters": SCHEMA, "strict": False}]
        body = {"model": "policy", "instructions": SYSTEM, "input": self.input, "tools": tools, "stream": STREAM,
                "store": False, "previous_response_id": self.previous}
        response = post(PATHS["responses"], body)
        self.previous = response["id"]
        text = "".join(part["text"] for item in response["output"] if item["type"] == "message" for part in item["content"])
        return text, [(item["call_id"], item["arguments"]) for item in response["output"] if item["type"] == "function_call"]

    def results(self, outputs):
        self.input = [{"type": "function_call_output", "call_id": call_id, "output": output} for call_id, output in outputs]


class Anthropic:
    def __init__(self, task):
        self.messages = [{"role": "user", "content": [{"type": "text", "text": task, "cache_control": {"type": "ephemeral"}}]}]

    def turn(self):
        tools = [{"name": "bash", "description": "Run a command.", "input_schema": SCHEMA}]
        max_tokens = int(os.environ.get("GYMENVS_MAX_TOKENS", "4096"))
        body = {"model": "policy", "max_tokens": max_tokens, "system": [{"type": "text", "text": SYSTEM}],
                "messages": self.messages, "tools": tools, "stream": STREAM}
        message = post(PATHS["anthropic"], body)
        self.messages.append({"role": "assistant", "content": message["content"]})
        text = "".join(block["text"] for block in message["content"] if block["type"] == "text")
        calls = [(b["id"], json.dumps(b["input"])) for b in message["content"] if b["type"] == "tool_use"]
        assert (message["stop_reason"] == "tool_use") == bool(calls), message["stop_reason"]
        return text, calls

    def results(self, outputs):
        self.messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": output}
                                                          for call_id, output in outputs]})


if __name__ == "__main__":
    main()
