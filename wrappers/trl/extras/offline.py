"""The set-up every CPU example and benchmark shares: no Hub access, and quiet libraries.

Call `run_offline_and_quietly()` before importing transformers or trl (the Hub switches are read at
their import): the tiny model needs no download, and the warnings it silences are known noise.
"""

from __future__ import annotations

import os
import warnings

#: Environment variables that keep the Hugging Face libraries off the network and silence TRL's
#: banner on importing `trl.experimental`.
OFFLINE_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRL_EXPERIMENTAL_SILENCE": "1",
}


def run_offline_and_quietly(*, seedless_rows: bool = False) -> None:
    """Set `OFFLINE_ENVIRONMENT`, ignore the FutureWarnings trl 1.16 triggers in transformers 5 (its
    gradient-checkpointing calls), and log only transformers' errors. `seedless_rows=True` also
    ignores the bridge's note that rows without a seed column are told apart by group: for demos
    whose dataset has none on purpose."""
    os.environ.update(OFFLINE_ENVIRONMENT)
    warnings.filterwarnings("ignore", message=".*is deprecated and will be removed in v6", category=FutureWarning)
    if seedless_rows:
        warnings.filterwarnings("ignore", message=".*nothing in them tells episodes apart", category=UserWarning)
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
