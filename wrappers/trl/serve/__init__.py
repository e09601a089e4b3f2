"""A vLLM-shaped inference server and what talks to it: `InferenceServer` (inference_server.py) serves
a transformers model on CPU through `InferenceEngine` (inference_engine.py); `client.py` is the one
HTTP client of such a server; `HTTPWeightTransfer` (weight_transfer.py) syncs a trainer's weights."""
