"""In-memory inputs for the Python API: a pandas DataFrame, a list of dicts or a Hugging Face
``datasets.Dataset`` becomes one JSONL file in the run's ``inputs/<content hash>/`` folder, which the
pipeline then reads like any other input (the records' raw JSON is parsed once there).

The folder name is a hash of the content, so a resumed run over other data in the same
output_dir is refused (its inputs differ) instead of mixing records.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any, Iterable

from ragscale.errors import UserError
from ragscale.io.lines import MAX_DEPTH, LineError, too_deep
from ragscale.record import TABLE_FORMAT


def _plain(value: Any, level: int = 0) -> Any:
    """``value`` as plain JSON types: numpy scalars and arrays, pandas' NA and NaN as null; a
    LineError when it nests deeper than the readers read (ragscale.io.lines.MAX_DEPTH)."""
    if isinstance(value, (dict, list, tuple)) and level >= MAX_DEPTH:
        raise too_deep()
    if isinstance(value, dict):
        return {str(k): _plain(v, level + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, level + 1) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # numpy arrays and scalars
        return _plain(value.tolist(), level)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is not None and type(value).__name__ in ("NAType", "NaTType"):
        return None
    if hasattr(value, "isoformat"):  # timestamps
        return value.isoformat()
    return value


def rows_of(data: Any) -> Iterable[dict]:
    """The records of ``data``: a DataFrame's rows, a Dataset's rows, or the dicts of a list."""
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # pandas.DataFrame
        return data.to_dict(orient="records")
    if hasattr(data, "column_names") and hasattr(data, "features"):  # datasets.Dataset
        return iter(data)
    if isinstance(data, (list, tuple)):
        return data
    raise UserError(f"data must be a path, a list of paths, a pandas DataFrame, a list of dicts or a datasets.Dataset; "
                    f"got {type(data).__name__}")


def is_in_memory(data: Any) -> bool:
    """Whether ``data`` is records in memory (not a path or a list of paths)."""
    if data is None or isinstance(data, (str, os.PathLike)):
        return False
    if isinstance(data, (list, tuple)):
        return not all(isinstance(d, (str, os.PathLike)) for d in data) or not data
    return True


def is_written(path: str) -> bool:
    """Whether ``path`` is in-memory data written by ``write_jsonl`` (``.../inputs/<12 hex>/<stem>.jsonl``):
    messages then speak of "the data", not of a file the user never wrote."""
    parent = os.path.dirname(os.path.abspath(path))
    digest = os.path.basename(parent)
    return os.path.basename(os.path.dirname(parent)) == "inputs" and len(digest) == 12 and \
        all(c in "0123456789abcdef" for c in digest)


def write_jsonl(data: Any, folder: str, stem: str = "data") -> str:
    """Write the records of ``data`` to ``folder/<content hash>/<stem>.jsonl``; returns the path.
    Records without a ``model_id`` are attributed to model ``<stem>``."""
    lines = []
    for i, row in enumerate(rows_of(data)):
        if not isinstance(row, dict):
            raise UserError(f"data record {i} must be a mapping of fields, got {type(row).__name__}")
        try:
            line = json.dumps(_plain(row), ensure_ascii=False, allow_nan=False, default=str)
            line.encode("utf-8")
        except (LineError, UnicodeEncodeError) as e:  # that record's input error (ragscale.record.extract_fields)
            why = e if isinstance(e, LineError) else "holds a lone surrogate (not text any output can hold)"
            line = json.dumps({"format": TABLE_FORMAT, "input_error": f"data record {i}: {why}"})
        lines.append(line)
    if not lines:
        raise UserError("data has no records")
    text = "\n".join(lines) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    os.makedirs(os.path.join(folder, digest), exist_ok=True)
    path = os.path.join(folder, digest, f"{stem}.jsonl")
    if not os.path.exists(path):
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(path + ".tmp", path)
    return path
