"""CPU and offline support for tests, examples and benchmarks: a tiny model and tokenizer that run
without a download, taught to call tools (tiny_model.py). Not needed to train a real model."""
