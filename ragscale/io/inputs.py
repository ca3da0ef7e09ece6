"""Input discovery and record pointers (MT-RAG JSONL, Parquet, open-rag-eval CSV).

The driver scans the inputs once into small pointers (file, line, byte offset); the
records themselves are read inside the pipeline's first stage, so the driver never
holds the data. In a sweep (several files) pointers are ordered by task so that every
model's response to a task lands in the same batch and the task's reference and
passages are encoded once.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from ragscale.errors import UserError

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
PARQUET_SUFFIXES = (".parquet", ".pq")
CSV_SUFFIXES = (".csv",)


@dataclass(frozen=True)
class InputFile:
    path: str  # absolute
    fmt: str  # jsonl | parquet | csv (open-rag-eval's) | table (a CSV of one record per row)
    stem: str  # default model_id
    tag: str  # short stable id used in record keys
    data: str | None = None  # csv, table: the normalized JSONL the pipeline reads (see materialize_csv)
    columns: tuple[tuple[str, str], ...] = ()  # (field, the user's column) pairs (ragscale.columns)

    @property
    def read_path(self) -> str:
        return self.data or self.path

    @property
    def read_fmt(self) -> str:
        return "jsonl" if self.fmt in ("csv", "table") else self.fmt

    @property
    def column_map(self) -> dict[str, str]:
        """The user's column names by field (empty: the layouts' own names)."""
        return dict(self.columns)

    def column(self, field: str) -> str:
        """The name this file's records give ``field`` (``task_id`` unless mapped)."""
        return self.column_map.get(field, field)


def _fmt(path: str) -> str | None:
    low = path.lower()
    if low.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if low.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if low.endswith(CSV_SUFFIXES):
        return "csv"
    return None


def resolve_inputs(spec: Any, columns: dict[str, str] | None = None) -> list[InputFile]:
    """Expand ``input=``: a file, a glob, a directory, or a list of those, into input files;
    ``columns`` (field -> the user's column name) travels with each file to its reader.

    Raises UserError (one line) for a path that matches nothing or an unknown format.
    """
    items = list(spec) if isinstance(spec, (list, tuple)) else [spec]
    paths: list[str] = []
    for item in items:
        item = os.path.expanduser(str(item))
        if os.path.isdir(item):
            found = sorted(p for p in glob.glob(os.path.join(item, "*")) if _fmt(p))
            if not found:
                raise UserError(f"input directory has no .jsonl, .parquet or .csv files: {item}")
        elif any(ch in item for ch in "*?["):
            found = sorted(glob.glob(item, recursive=True))
            if not found:
                raise UserError(f"input glob matches no files: {item}")
        elif os.path.isfile(item):
            found = [item]
        else:
            raise UserError(f"input file not found: {item}")
        paths.extend(found)
    files: list[InputFile] = []
    seen: set[str] = set()
    for p in paths:
        ap = os.path.abspath(p)
        if ap in seen:
            continue
        seen.add(ap)
        fmt = _fmt(ap)
        if fmt is None:
            raise UserError(f"unsupported input format (use .jsonl, .parquet or open-rag-eval's .csv): {p}")
        if fmt == "csv":
            from ragscale.io.table_csv import header, is_orag_header

            if is_orag_header(ap):
                from ragscale.io.orag_csv import check_header

                check_header(ap)
            else:  # a table: one record per row
                header(ap)
                fmt = "table"
        stem = os.path.basename(ap)
        for suf in JSONL_SUFFIXES + PARQUET_SUFFIXES + CSV_SUFFIXES:
            if stem.lower().endswith(suf):
                stem = stem[: -len(suf)]
                break
        tag = f"{stem}-{hashlib.sha1(ap.encode()).hexdigest()[:8]}"
        files.append(InputFile(ap, fmt, stem, tag, columns=tuple(sorted((columns or {}).items()))))
    if not files:
        raise UserError("no input files")
    return files


def materialize_csv(files: Sequence[InputFile], out_dir: str) -> list[InputFile]:
    """Normalize each CSV into ``out_dir/inputs/<tag>.jsonl``, which the pipeline then reads like
    JSONL: open-rag-eval's CSV one record per (query_id, query_run) row group
    (ragscale.io.orag_csv), a table CSV one record per row (ragscale.io.table_csv).
    Deterministic, so a resumed run gets the same record keys."""
    from dataclasses import replace

    out: list[InputFile] = []
    for f in files:
        if f.fmt not in ("csv", "table"):
            out.append(f)
            continue
        if f.fmt == "csv":
            from ragscale.io.orag_csv import read_records
        else:
            from ragscale.io.table_csv import read_rows as read_records

        os.makedirs(os.path.join(out_dir, "inputs"), exist_ok=True)
        name = f.tag if len(f.tag.encode()) <= 200 else f"{f.stem[:60]}-{f.tag.rsplit('-', 1)[1]}"  # NAME_MAX: 255
        data = os.path.join(out_dir, "inputs", f"{name}.jsonl")
        tmp = data + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            for rec in read_records(f.path):
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        os.replace(tmp, data)
        out.append(replace(f, data=data))
    return out


@dataclass(frozen=True)
class Pointer:
    file_idx: int
    line: int  # 1-based line number (JSONL) or 0-based row index (Parquet)
    offset: int  # byte offset of the line (JSONL; past a BOM on the first line), -1 for Parquet
    task: str | None = None  # task key used to group a sweep
    # hash of the record's (model, task, run) (ragscale.io.identity.slot_of; None without one), process-local
    slot: int | None = field(default=None, compare=False)
    first: int = -1  # the key_code of the earlier record whose (model, task, run) this one repeats, -1 if none

    def key(self, files: Sequence[InputFile]) -> str:
        return f"{files[self.file_idx].tag}:{self.line}"

    def repeat_error(self, files: Sequence[InputFile], model: str, task: str | None) -> str:
        """The input error of a record that repeats the (model, task, run) of the record ``first``."""
        from ragscale.io.identity import REPEAT

        f, line = files[self.first >> KEY_LINE_BITS], self.first & ((1 << KEY_LINE_BITS) - 1)
        here, there = ("line" if g.read_fmt == "jsonl" else "row" for g in (files[self.file_idx], f))
        return (f"{files[self.file_idx].path}: {here} {self.line}: model {model!r} answered task {task!r} at {there} "
                f"{line} of {f.path} already {REPEAT}")


def _ids_of(obj: Any, f: InputFile) -> tuple[str | None, int | None]:
    """(task id for grouping a sweep, hash of the (model, task, run) slot) of a parsed record, read
    through the file's column names as the reader reads it."""
    from ragscale.io.scan_ids import ids_of

    return ids_of(obj, f.column_map, f.stem)


def _jsonl_pointers(i: int, f: InputFile, with_tasks: bool, fast: bool = True) -> Iterator[Pointer]:
    """A JSONL file's pointers (ragscale.io.scan_ids: the ids without a json.loads per line; ``fast=False``:
    every line fully parsed, the reference the fast scan is tested against)."""
    from ragscale.io.scan_ids import line_ids

    for lineno, offset, task, slot in line_ids(f.read_path, f.column_map, f.stem, with_tasks=with_tasks, fast=fast):
        yield Pointer(i, lineno, offset, task, slot)


def parquet_file(path: str) -> Any:
    """``pyarrow.parquet.ParquetFile(path)``; a one-line UserError for a file pyarrow cannot read."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except Exception as e:  # noqa: BLE001 - any pyarrow failure is a bad file
        raise UserError(f"cannot read Parquet file {path}: {e}") from None


def _parquet_pointers(i: int, f: InputFile, with_tasks: bool) -> Iterator[Pointer]:
    pf = parquet_file(f.path)
    n = pf.metadata.num_rows
    if not with_tasks:
        yield from (Pointer(i, row, -1) for row in range(n))
        return
    from ragscale.columns import LAYOUT_NAMES

    wanted = {f.column(k) for k in ("model_id", "task_id")} | {"query_id", "conversation_id", "turn", "query_run"}
    wanted |= {c for k in ("model_id", "task_id") for c in LAYOUT_NAMES[k]}
    names = [c for c in pf.schema_arrow.names if c in wanted]
    if not names:
        yield from (Pointer(i, row, -1) for row in range(n))
        return
    row = 0
    for batch in pf.iter_batches(columns=names):  # a batch at a time: the driver's memory stays flat
        for obj in batch.to_pylist():
            task, slot = _ids_of(obj, f)
            yield Pointer(i, row, -1, task, slot)
            row += 1


def scan(files: Sequence[InputFile], *, with_tasks: bool, fast: bool = True) -> Iterator[Pointer]:
    """Yield a pointer per record (non-blank JSONL line or Parquet row), in input order; with
    ``with_tasks``, its task id and (model, task, run) slot too (a line that cannot be read has none).
    ``fast=False`` parses every JSONL line in full (the same pointers, slower: ragscale.io.scan_ids)."""
    for i, f in enumerate(files):
        if f.read_fmt == "jsonl":
            yield from _jsonl_pointers(i, f, with_tasks, fast)
        else:
            yield from _parquet_pointers(i, f, with_tasks)


KEY_LINE_BITS = 40  # key_code = file_idx << 40 | line: lines (or Parquet rows) below 2**40 per file


def key_code(file_idx: int, line: int) -> int:
    """A record key ``<file tag>:<line>`` as one int64, given its file's index in the run."""
    return (int(file_idx) << KEY_LINE_BITS) | int(line)


class PointerArray:
    """The run's pointers as numpy columns (file index, line, byte offset, a 64-bit hash of the
    task id for grouping a sweep, and the key_code of the earlier record that a record repeats):
    about 37 bytes a record and no Python object per record, so the driver's memory stays flat
    however many records a run has (benchmarks/scale.py). ``scan()``'s Pointers remain for code
    that reads a few records."""

    def __init__(self, file_idx: np.ndarray, line: np.ndarray, offset: np.ndarray, task_hash: np.ndarray,
                 has_task: np.ndarray, first: np.ndarray | None = None):
        self.file_idx, self.line, self.offset = file_idx, line, offset
        self.task_hash, self.has_task = task_hash, has_task
        self.first = np.full(len(line), -1, np.int64) if first is None else first

    @classmethod
    def scan(cls, files: Sequence[InputFile], *, with_tasks: bool, fast: bool = True) -> "PointerArray":
        """``scan()`` into columns (input order), without keeping a Pointer per record; with
        ``with_tasks``, each record that repeats an earlier one's (model, task, run) is marked with
        that record's key_code (``first``: ragscale.io.identity); ``fast``: as ``scan()``'s."""
        from array import array

        fi, ln, off, th, ht, sh = array("i"), array("q"), array("q"), array("q"), array("b"), array("q")
        slotted = array("q")  # positions of the records with a slot
        for n, p in enumerate(scan(files, with_tasks=with_tasks, fast=fast)):
            fi.append(p.file_idx)
            ln.append(p.line)
            off.append(p.offset)
            th.append(hash(p.task) if p.task is not None else 0)  # equality only: a process-local hash is enough
            ht.append(p.task is not None)
            if p.slot is not None:
                slotted.append(n)
                sh.append(p.slot)
        out = cls(np.frombuffer(fi, np.int32), np.frombuffer(ln, np.int64), np.frombuffer(off, np.int64),
                  np.frombuffer(th, np.int64), np.frombuffer(ht, np.int8).astype(bool))
        out.first = _repeats(out.codes(), np.frombuffer(slotted, np.int64), np.frombuffer(sh, np.int64))
        return out

    def __len__(self) -> int:
        return len(self.line)

    def __getitem__(self, idx: Any) -> "PointerArray":
        """A slice, an index array or a boolean mask of the pointers (never a single one)."""
        return PointerArray(self.file_idx[idx], self.line[idx], self.offset[idx], self.task_hash[idx], self.has_task[idx],
                            self.first[idx])

    def codes(self) -> np.ndarray:
        """The records' ``key_code``s."""
        return (self.file_idx.astype(np.int64) << KEY_LINE_BITS) | self.line

    def ordered_for_sweep(self) -> "PointerArray":
        """``order_for_sweep`` on the columns: grouped by task (tasks in order of first
        appearance, models in input order); pointers without a task keep their own slot."""
        n = len(self)
        idx = np.arange(n, dtype=np.int64)
        rank = idx.copy()
        with_task = np.flatnonzero(self.has_task)
        if len(with_task):
            _, first, inverse = np.unique(self.task_hash[with_task], return_index=True, return_inverse=True)
            rank[with_task] = with_task[first][inverse.ravel()]
        return self[np.lexsort((idx, rank))]


def _repeats(codes: np.ndarray, where: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """Per record, the key_code of the first record (in input order) with its slot, -1 for the first
    itself and for records without a slot (``where``: positions of the records whose ``slots`` are given)."""
    first = np.full(len(codes), -1, np.int64)
    if len(slots):
        _, head, inverse = np.unique(slots, return_index=True, return_inverse=True)
        origin = where[head][inverse.ravel()]
        later = origin != where
        first[where[later]] = codes[origin[later]]
    return first


def order_for_sweep(pointers: list[Pointer]) -> list[Pointer]:
    """Group pointers by task (stable: tasks in order of first appearance, models in
    input order); pointers without a task id keep their own slot."""
    first: dict[str, int] = {}
    rank: list[int] = []
    for idx, p in enumerate(pointers):
        rank.append(first.setdefault(p.task, idx) if p.task is not None else idx)
    order = sorted(range(len(pointers)), key=lambda i: (rank[i], i))
    return [pointers[i] for i in order]


def read_raw(files: Sequence[InputFile], pointers: Sequence[Pointer]) -> list[str | bytes]:
    """Read the raw record text for each pointer (a JSONL line, or a Parquet row as JSON); a line
    that is not UTF-8 stays bytes (``ragscale.record.read_record`` makes it that record's error)."""
    out: list[str | bytes] = [""] * len(pointers)
    by_file: dict[int, list[int]] = {}
    for j, p in enumerate(pointers):
        by_file.setdefault(p.file_idx, []).append(j)
    for fi, idxs in by_file.items():
        f = files[fi]
        if f.read_fmt == "jsonl":
            with open(f.read_path, "rb") as fh:
                for j in sorted(idxs, key=lambda j: pointers[j].offset):
                    fh.seek(pointers[j].offset)
                    line = fh.readline().rstrip(b"\r\n")
                    try:
                        out[j] = line.decode("utf-8")
                    except UnicodeDecodeError:
                        out[j] = line
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(f.path, memory_map=True)
            rows = table.take([pointers[j].line for j in idxs]).to_pylist()
            for j, row in zip(idxs, rows):
                out[j] = json.dumps(row, default=str)
    return out
