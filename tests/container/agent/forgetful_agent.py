"""A test agent (stdlib only) that rewrites its history once: request 3 replaces the conversation with a
summary, as agents that truncate or summarise their context do. It exits 0 after its fourth reply."""

import json
import os
import urllib.request


def chat(messages):
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps({"model": os.environ["OPENAI_MODEL"], "messages": messages}).encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())["choices"][0]["message"]


messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say something."}]
for turn in range(4):
    reply = chat(messages)
    if turn == 1:  # forget everything but a summary
        messages = [messages[0], {"role": "user", "content": "Summary so far: two replies. Say more."}]
    else:
        messages += [{"role": "assistant", "content": reply.get("content")}, {"role": "user", "content": "More."}]
