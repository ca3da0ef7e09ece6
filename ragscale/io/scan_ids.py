"""The scan's ids of a JSONL file's records: per non-blank line its number, byte offset, task id and
(model, task, run) slot hash, read without a Python ``json.loads`` of each line (docs/performance.md,
"The input scan").

Design. The ids must be exactly those of the full parse (``ids_of(parse(line))``, ``fast=False``), and a
line that ``parse`` refuses (not JSON, not an object, too deep, not UTF-8, a lone surrogate) has none.
Finding the keys in the bytes (a regex, ``raw_decode`` of the values: approach (b)) would be cheap, but
knowing that the rest of the line is valid JSON needs a validating parse of the whole line, which pure
Python cannot do faster than ``json.loads``. So (approach (a)) the file goes, 8 MiB of whole lines at a
time, to ``pyarrow.json`` (RapidJSON in C++, no Python object per value; about 3x json.loads on MT-RAG
lines) with an explicit schema of only the keys the ids read (``wanted_keys``), every other field
ignored: it validates every line in full, reads the keys at the top level only, decodes escaped key
names as ``json`` does, and refuses a key given twice and a value whose type is not its column's (a
string; int64 for a key whose values are ints: a refusal naming the key switches it, as does a full
parse). Where RapidJSON and ``json`` could disagree, a screen over the whole chunk (numpy: no Python
work per line) sends the line to the full parse instead: a line that is not ``{...}`` (or is only after
JSON whitespace), that holds a CR (RapidJSON's line break), more than ``MAX_DEPTH`` brackets, ``Inf`` or
``-NaN`` (RapidJSON reads them, json does not), bytes that are not UTF-8, a digit run longer than
Python's int digit limit, or a surrogate escape (only where RapidJSON is not seen to refuse each lone
one itself, as ``parse`` does). A block Arrow refuses (or that gives another count of rows) is halved
until the refused lines are alone; those take the full parse, and once the halving has cost 3 times the
lines Arrow read (and ``GIVE_UP`` more), the rest of the file does. A clean file takes no json.loads at
all. Arrow parses on the calling thread (``use_threads=False``): on a busy 2-core machine its pool made
the scan slower.
"""

from __future__ import annotations

import codecs
import re
import sys
from functools import cache
from typing import Any, Iterator

import numpy as np

from ragscale.columns import remap
from ragscale.io.csv_rows import BOM
from ragscale.io.identity import slot_of
from ragscale.io.lines import MAX_DEPTH, LineError, parse

# the keys ragscale.io.identity.slot_of reads (the task id among them); with a column map, also the
# user's columns for model_id and task_id (ragscale.columns.remap moves them under those names)
SLOT_KEYS = ("model_id", "task_id", "query_id", "conversation_id", "turn", "query_run")
CHUNK_BYTES = 8 << 20  # whole lines per pyarrow.json call
MIN_BLOCK = 8  # a refused block smaller than this takes the full parse, line by line
GIVE_UP = 4096  # the rest of a file takes the full parse once halving has cost 3x the lines read + this
WHITESPACE = b" \t\r\n"  # JSON's whitespace (bytes.strip() would strip \x0b and \x0c too)
# bytes the screens look at: { and [ (the depth), I and N (Inf and -NaN: RapidJSON reads them, json
# does not); a CR (RapidJSON's line break, never json's) is looked for apart: it is rare
_MARKED = (123, 91, 73, 78)
_WORD = np.zeros(256, bool)
_WORD[list(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")] = True
# a surrogate escape: json keeps a lone one, which lines.parse refuses; screened unless RapidJSON refuses
# each lone one itself (_refuses_lone_surrogates)
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
LONE_SURROGATES = (rb"\ud800", rb"\udbff", rb"\udc00", rb"\udfff", rb"a\ud800b", rb"\ud800\u0041", rb"\ud800\ud800",
                   rb"\udc00\ud800", rb"\ud83d\ude00\udc00", rb"\ud800\\udc00")
_TWO_DIGITS = re.compile(rb"(?=[0-9]{2})")  # overlapping: every pair of consecutive digits
_TYPE_CHANGE = re.compile(r"Column\(/(.*)\) changed from (\w+) to (\w+)")  # pyarrow.json's refusal of a type

Ids = tuple[str | None, int | None]
Row = tuple[int, int, str | None, int | None]  # (line number, byte offset, task id, slot hash)


def ids_of(obj: Any, columns: dict[str, str], stem: str) -> Ids:
    """(task id for grouping a sweep, hash of the (model, task, run) slot) of a parsed record, read
    through the user's ``columns`` as the reader reads it; (None, None) for a value that is no object."""
    if not isinstance(obj, dict):
        return None, None
    view = remap(obj, columns) if columns else obj
    task = view.get("task_id")
    slot = slot_of(view, stem)
    return (None if task is None else str(task)), (None if slot is None else hash(slot))


def full_ids(line: bytes, columns: dict[str, str], stem: str) -> Ids:
    """The ids of one line by a full parse (``ragscale.io.lines.parse``); none for a line it refuses."""
    try:
        return ids_of(parse(line), columns, stem)
    except LineError:  # the reader makes it this line's error
        return None, None


def records(path: str) -> Iterator[tuple[int, int, bytes]]:
    """(1-based line number, byte offset, line) of each non-blank line; a BOM before the first line is
    skipped (and counted in the offsets), as the CSV readers skip it."""
    offset = 0
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if lineno == 1 and line.startswith(BOM):
                offset, line = len(BOM), line[len(BOM):]
            if line.strip():
                yield lineno, offset, line
            offset += len(line)


def line_ids(path: str, columns: dict[str, str], stem: str, *, with_tasks: bool = True,
             fast: bool = True) -> Iterator[Row]:
    """(line number, byte offset, task id, slot hash) of each record of a JSONL file, in file order;
    without ``with_tasks`` no ids; ``fast=False``: every line fully parsed (the reference)."""
    if not with_tasks:
        for lineno, offset, _ in records(path):
            yield lineno, offset, None, None
    elif not fast:
        for lineno, offset, line in records(path):
            yield (lineno, offset, *full_ids(line, columns, stem))
    else:
        yield from _FastIds(columns, stem).run(path)


def wanted_keys(columns: dict[str, str]) -> tuple[str, ...]:
    """The top-level keys whose values decide a record's ids (SLOT_KEYS and the mapped id columns)."""
    extra = [columns[f] for f in ("model_id", "task_id") if f in columns]
    return tuple(dict.fromkeys([*SLOT_KEYS, *extra]))


def _digit_stride() -> int:
    """Half of Python's int digit limit (0: no limit): a run of more digits than the limit (json.loads
    refuses such an int, RapidJSON reads it) holds two consecutive bytes of any sample this far apart."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()
    return max(1, (limit + 1) // 2) if limit else 0


@cache
def _refuses_lone_surrogates() -> bool:
    """Whether pyarrow.json refuses each lone surrogate escape (as lines.parse does) and reads a pair."""
    import pyarrow as pa
    import pyarrow.json as pj

    def reads(value: bytes) -> bool:
        try:
            pj.read_json(pa.BufferReader(b'{"x": "' + value + b'"}'), read_options=pj.ReadOptions(use_threads=False),
                         parse_options=pj.ParseOptions(explicit_schema=pa.schema([("x", pa.string())])))
        except Exception:  # noqa: BLE001 - refused
            return False
        return True

    return reads(rb"\ud83d\ude00") and not any(map(reads, LONE_SURROGATES))


class _FastIds:
    """One file's ids through pyarrow.json (see the module's docstring)."""

    def __init__(self, columns: dict[str, str], stem: str):
        self.columns, self.stem = columns, stem
        self.keys = wanted_keys(columns)
        self.types: dict[str, str] = {}  # key -> "int" where a record had an int (else its column is a string)
        self.usable = True  # False after a full-parsed record with an id no column reads (a float, a list ...)
        self.tried = self.read = 0  # lines given to pyarrow.json, lines it read
        self.stride = _digit_stride()
        self.surrogates = not _refuses_lone_surrogates()  # screened only where RapidJSON reads a lone one
        # the chunk at work: its bytes, its lines' starts and ends (each line's "\n"), stripped lines
        self.data, self.starts, self.ends, self.stripped = b"", [], [], {}

    def run(self, path: str) -> Iterator[Row]:
        with open(path, "rb") as fh:
            pos = len(BOM) if fh.read(len(BOM)) == BOM else 0  # skipped, as records() skips it
            lineno = 0
            while True:
                fh.seek(pos)
                data = more = fh.read(CHUNK_BYTES)
                while more and b"\n" not in more:  # a line longer than a chunk
                    more = fh.read(CHUNK_BYTES)
                    data += more
                if not data:
                    return
                eof = not fh.read(1)
                cut = len(data) if eof else data.rfind(b"\n") + 1  # whole lines (the last one may lack "\n")
                rows, lines = self.chunk(data, cut, pos, lineno)
                yield from rows
                if eof:
                    return
                pos, lineno = pos + cut, lineno + lines

    def chunk(self, data: bytes, cut: int, pos: int, lineno: int) -> tuple[list[Row], int]:
        """The rows of the lines in ``data[:cut]`` (file offset ``pos``, after line ``lineno``), and how
        many lines it has."""
        a = np.frombuffer(data, np.uint8, count=cut)
        mask = a == 10  # one pass finds the line ends and every byte a screen looks at
        for byte in _MARKED:
            mask |= a == byte
        at = np.flatnonzero(mask)
        marked = a[at]
        ends = at[marked == 10]
        if data[cut - 1: cut] != b"\n":
            ends = np.append(ends, cut)  # the file's last line, without "\n"
        starts = np.concatenate(([0], ends[:-1] + 1))
        self.data, self.starts, self.ends, self.stripped = data, starts.tolist(), ends.tolist(), {}
        n = len(ends)
        clean = (ends > starts) & (a[np.minimum(starts, cut - 1)] == 123) & (a[np.maximum(ends - 1, 0)] == 125)
        odd = self.odd(data, cut, a, ends, at, marked)
        out: list[Ids | None] = [None] * n  # None: a blank line (no record)
        arrow = np.flatnonzero(clean & ~odd).tolist()  # the lines pyarrow.json reads
        if len(arrow) < n:
            odd_list = odd.tolist()
            for i in np.flatnonzero(~clean | odd).tolist():
                line = self.line(i)
                if not line.strip():
                    continue
                body = line.strip(WHITESPACE)
                if not odd_list[i] and body[:1] == b"{" and body[-1:] == b"}":  # JSON whitespace around it
                    self.stripped[i] = body + b"\n"
                    arrow.append(i)
                else:
                    out[i] = self.full(line)
            arrow.sort()
        self.solve(arrow, (data, cut) if len(arrow) == n and not self.stripped else None, out)
        starts_list = self.starts
        return [(lineno + i + 1, pos + starts_list[i], *ids) for i, ids in enumerate(out) if ids is not None], n

    def line(self, i: int) -> bytes:
        """Line ``i`` of the chunk as the full parse reads it (with its "\\n")."""
        return self.data[self.starts[i]: self.ends[i] + 1]

    def odd(self, data: bytes, cut: int, a: np.ndarray, ends: np.ndarray, at: np.ndarray,
            marked: np.ndarray) -> np.ndarray:
        """Per line of ``data[:cut]``, whether RapidJSON and json may disagree on it (``at``: the positions
        of the ``_MARKED`` bytes and line ends, ``marked``: those bytes)."""
        n = len(ends)
        odd = np.bincount(np.searchsorted(ends, at[(marked == 123) | (marked == 91)]), minlength=n) > MAX_DEPTH
        spots = []
        if data.find(b"\r", 0, cut) >= 0:
            cr = np.flatnonzero(a == 13)
            spots.append(cr[cr != ends[np.searchsorted(ends, cr)] - 1])  # not a CR right before "\n": stripped
        i = at[marked == 73]  # Inf, not followed by a letter, digit or _ (as in Infinity, Information)
        i = i[i + 2 < cut]
        i = i[(a[i + 1] == 110) & (a[i + 2] == 102)]
        spots.append(i[(i + 3 >= cut) | ~_WORD[a[np.minimum(i + 3, cut - 1)]]])
        k = at[marked == 78]  # -NaN
        k = k[(k > 0) & (k + 2 < cut)]
        spots.append(k[(a[k - 1] == 45) & (a[k + 1] == 97) & (a[k + 2] == 78)])
        if self.surrogates:
            spots.append(np.array([m.start() for m in _SURROGATE.finditer(data, 0, cut)], np.int64))
        if self.stride:  # a run of more digits than int() reads spans two consecutive sampled bytes
            s = self.stride
            spots.append(np.array([k * s for k in (m.start() for m in _TWO_DIGITS.finditer(data[:cut:s]))
                                   if data[k * s: k * s + s + 1].isdigit()], np.int64))
        if not data.isascii():
            view, start, bad = memoryview(data)[:cut], 0, []
            while start < cut:
                try:
                    codecs.utf_8_decode(view[start:], "strict", True)
                    break
                except UnicodeDecodeError as e:
                    bad.append(start + e.start)
                    start = int(ends[np.searchsorted(ends, start + e.start)]) + 1
            spots.append(np.array(bad, np.int64))
        spot = np.concatenate(spots)
        if len(spot):
            odd[np.searchsorted(ends, spot)] = True
        return odd

    def full(self, line: bytes) -> Ids:
        """The full parse of one line; a record it gives sets the column types for the next blocks."""
        try:
            obj = parse(line)
        except LineError:
            return None, None
        if isinstance(obj, dict):
            self.learn(obj)
        return ids_of(obj, self.columns, self.stem)

    def learn(self, obj: dict) -> None:
        types: dict[str, str] = {}
        for key in self.keys:
            value = obj.get(key)
            if isinstance(value, bool) or not isinstance(value, (str, int, type(None))):
                self.usable = False  # a float, list, object or boolean id: no column reads it exactly
                return
            types[key] = "int" if isinstance(value, int) else "str" if value is not None else self.types.get(key, "str")
        self.types, self.usable = types, True

    def solve(self, lines: list[int], whole: tuple[bytes, int] | None, out: list) -> None:
        """The ids of ``lines`` into ``out``: through pyarrow.json, halving a refused block (``whole``:
        the lines are the chunk, read in place)."""
        skip = 0
        while skip < len(lines) and not self.usable:  # full parses until a record whose ids a column reads
            out[lines[skip]] = self.full(self.line(lines[skip]))
            skip += 1
        if skip:
            lines, whole = lines[skip:], None
        if len(lines) < MIN_BLOCK or self.tried - self.read > 3 * self.read + GIVE_UP:  # halving costs too much
            for i in lines:
                out[i] = self.full(self.line(i))
            return
        got = self.arrow(lines, whole)
        if got is not None:
            for i, ids in zip(lines, got):
                out[i] = ids
            return
        if len(lines) == 1:
            out[lines[0]] = self.full(self.line(lines[0]))
            return
        half = len(lines) // 2
        self.solve(lines[:half], None, out)
        self.solve(lines[half:], None, out)

    def arrow(self, lines: list[int], whole: tuple[bytes, int] | None) -> list[Ids] | None:
        """The ids of ``lines`` read by pyarrow.json; None when it refuses them."""
        import pyarrow as pa
        import pyarrow.json as pj

        self.tried += len(lines)
        if whole is not None:
            block = pa.py_buffer(whole[0]).slice(0, whole[1])
        else:
            block = pa.py_buffer(b"".join(self.stripped.get(i) or self.line(i) for i in lines))
        flipped: set[str] = set()
        while True:
            schema = pa.schema([(k, pa.int64() if self.types.get(k) == "int" else pa.string()) for k in self.keys])
            try:
                table = pj.read_json(
                    pa.BufferReader(block), read_options=pj.ReadOptions(use_threads=False, block_size=block.size + 1),
                    parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"))
                break
            except Exception as e:  # noqa: BLE001 - any refusal: the halves, down to the full parse, find why
                # a key whose values are ints where its column reads strings (or the other way): the
                # other type, once per key (only a hint: a wrong one is refused in turn)
                hint = _TYPE_CHANGE.search(str(e))
                key = hint and hint[1]
                if not key or key not in self.keys or key in flipped or {hint[2], hint[3]} != {"string", "number"}:
                    return None
                flipped.add(key)
                self.types[key] = "int" if hint[3] == "number" else "str"
        if table.num_rows != len(lines):  # two values on one line: json.loads refuses it
            return None
        self.read += len(lines)
        columns, stem, keys = self.columns, self.stem, self.keys
        cols = [table.column(k).to_pylist() for k in keys]
        return [ids_of(dict(zip(keys, row)), columns, stem) for row in zip(*cols)]
