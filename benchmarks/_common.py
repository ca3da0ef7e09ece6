"""Shared by the benchmarks: JSON output to stdout and, optionally, a file."""

from __future__ import annotations

import json
import os


def emit(result: dict, out: str | None) -> None:
    """Print ``result`` as indented JSON and write it to ``out`` when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as fh:
            fh.write(text + "\n")
