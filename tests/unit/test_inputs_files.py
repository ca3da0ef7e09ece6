"""Input files as the run keeps them: what the scan of a Parquet file reads, the name of a CSV's
normalized JSONL (its tag, shortened to fit a file name), that JSONL's encoding whatever the locale,
the column a field is read from, and the input error of a record that repeats an earlier one, naming
where that one is."""

from __future__ import annotations

import hashlib
import json
import locale
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragscale.io.identity import REPEAT
from ragscale.io.inputs import (
    InputFile,
    Pointer,
    key_code,
    materialize_csv,
    resolve_inputs,
    scan,
)

HEADER = "query_id,query,query_run,passage_id,passage,generated_answer\n"


def csv_file(folder, stem: str, row: str = "q1,Q,1,[1],P,A\n") -> str:
    path = os.path.join(str(folder), f"{stem}.csv")
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(HEADER + row)
    return path


def short_hash(path: str) -> str:
    return hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:8]


@pytest.mark.parametrize("stem, kept", [
    ("run-a", True),
    ("run-" * 25, True),  # 100 characters: the tag fits
    ("x" * 191, True),  # the tag is 200 bytes, the most kept whole
    ("x" * 192, False),
    ("é" * 96, False),  # 96 characters but 192 bytes
    ("model-" * 40, False),
])
def test_a_csvs_normalized_jsonl_is_named_by_its_tag_shortened_past_200_bytes(tmp_path, stem, kept):
    path = csv_file(tmp_path, stem)
    (f,) = resolve_inputs(path)
    assert f.tag == f"{stem}-{short_hash(path)}"
    (out,) = materialize_csv([f], str(tmp_path / "run"))
    name = f.tag if kept else f"{stem[:60]}-{short_hash(path)}"
    assert out.data == os.path.join(str(tmp_path / "run"), "inputs", f"{name}.jsonl")
    assert os.listdir(tmp_path / "run" / "inputs") == [f"{name}.jsonl"]
    with open(out.data, encoding="utf-8") as fh:
        assert json.loads(fh.readline())["query_id"] == "q1"


@pytest.fixture
def ascii_locale():
    if sys.flags.utf8_mode:
        pytest.skip("Python's UTF-8 mode writes UTF-8 under any locale")
    old = locale.setlocale(locale.LC_CTYPE)
    try:
        locale.setlocale(locale.LC_CTYPE, "C")
        if locale.getpreferredencoding(False).lower().replace("-", "") == "utf8":
            pytest.skip("the C locale is UTF-8 here")
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, old)


def test_the_normalized_jsonl_is_utf8_under_an_ascii_locale(tmp_path, ascii_locale):
    (f,) = resolve_inputs(csv_file(tmp_path, "answers", "q1,Qué es?,1,[1],Pasaje ñ,Réponse – é\n"))
    (out,) = materialize_csv([f], str(tmp_path / "run"))
    with open(out.data, encoding="utf-8") as fh:
        text = fh.read()
    assert '"generated_answer": "Réponse – é"' in text and '"query": "Qué es?"' in text


def test_a_field_is_read_from_its_mapped_column_else_its_own_name():
    f = InputFile("/d/a.jsonl", "jsonl", "a", "a-0", columns=(("model_id", "system"), ("task_id", "qid")))
    assert [f.column(x) for x in ("model_id", "task_id", "answer", "query_id")] == ["system", "qid", "answer", "query_id"]
    plain = InputFile("/d/b.jsonl", "jsonl", "b", "b-0")
    assert [plain.column(x) for x in ("task_id", "model_id")] == ["task_id", "model_id"]


def files_of(*specs) -> list[InputFile]:
    return [InputFile(f"/d/{name}.{fmt}", fmt, name, f"{name}-0") for name, fmt in specs]


@pytest.mark.parametrize("first_file, first_line, expected_where", [
    (0, 1, "line 1 of /d/a.jsonl"),
    (0, 2, "line 2 of /d/a.jsonl"),
    (1, 6, "row 6 of /d/b.parquet"),
    (2, 7, "line 7 of /d/c.jsonl"),
    (1, 2**40 - 1, f"row {2**40 - 1} of /d/b.parquet"),
])
def test_a_repeat_names_the_file_and_line_of_the_first_answer(first_file, first_line, expected_where):
    files = files_of(("a", "jsonl"), ("b", "parquet"), ("c", "jsonl"))
    p = Pointer(2, 9, 100, "t0", first=key_code(first_file, first_line))
    assert p.repeat_error(files, "m1", "t0") == f"/d/c.jsonl: line 9: model 'm1' answered task 't0' at " \
                                                f"{expected_where} already {REPEAT}"
    q = Pointer(1, 8, -1, "t0", first=key_code(first_file, first_line))
    assert q.repeat_error(files, "m1", None).startswith("/d/b.parquet: row 8: model 'm1' answered task None at ")


def test_a_parquet_scan_reads_only_the_id_columns(tmp_path):
    """The driver's scan reads a Parquet file's model, task and run columns, not the records: a column
    it does not need, even one Python cannot hold (a timestamp past the year 9999), never reaches it."""
    path = str(tmp_path / "answers.parquet")
    pq.write_table(pa.table({"qid": ["t1", "t2"], "query_run": [1, 1], "answer": ["a", "b"],
                             "when": pa.array([2**62, 0], pa.timestamp("ms"))}), path)
    files = resolve_inputs(path, {"task_id": "qid"})
    assert [(p.line, p.task) for p in scan(files, with_tasks=True)] == [(0, "t1"), (1, "t2")]
