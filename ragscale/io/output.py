"""records.jsonl: written incrementally, read back for resume (every record exactly once)."""

from __future__ import annotations

import hashlib
import json
import os
from typing import IO, Any, Iterable, Iterator, Sequence

import numpy as np

from ragscale.errors import UserError
from ragscale.io.inputs import KEY_LINE_BITS, InputFile, PointerArray

RECORDS = "records.jsonl"
STATE = ".ragscale-state.json"
DERIVED = ("records.parquet", "summary.json", "summary.csv", "run.json")
IDENTITIES = "input_files"  # the state's key of the inputs' identities (input_identity)
HASH_CHUNK = 1 << 20


def iter_records(path: str, columns: dict[str, str] | None = None) -> Iterator[dict]:
    """Yield the output records of a records.jsonl, skipping a torn last line (a run killed
    mid-write; ``prepare`` cuts it) and blank lines; ``columns`` (the run's column_map) reads each
    through the user's column names (ragscale.columns ``remap``), so the sinks find the question,
    answer, passages and reference where the readers put them. A torn line elsewhere is a
    UserError naming the file, the line and the fix: it is not repaired, since a line cut in the
    middle of the file means the file was written by something else than one run's writer."""
    from ragscale.columns import remap

    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.endswith(b"\n"):
                return
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                raise UserError(f"{path} line {lineno} is not a complete JSON record (a write was cut?): "
                                "remove that line, or re-run with overwrite=true") from None
            yield remap(rec, columns) if columns and isinstance(rec, dict) else rec


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


def _hash_into(fh: IO[bytes], h: Any, limit: int | None = None) -> None:
    """Feed ``fh`` (at most ``limit`` bytes) to hash ``h`` in 1 MiB chunks: memory stays flat."""
    while limit is None or limit > 0:
        chunk = fh.read(HASH_CHUNK if limit is None else min(HASH_CHUNK, limit))
        if not chunk:
            return
        h.update(chunk)
        if limit is not None:
            limit -= len(chunk)


def input_identity(path: str, prefix: int | None = None) -> dict:
    """What resume compares of an input file: its ``size``, ``mtime_ns`` (recorded, not compared:
    a copy or a ``touch`` changes it) and ``sha256``, streamed (docs/fault-tolerance.md has its
    cost). ``prefix``, an earlier size smaller than the file's: also ``prefix_sha256`` (the hash of
    the first ``prefix`` bytes) and ``line_end`` (the earlier content ended its last line, or the
    new bytes begin with a line end), to tell records appended to the earlier file from any other change."""
    st = os.stat(path)
    h = hashlib.sha256()
    out: dict[str, Any] = {"path": path, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    with open(path, "rb") as fh:
        if prefix is not None and 0 <= prefix < st.st_size:
            _hash_into(fh, h, prefix)
            out["prefix_sha256"] = h.hexdigest()
            fh.seek(max(prefix - 1, 0))
            out["line_end"] = prefix == 0 or b"\n" in fh.read(2)
            fh.seek(prefix)
        _hash_into(fh, h)
    out["sha256"] = h.hexdigest()
    return out


def _appendable(path: str) -> bool:
    """Whether records appended to ``path`` leave its earlier records and their keys as they were:
    JSONL and table CSVs (one record per line or row); not open-rag-eval's CSV (a row may join an
    earlier query's record) nor Parquet (its footer moves)."""
    from ragscale.io.inputs import CSV_SUFFIXES, JSONL_SUFFIXES

    if path.lower().endswith(JSONL_SUFFIXES):
        return True
    if path.lower().endswith(CSV_SUFFIXES):
        from ragscale.io.table_csv import is_orag_header

        return not is_orag_header(path)
    return False


def check_inputs(before: list, paths: Sequence[str]) -> tuple[list[dict], list[str]]:
    """Compare the inputs with their identities in a previous run's state (``before``; [] for a
    first run): (their identities now, a line per input that only grew by appended records). An
    input changed otherwise is a UserError: its record keys (file + line) would point at other
    records, so the runs are never mixed."""
    earlier = {d.get("path"): d for d in before if isinstance(d, dict)}
    now, notes = [], []
    for path in paths:
        old = earlier.get(path) or {}
        size = old.get("size") if isinstance(old.get("size"), int) else None
        ident = input_identity(path, size if size is not None and _appendable(path) else None)
        same = ident["size"] == size and ident["sha256"] == old.get("sha256")
        grew = bool(ident.get("line_end")) and ident.get("prefix_sha256") == old.get("sha256")
        if old and not same and not grew:
            raise UserError(f"input {path} changed since this output_dir's run (size/hash differ): re-run with "
                            "overwrite=true, or use another output_dir")
        if old and grew:
            notes.append(f"[ragscale] input {path} grew since this output_dir's run (lines appended): only its new "
                         "records are scored")
        now.append({k: ident[k] for k in ("path", "size", "mtime_ns", "sha256")})
    return now, notes


def _previous_state(state_path: str) -> dict | None:
    """The resume state of the run before (None: none), or a UserError for a file that is not one."""
    if not os.path.exists(state_path):
        return None
    try:
        with open(state_path) as fh:
            state = json.load(fh)
    except (OSError, ValueError) as e:
        raise UserError(f"{state_path} cannot be read ({type(e).__name__}): re-run with overwrite=true, or use "
                        "another output_dir") from None
    if not isinstance(state, dict):
        raise UserError(f"{state_path} is not a ragscale resume state: re-run with overwrite=true, or use another "
                        "output_dir")
    return state


def prepare(out_dir: str, fingerprint: dict, *, resume: bool, overwrite: bool) -> list[str]:
    """Create ``out_dir`` for a run (the caller holds its lock: ragscale.io.lock): keep a previous
    run's records.jsonl to resume from (its torn last line cut off; ``finished_keys`` lists what it
    holds) or remove it. Returns the lines to print (inputs that grew by appended records).

    A previous run with another configuration (metrics, encoder, inputs), or over inputs whose
    content changed (``check_inputs``: the state records each input's size and sha256), is not
    mixed in: that is a UserError unless ``overwrite`` is set, which starts afresh. A state written
    before input identities were recorded resumes with a warning (its inputs cannot be compared).
    """
    os.makedirs(out_dir, exist_ok=True)
    state_path = os.path.join(out_dir, STATE)
    records_path = os.path.join(out_dir, RECORDS)
    previous = None if overwrite or not resume else _previous_state(state_path)
    if overwrite or not resume:
        for name in (RECORDS, *DERIVED):
            p = os.path.join(out_dir, name)
            if os.path.exists(p):
                os.remove(p)
    config = {k: v for k, v in (previous or {}).items() if k != IDENTITIES}
    if previous is not None and config != fingerprint:
        changed = sorted(k for k in set(config) | set(fingerprint) if config.get(k) != fingerprint.get(k))
        raise UserError(
            f"output_dir {out_dir} holds a run with a different configuration ({', '.join(changed)}); "
            "use another output_dir or overwrite=true"
        )
    state, notes = dict(fingerprint), []
    if isinstance(fingerprint.get("inputs"), list):
        before = (previous or {}).get(IDENTITIES)
        if previous is not None and not isinstance(before, list):
            notes.append(f"[ragscale] warning: {state_path} predates input checks: resuming without comparing "
                         "the inputs (re-run with overwrite=true if they changed)")
        state[IDENTITIES], grown = check_inputs(before if isinstance(before, list) else [], fingerprint["inputs"])
        notes += grown
    with open(state_path, "w") as fh:
        json.dump(state, fh, indent=1, sort_keys=True)
    if os.path.exists(records_path):
        _truncate_torn_tail(records_path)
    return notes


def finished_keys(out_dir: str) -> Iterator[str]:
    """The record keys already in ``out_dir``'s records.jsonl, streamed."""
    path = os.path.join(out_dir, RECORDS)
    if os.path.exists(path):
        for rec in iter_records(path):
            key = (rec.get("ragscale") or {}).get("record_key") if isinstance(rec, dict) else None
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

