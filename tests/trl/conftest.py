"""Shared set-up for the TRL bridge tests: offline, quiet, and a tiny model built in-process."""

import os

# Set before transformers, datasets or trl are imported: nothing may be fetched from a hub here.
os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import copy  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def model_and_tokenizer(_tiny):
    """A fresh copy of the randomly initialised tiny model (`_tiny`, tests/conftest.py), and its tokenizer."""
    model, tokenizer = _tiny
    return copy.deepcopy(model), copy.deepcopy(tokenizer)


@pytest.fixture(autouse=True)
def _seeded_torch():
    """Sampling is random: each test starts from the same torch seed, so its samples are reproducible."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234)
        yield
