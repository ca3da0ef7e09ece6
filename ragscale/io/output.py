"""records.jsonl: written incrementally, read back for resume (every record exactly once)."""

from __future__ import annotations

import json
import os
from typing import IO, Iterable, Iterator

from ragscale.errors import UserError

RECORDS = "records.jsonl"
STATE = ".ragscale-state.json"
DERIVED = ("records.parquet", "summary.json", "summary.csv", "run.json")


def iter_records(path: str) -> Iterator[dict]:
    """Yield the output records of a records.jsonl, skipping a torn last line."""
    with open(path, "rb") as fh:
        for line in fh:
            if not line.endswith(b"\n"):
                return
            yield json.loads(line)


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


def prepare(out_dir: str, fingerprint: dict, *, resume: bool, overwrite: bool) -> set[str]:
    """Create ``out_dir`` and return the record keys already finished there.

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
    done: set[str] = set()
    if os.path.exists(records_path):
        _truncate_torn_tail(records_path)
        for rec in iter_records(records_path):
            key = (rec.get("ragscale") or {}).get("record_key")
            if key:
                done.add(key)
    return done


class RecordWriter:
    """Appends output records to records.jsonl, one flush per batch, never a key twice."""

    def __init__(self, out_dir: str, done: set[str]):
        self.path = os.path.join(out_dir, RECORDS)
        self.fh: IO[str] = open(self.path, "a", encoding="utf-8")
        self.seen = set(done)
        self.written = 0
        self.errors = 0
        self.duplicates = 0

    def write(self, records: Iterable[dict]) -> None:
        for rec in records:
            key = rec["ragscale"]["record_key"]
            if key in self.seen:
                self.duplicates += 1
                continue
            self.seen.add(key)
            self.fh.write(json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n")
            self.written += 1
            self.errors += rec.get("error") is not None
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()

