"""gymenvs' reference coding agent: a bash-tool loop with a submit action (stdlib only, python3 >= 3.6).

It runs inside the task container and talks to an OpenAI-compatible chat-completions endpoint.
Environment variables it reads:

    OPENAI_BASE_URL          the endpoint, e.g. http://127.0.0.1:PORT/v1 (on the container's loopback)
    OPENAI_API_KEY           sent as "Authorization: Bearer ..." (the episode's token)
    OPENAI_MODEL             the model name it asks for (default "gymenvs-policy")
    GYMENVS_TASK_FILE        the file holding the problem statement
    GYMENVS_WORKDIR          the repository (default /testbed)
    GYMENVS_COMMAND_TIMEOUT  seconds one bash command may run (default 60)
    GYMENVS_OUTPUT_LIMIT     characters of a command's output it shows the model (default 10000)
    GYMENVS_TASK_STYLE       "terminal" (default: a task to do in the container, checked by tests of its state)
                             or "repository" (an issue to resolve in a git repository: the SWE family's)

Exit status: 0 after `submit`, 3 when the endpoint cannot be reached or refuses a request.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

SYSTEM_PROMPT = """You are an autonomous software engineer working in a git repository at {workdir}.
Use the `bash` tool to inspect the code, edit files and run commands: each call runs in a fresh \
`bash -c` in {workdir} (cd and variables do not carry over), stopped after {timeout} s; long output \
is cut in the middle. When the issue is resolved, call `submit`: your changes to the repository \
(its git diff) are then graded by tests you do not see. Make one tool call per reply."""

TERMINAL_PROMPT = """You are an autonomous agent working in a Linux container, in {workdir}.
Use the `bash` tool to inspect the system, edit files and run commands: each call runs in a fresh \
`bash -c` in {workdir} (cd and variables do not carry over), stopped after {timeout} s; long output \
is cut in the middle. When the task is done, call `submit`: the state of the container is then \
checked by tests you do not see. Make one tool call per reply."""
#: Each task style's system prompt and how it frames the task file's text.
STYLES = {
    "repository": (SYSTEM_PROMPT, "Resolve this issue:\n\n<issue>\n{task}\n</issue>"),
    "terminal": (TERMINAL_PROMPT, "{task}"),
}

# Written out (the agent runs on the stdlib alone): what `@tool` makes for bash(command: str) and submit();
# tests/trl/test_tool_schema_paths.py checks that they stay so.
TOOLS = [
    {"type": "function", "function": {
        "name": "bash",
        "description": "Run a bash command in the repository and return its output and exit code.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The command line."}},
                       "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "submit",
        "description": "Finish: submit your changes to the repository for grading.",
        "parameters": {"type": "object", "properties": {}}}},
]
FENCED_BASH = re.compile(r"```(?:bash|sh)\s*\n(.*?)```", re.DOTALL)


def setting(name, default):
    return os.environ.get(name) or default


def chat(messages):
    url = setting("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1").rstrip("/") + "/chat/completions"
    body = json.dumps({"model": setting("OPENAI_MODEL", "gymenvs-policy"), "messages": messages, "tools": TOOLS}).encode()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + setting("OPENAI_API_KEY", "none")}
    for attempt in range(3):
        try:
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            with urllib.request.urlopen(request, timeout=float(setting("GYMENVS_HTTP_TIMEOUT", "86400"))) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:2000]
            fail(f"the endpoint refused the request (HTTP {exc.code}): {detail}")
        except (urllib.error.URLError, OSError) as exc:
            error = exc
            time.sleep(0.2 * (attempt + 1))
    fail(f"cannot reach the model endpoint {url}: {error}")


def fail(message):
    sys.stderr.write(f"reference agent: {message}\n")
    sys.exit(3)


def run_bash(command):
    timeout = float(setting("GYMENVS_COMMAND_TIMEOUT", "60"))
    process = subprocess.Popen(["bash", "-c", command], cwd=setting("GYMENVS_WORKDIR", "/testbed"), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
        status = f"[exit code: {process.returncode}]"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        status = f"[timed out after {timeout:g} s: the command was stopped]"
    text = output.decode("utf-8", "replace")
    limit = int(setting("GYMENVS_OUTPUT_LIMIT", "10000"))
    if len(text) > limit:
        text = text[: limit // 2] + f"\n[... {len(text) - limit} characters cut ...]\n" + text[-limit // 2:]
    return (text or "(no output)\n") + ("" if text.endswith("\n") else "\n") + status


def act(call):
    """The output of one tool call, or None for `submit`."""
    function = call.get("function") or {}
    name = function.get("name")
    if name == "submit":
        return None
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError as exc:
        return f'Invalid arguments (not JSON: {exc}). Call bash with {{"command": "..."}}.'
    if name != "bash":
        return f"Unknown tool {name!r}: the tools are bash(command) and submit()."
    if not isinstance(arguments, dict) or not isinstance(arguments.get("command"), str) or not arguments["command"].strip():
        return "bash needs a non-empty \"command\" string."
    return run_bash(arguments["command"])


def main():
    workdir = setting("GYMENVS_WORKDIR", "/testbed")
    with open(setting("GYMENVS_TASK_FILE", "/run/gymenvs/task.md"), encoding="utf-8") as task_file:
        task = task_file.read()
    system, frame = STYLES.get(setting("GYMENVS_TASK_STYLE", "terminal"), STYLES["terminal"])
    messages = [
        {"role": "system", "content": system.format(workdir=workdir, timeout=setting("GYMENVS_COMMAND_TIMEOUT", "60"))},
        {"role": "user", "content": frame.format(task=task.strip())},
    ]
    while True:
        reply = chat(messages)["choices"][0]["message"]
        calls = reply.get("tool_calls") or []
        assistant = {"role": "assistant", "content": reply.get("content")}
        if calls:
            assistant["tool_calls"] = calls
        messages.append(assistant)
        if not calls:
            fenced = FENCED_BASH.search(reply.get("content") or "")
            no_call = "No tool call found. Call `bash` with a command, or `submit` when done."
            output = run_bash(fenced.group(1)) if fenced else no_call
            messages.append({"role": "user", "content": output})
            continue
        for call in calls:
            output = act(call)
            if output is None:
                print("reference agent: submitted")
                return 0
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": output})


if __name__ == "__main__":
    sys.exit(main())
