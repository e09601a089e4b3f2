"""An agent that only calls: GYMENVS_PINGS chat requests over one keep-alive connection (stdlib only)."""

import http.client
import json
import os
import urllib.parse

url = urllib.parse.urlparse(os.environ["OPENAI_BASE_URL"])
connection = http.client.HTTPConnection(url.hostname, url.port)
headers = {"Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", ""), "Content-Type": "application/json"}
body = json.dumps({"model": os.environ.get("OPENAI_MODEL", "m"), "messages": [{"role": "user", "content": "ping"}]})
for _ in range(int(os.environ.get("GYMENVS_PINGS", "1000"))):
    connection.request("POST", url.path.rstrip("/") + "/chat/completions", body, headers)
    reply = json.loads(connection.getresponse().read())
    assert reply["choices"][0]["message"]["content"] == "pong", reply
