"""In-memory data for the Python API (ragscale.io.frames, issue 37): a DataFrame, a list of dicts or
a Dataset becomes one JSONL file named by its content; numpy and pandas values become plain JSON
(NaN, NA and NaT null, arrays lists, timestamps ISO text); a record that cannot be written is that
record's input error, the others are written; the same data is the same file, other data another."""

from __future__ import annotations

import datetime as dt
import json
import os

import numpy as np
import pandas as pd
import pytest

from ragscale.errors import UserError
from ragscale.io import frames
from ragscale.io.lines import MAX_DEPTH
from ragscale.record import TABLE_FORMAT


def lines(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(x) for x in fh.read().splitlines()]


def test_values_become_plain_json():
    ts = pd.Timestamp("2026-01-02T03:04:05")
    row = {"a": np.int64(3), "b": np.float32(0.5), "c": np.array([1, 2]), "d": float("nan"), "e": pd.NA, "f": pd.NaT,
           "g": ts, "h": dt.date(2026, 1, 2), "i": (1, [np.bool_(True)]), 5: {"k": float("inf")}, "j": "é"}
    assert frames._plain(row) == {"a": 3, "b": 0.5, "c": [1, 2], "d": None, "e": None, "f": None,
                                  "g": "2026-01-02T03:04:05", "h": "2026-01-02", "i": [1, [True]], "5": {"k": None},
                                  "j": "é"}
    assert type(frames._plain(np.int64(3))) is int and frames._plain(b"x") == b"x"


def test_a_dataframe_is_one_file_named_by_its_content(tmp_path):
    df = pd.DataFrame({"question": ["q1", "q2"], "answer": ["a1", None], "score": [1.0, np.nan]})
    tmp_path = tmp_path / "inputs"  # as the API writes it: <output_dir>/inputs/<hash>/<stem>.jsonl
    path = frames.write_jsonl(df, str(tmp_path), stem="mine")
    assert os.path.basename(path) == "mine.jsonl" and frames.is_written(path)
    assert lines(path) == [{"question": "q1", "answer": "a1", "score": 1.0},
                           {"question": "q2", "answer": None, "score": None}]
    assert open(path, encoding="utf-8").read().endswith("}\n")
    assert frames.write_jsonl(df.copy(), str(tmp_path), stem="mine") == path  # same data, same file
    other = frames.write_jsonl(df.iloc[:1], str(tmp_path), stem="mine")
    assert other != path and os.path.dirname(other) != os.path.dirname(path)
    assert not [n for n in os.listdir(os.path.dirname(path)) if n.endswith(".tmp")]
    assert frames.write_jsonl([{"question": "q1", "answer": "a1", "score": 1.0},
                               {"question": "q2", "answer": None, "score": None}], str(tmp_path), stem="mine") == path


def test_a_record_that_cannot_be_written_is_its_own_input_error(tmp_path):
    deep: object = "x"
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    path = frames.write_jsonl([{"q": "ok"}, {"q": deep}, {"q": "\ud800"}], str(tmp_path))
    got = lines(path)
    assert got[0] == {"q": "ok"}
    assert got[1]["format"] == TABLE_FORMAT and got[1]["input_error"].startswith("data record 1: ")
    assert got[2] == {"format": TABLE_FORMAT,
                      "input_error": "data record 2: holds a lone surrogate (not text any output can hold)"}


def test_what_is_not_data_is_refused_in_one_line(tmp_path):
    with pytest.raises(UserError, match="data record 1 must be a mapping of fields, got str"):
        frames.write_jsonl([{"a": 1}, "b"], str(tmp_path))
    with pytest.raises(UserError, match="data has no records"):
        frames.write_jsonl([], str(tmp_path))
    with pytest.raises(UserError, match="data must be a path, a list of paths, a pandas DataFrame, a list of dicts or "
                                        "a datasets.Dataset; got int"):
        frames.rows_of(3)


def test_what_counts_as_in_memory_and_as_written(tmp_path):
    assert frames.is_in_memory([{"a": 1}]) and frames.is_in_memory(pd.DataFrame()) and frames.is_in_memory([])
    assert not frames.is_in_memory("x.jsonl") and not frames.is_in_memory(["a.jsonl", tmp_path])
    assert not frames.is_in_memory(None) and frames.is_in_memory(["a.jsonl", {"a": 1}])
    assert frames.is_written(str(tmp_path / "inputs" / "0123456789ab" / "data.jsonl"))
    assert not frames.is_written(str(tmp_path / "inputs" / "0123456789aB" / "data.jsonl"))
    assert not frames.is_written(str(tmp_path / "inputs" / "0123456789a" / "data.jsonl"))
    assert not frames.is_written(str(tmp_path / "other" / "0123456789ab" / "data.jsonl"))


def test_a_dataset_is_read_row_by_row():
    class FakeDataset:  # the two attributes rows_of tells a datasets.Dataset by
        column_names, features = ["q"], {}

        def __iter__(self):
            return iter([{"q": 1}, {"q": 2}])

    assert list(frames.rows_of(FakeDataset())) == [{"q": 1}, {"q": 2}]
    assert frames.rows_of(({"q": 1},)) == ({"q": 1},)
    assert frames.rows_of(pd.DataFrame({"q": [1]})) == [{"q": 1}]


def _nest(leaf, depth: int):
    for _ in range(depth):
        leaf = [leaf]
    return leaf


def test_the_nesting_limit_counts_every_container_and_array():
    """A record nested MAX_DEPTH containers deep (the record itself one of them) is written, one
    more is refused; a numpy array is a level as the list it becomes, at whatever depth it sits."""
    from ragscale.io.lines import LineError

    assert frames._plain({"x": _nest(1, MAX_DEPTH - 1)}) == {"x": _nest(1, MAX_DEPTH - 1)}
    with pytest.raises(LineError):
        frames._plain({"x": _nest(1, MAX_DEPTH)})
    with pytest.raises(LineError):
        frames._plain({"x": {"y": _nest(1, MAX_DEPTH - 1)}})
    assert frames._plain({"x": _nest(np.array([1, 2]), MAX_DEPTH - 2)}) == {"x": _nest([1, 2], MAX_DEPTH - 2)}
    with pytest.raises(LineError):
        frames._plain({"x": _nest(np.array([1, 2]), MAX_DEPTH - 1)})
    with pytest.raises(LineError):
        frames._plain([_nest(np.zeros((1, 1)), MAX_DEPTH - 2)])


def test_values_json_cannot_hold_are_written_as_text(tmp_path):
    import decimal

    path = frames.write_jsonl([{"task_id": "t", "v": decimal.Decimal("1.50"), "s": {3}}], str(tmp_path))
    assert lines(path) == [{"task_id": "t", "v": "1.50", "s": "{3}"}]


def test_only_a_dataframe_or_a_dataset_is_read_as_one(tmp_path):
    from types import SimpleNamespace

    for almost in (pd.Series([{"a": 1}]), SimpleNamespace(features={}), SimpleNamespace(column_names=["a"])):
        with pytest.raises(UserError, match="^data must be a path, a list of paths, a pandas DataFrame"):
            frames.rows_of(almost)
    with pytest.raises(UserError, match="^data has no records$"):
        frames.write_jsonl([], str(tmp_path))


def test_a_folder_that_only_looks_written(tmp_path):
    for name in ("XXXXXXXXXXXX", "ABCDEF012345", "abcdef01234"):
        assert not frames.is_written(str(tmp_path / "inputs" / name / "data.jsonl"))
    assert frames.is_written(str(tmp_path / "inputs" / "abcdef012345" / "data.jsonl"))
