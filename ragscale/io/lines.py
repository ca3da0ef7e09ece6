"""One input line parsed safely: the rules every reader of an input line shares (docs/inputs.md).

A line is UTF-8 text (the scan skips a BOM before a file's first line), one JSON value nested at most
``MAX_DEPTH`` levels, without a lone surrogate escape (``"\\ud800"`` is valid JSON but no UTF-8 or
Parquet output can hold it). Anything else is a :class:`LineError`, whose message says why in a few
words: the reader makes it that line's error, never the run's.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 128  # levels of nested arrays and objects in one record (serde_json's default limit too)
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # the escape of a surrogate: paired ones are fine, lone ones not


class LineError(ValueError):
    """Why an input line cannot be read (its record's input error)."""


def decode(raw: bytes) -> str:
    """The text of a line read as bytes; a LineError naming the first byte that is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LineError(f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1}; save the file "
                        "as UTF-8)") from None


def depth(value: Any) -> int:
    """How many arrays and objects are nested in ``value`` (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def too_deep() -> LineError:
    return LineError(f"nested deeper than {MAX_DEPTH} levels of arrays and objects (the most ragscale reads)")


def parse(line: str | bytes) -> Any:
    """The JSON value of one input line (text, or bytes that must be UTF-8); a LineError when the
    line is not UTF-8, not JSON, nested deeper than ``MAX_DEPTH`` or holds a lone surrogate."""
    text = decode(line) if isinstance(line, bytes) else line
    try:
        value = json.loads(text)
    except RecursionError:
        raise too_deep() from None
    except ValueError as e:
        where = f" at column {e.colno}" if isinstance(e, json.JSONDecodeError) else ""
        raise LineError(f"not valid JSON ({getattr(e, 'msg', str(e))}{where})") from None
    if text.count("[") + text.count("{") > MAX_DEPTH and depth(value) > MAX_DEPTH:
        raise too_deep()
    if _SURROGATE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise LineError("holds a lone surrogate escape (\\ud800-\\udfff without its pair): not text that "
                            "any output can hold") from None
    return value


def clean_nan(value: Any) -> Any:
    """A copy of a JSON value with float NaN/inf (MT-RAG files carry literal ``NaN`` tokens) as None,
    at any depth (built without recursion)."""
    def leaf(v: Any) -> Any:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    if not isinstance(value, (dict, list)):
        return leaf(value)
    out: Any = {} if isinstance(value, dict) else []
    stack = [(value, out)]
    while stack:
        src, dst = stack.pop()
        for k, v in (src.items() if isinstance(src, dict) else enumerate(src)):
            if isinstance(v, (dict, list)):
                copy: Any = {} if isinstance(v, dict) else []
                stack.append((v, copy))
                v = copy
            else:
                v = leaf(v)
            if isinstance(dst, dict):
                dst[k] = v
            else:
                dst.append(v)
    return out
