"""records.jsonl: written incrementally, read back for resume (every record exactly once)."""

from __future__ import annotations

import json
import os
from typing import IO, Iterable, Iterator, Sequence

import numpy as np

from ragscale.errors import UserError
from ragscale.io.inputs import KEY_LINE_BITS, InputFile, PointerArray

RECORDS = "records.jsonl"
STATE = ".ragscale-state.json"
DERIVED = ("records.parquet", "summary.json", "summary.csv", "run.json")


def iter_records(path: str, columns: dict[str, str] | None = None) -> Iterator[dict]:
    """Yield the output records of a records.jsonl, skipping a torn last line; ``columns`` (the
    run's column_map) reads each through the user's column names (ragscale.columns ``remap``), so
    the sinks find the question, answer, passages and reference where the readers put them."""
    from ragscale.columns import remap

    with open(path, "rb") as fh:
        for line in fh:
            if not line.endswith(b"\n"):
                return
            rec = json.loads(line)
            yield remap(rec, columns) if columns else rec


def run_columns(run_dir: str) -> dict[str, str]:
    """The column_map a finished run read its inputs with (run.json's ``config.columns``), {} if none."""
    try:
        with open(os.path.join(run_dir, "run.json")) as fh:
            columns = (json.load(fh).get("config") or {}).get("columns") or {}
    except (OSError, ValueError):
        return {}
    return {f: c for f, c in columns.items() if isinstance(c, str)} if isinstance(columns, dict) else {}


def _truncate_torn_tail(path: str) -> int:
    """Cut a partial last line (a run killed mid-write); returns the bytes removed."""
    with open(path, "rb+") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if size == 0:
            return 0
        pos = size
        while pos > 0:
            step = min(65536, pos)
            fh.seek(pos - step)
            chunk = fh.read(step)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                keep = pos - step + nl + 1
                break
            pos -= step
        else:
            keep = 0
        if keep < size:
            fh.truncate(keep)
        return size - keep


def prepare(out_dir: str, fingerprint: dict, *, resume: bool, overwrite: bool) -> None:
    """Create ``out_dir`` for a run: keep a previous run's records.jsonl to resume from
    (its torn last line cut off; ``finished_keys`` lists what it holds) or remove it.

    A previous run with another configuration (metrics, encoder, inputs) is not mixed in:
    that is a UserError unless ``overwrite`` is set, which starts afresh.
    """
    os.makedirs(out_dir, exist_ok=True)
    state_path = os.path.join(out_dir, STATE)
    records_path = os.path.join(out_dir, RECORDS)
    previous = None
    if os.path.exists(state_path):
        with open(state_path) as fh:
            previous = json.load(fh)
    if overwrite or not resume:
        for name in (RECORDS, *DERIVED):
            p = os.path.join(out_dir, name)
            if os.path.exists(p):
                os.remove(p)
        previous = None
    elif previous is not None and previous != fingerprint:
        changed = sorted(k for k in set(previous) | set(fingerprint) if previous.get(k) != fingerprint.get(k))
        raise UserError(
            f"output_dir {out_dir} holds a run with a different configuration ({', '.join(changed)}); "
            "use another output_dir or overwrite=true"
        )
    with open(state_path, "w") as fh:
        json.dump(fingerprint, fh, indent=1, sort_keys=True)
    if os.path.exists(records_path):
        _truncate_torn_tail(records_path)


def finished_keys(out_dir: str) -> Iterator[str]:
    """The record keys already in ``out_dir``'s records.jsonl, streamed."""
    path = os.path.join(out_dir, RECORDS)
    if os.path.exists(path):
        for rec in iter_records(path):
            key = (rec.get("ragscale") or {}).get("record_key")
            if key:
                yield key


class RecordKeys:
    """Which records of a run are finished: one flag per record the run expects, found by
    binary search on their sorted ``key_code``s (9 bytes a record, not a set of strings),
    plus a set for keys outside the run (an earlier run's records beyond ``limit``, or of
    inputs no longer given)."""

    def __init__(self, files: Sequence[InputFile], pointers: PointerArray):
        self._file = {f.tag: i for i, f in enumerate(files)}
        self._codes = np.unique(pointers.codes())
        self._done = np.zeros(len(self._codes), dtype=bool)
        self.other: set[str] = set()

    def _pos(self, key: str) -> int | None:
        tag, _, line = key.rpartition(":")
        fi = self._file.get(tag)
        if fi is None or not line.isdigit() or int(line) >= 1 << KEY_LINE_BITS:
            return None
        code = (fi << KEY_LINE_BITS) | int(line)
        pos = int(np.searchsorted(self._codes, code))
        return pos if pos < len(self._codes) and self._codes[pos] == code else None

    def add(self, key: str) -> bool:
        """Mark ``key`` finished; False when it already was."""
        pos = self._pos(key)
        if pos is None:
            if key in self.other:
                return False
            self.other.add(key)
            return True
        if self._done[pos]:
            return False
        self._done[pos] = True
        return True

    def __contains__(self, key: str) -> bool:
        pos = self._pos(key)
        return key in self.other if pos is None else bool(self._done[pos])

    def done_mask(self, pointers: PointerArray) -> np.ndarray:
        """Per pointer: whether its record is finished."""
        pos = np.searchsorted(self._codes, pointers.codes())
        return self._done[np.minimum(pos, len(self._codes) - 1)] if len(self._codes) else np.zeros(0, bool)

    def expected_done(self) -> int:
        """How many of the run's expected records are finished."""
        return int(self._done.sum())




class RecordWriter:
    """Appends output records to records.jsonl, one flush per batch, never a key twice."""

    def __init__(self, out_dir: str, keys: RecordKeys | set[str]):
        self.path = os.path.join(out_dir, RECORDS)
        self.fh: IO[str] = open(self.path, "a", encoding="utf-8")
        self.seen = keys  # the finished keys, marked as records are written
        self.written = 0
        self.errors = 0
        self.duplicates = 0

    def write(self, records: Iterable[dict]) -> None:
        for rec in records:
            key = rec["ragscale"]["record_key"]
            if key in self.seen:
                self.duplicates += 1
                continue
            self.seen.add(key)  # RecordKeys.add, or set.add
            self.fh.write(json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n")
            self.written += 1
            self.errors += rec.get("error") is not None
        self.fh.flush()

    def write_lines(self, items: Iterable[tuple[str, str, bool]]) -> None:
        """Append ready lines: (record key, JSON line, has an error); a key already written is dropped."""
        for key, line, errored in items:
            if key in self.seen:
                self.duplicates += 1
                continue
            self.seen.add(key)
            self.fh.write(line + "\n")
            self.written += 1
            self.errors += errored
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()

