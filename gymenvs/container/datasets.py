"""Dataset rows for any task family, through `datasets`: a local .json/.jsonl/.parquet file or a Hub dataset,
with one rule for which split a dataset of several splits means."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

LOCAL_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}


def load_rows(source: str | Path, split: str | None) -> Sequence[Mapping[str, Any]]:
    """The rows of a local .json/.jsonl/.parquet file, or of a Hub dataset named `source`."""
    try:
        import datasets
    except ImportError as exc:
        raise ImportError("task datasets need the datasets package: pip install 'gymenvs[swe]'") from exc
    path = Path(source).expanduser()
    if path.suffix in LOCAL_FORMATS or path.exists():
        if not path.is_file():
            raise ValueError(f"dataset file {str(path)!r} does not exist")
        builder = LOCAL_FORMATS.get(path.suffix)
        if builder is None:
            raise ValueError(f"dataset file {str(path)!r}: expected a {', '.join(LOCAL_FORMATS)} file")
        return datasets.load_dataset(builder, data_files=str(path), split=split or "train")
    loaded = datasets.load_dataset(str(source), split=split) if split else datasets.load_dataset(str(source))
    return default_split(loaded, str(source)) if isinstance(loaded, datasets.DatasetDict) else loaded


def default_split(splits: Mapping[str, Any], source: str) -> Any:
    """The split a dataset means when none is named: its only one, else "test"; `ValueError` otherwise."""
    if len(splits) == 1:
        return next(iter(splits.values()))
    if "test" in splits:
        return splits["test"]
    raise ValueError(f"dataset {source!r} has splits {sorted(splits)}: pass split=...")
