"""A local OpenAI chat-completions server backed by the real tiny model, the black-box tests' upstream."""

from __future__ import annotations

import threading
import time
import uuid

from tests.json_server_support import LocalJSONServer


class TinyChatServer(LocalJSONServer):
    """Serves POST /v1/chat/completions by rendering the messages with the tokenizer's chat template and
    sampling from the model. Every exchange is kept in `exchanges` as (request, response)."""

    def __init__(self, model, tokenizer, model_name: str = "tiny-qwen2", max_prompt_tokens: int = 2048):
        from wrappers.trl.generation.transformers import TransformersGenerator

        self.tokenizer = tokenizer
        self.model_name = model_name
        self.max_prompt_tokens = max_prompt_tokens
        self.generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id)
        self.exchanges: list[tuple[dict, dict]] = []
        self._lock = threading.Lock()
        self.base_url = self.start() + "/v1"

    def route(self, method: str, path: str, body: dict | None) -> tuple[int, dict]:
        if method == "POST" and path == "/v1/chat/completions":
            return self.complete(body)
        return 404, {"error": "no route"}

    def complete(self, body: dict) -> tuple[int, dict]:
        if body.get("model") != self.model_name:
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}}
        prompt = self.tokenizer.apply_chat_template(body["messages"], tools=body.get("tools"), add_generation_prompt=True,
                                                    tokenize=True, return_dict=True)["input_ids"][-self.max_prompt_tokens:]
        with self._lock:
            completion = self.generator.generate([prompt], [body.get("max_tokens") or 24])[0]
        text = self.tokenizer.decode(completion.token_ids, skip_special_tokens=True)
        response = {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": self.model_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": completion.finish_reason}],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(completion.token_ids),
                      "total_tokens": len(prompt) + len(completion.token_ids)},
        }
        self.exchanges.append((body, response))
        return 200, response
