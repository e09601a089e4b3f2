"""A local OpenAI chat-completions server backed by the real tiny model, the black-box tests' upstream."""

from __future__ import annotations

import http.server
import json
import threading
import time
import uuid


class TinyChatServer:
    """Serves POST /v1/chat/completions by rendering the messages with the tokenizer's chat template and
    sampling from the model. Every exchange is kept in `exchanges` as (request, response)."""

    def __init__(self, model, tokenizer, model_name: str = "tiny-qwen2", max_prompt_tokens: int = 2048):
        from wrappers.trl.generation import TransformersGenerator

        self.tokenizer = tokenizer
        self.model_name = model_name
        self.max_prompt_tokens = max_prompt_tokens
        self.generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id)
        self.exchanges: list[tuple[dict, dict]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, payload = server.complete(body) if self.path == "/v1/chat/completions" else (404, {"error": "no route"})
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def complete(self, body: dict) -> tuple[int, dict]:
        if body.get("model") != self.model_name:
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}}
        prompt = self.tokenizer.apply_chat_template(body["messages"], tools=body.get("tools"), add_generation_prompt=True,
                                                    tokenize=True, return_dict=True)["input_ids"][-self.max_prompt_tokens:]
        with self._lock:
            completion = self.generator.generate([prompt], [body.get("max_tokens") or 24])[0]
        text = self.tokenizer.decode(completion.token_ids, skip_special_tokens=True)
        response = {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()), "model": self.model_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": completion.finish_reason}],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(completion.token_ids),
                      "total_tokens": len(prompt) + len(completion.token_ids)},
        }
        self.exchanges.append((body, response))
        return 200, response

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
