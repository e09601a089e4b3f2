"""Shared set-up for the TRL bridge tests: offline, quiet, and a tiny model built in-process.

The tests sit in rooms that mirror wrappers/trl (rollout/, generation/, serve/, async_grpo/, extras/). No folder
under tests/trl is a package (a `tests/trl/__init__.py` would shadow the real `trl` library), so pytest's default
"prepend" import mode puts each folder it imports a module from at the front of sys.path: the folder of each test
file, and tests/trl itself, because this conftest lives there. That is how a test in any room imports the support
modules shared by several rooms by their bare names (`from bridge_support import ...`, `from async_support
import ...`), and a room's own support module (rollout/infra_support.py) likewise. It is also why every test file's
basename must be unique across tests/.
"""

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
