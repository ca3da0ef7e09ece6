"""A Parquet input's records are identified as the same records in JSONL are (ragscale.io.inputs,
issue 37): by task_id, query_id and run (open-rag-eval), or conversation and turn; a record without
a model answers for its file's stem; a repeat of (model, task, run) is marked; the sweep groups by
task_id; a file read without task ids, or without any id column, gives one pointer per row and no
task."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from ragscale.io.inputs import Pointer, PointerArray, key_code, resolve_inputs, scan

ROWS = [
    {"task_id": "t1", "query_id": None, "query_run": None, "model_id": "m", "conversation_id": None, "turn": None},
    {"query_id": "q1", "query_run": 1, "model_id": "m", "conversation_id": None, "turn": None},
    {"query_id": "q1", "query_run": 2, "model_id": "m", "conversation_id": None, "turn": None},  # another run
    {"query_id": "q1", "query_run": 1, "model_id": "m", "conversation_id": None, "turn": None},  # repeats row 0
    {"query_id": None, "query_run": None, "model_id": None, "conversation_id": "c", "turn": 1},  # the stem's
    {"query_id": None, "query_run": None, "model_id": None, "conversation_id": "c", "turn": 2},
    {"query_id": None, "query_run": None, "model_id": None, "conversation_id": "c", "turn": 1},  # repeats row 3
    {"query_id": None, "query_run": None, "model_id": "m", "conversation_id": "c", "turn": 1},   # another model
    {"query_id": None, "query_run": None, "model_id": None, "conversation_id": None, "turn": None},  # no task
]


def both(tmp_path, rows):
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "run.parquet")
    (tmp_path / "jsonl").mkdir()
    (tmp_path / "jsonl" / "run.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if v is not None})
                                                          + "\n" for r in rows))
    return resolve_inputs(str(tmp_path / "run.parquet")), resolve_inputs(str(tmp_path / "jsonl" / "run.jsonl"))


def test_parquet_rows_are_identified_as_jsonl_lines_are(tmp_path):
    parquet, jsonl = both(tmp_path, ROWS)
    p, j = PointerArray.scan(parquet, with_tasks=True), PointerArray.scan(jsonl, with_tasks=True)
    assert p.first.tolist() == [-1, -1, -1, key_code(0, 1), -1, -1, key_code(0, 4), -1, -1]  # 0-based rows
    assert j.first.tolist() == [-1, -1, -1, key_code(0, 2), -1, -1, key_code(0, 5), -1, -1]  # 1-based lines
    # the sweep groups records by task_id
    assert p.has_task.tolist() == j.has_task.tolist() == [True] + [False] * 8
    assert p.task_hash.tolist() == j.task_hash.tolist()
    tasks = [ptr.task for ptr in scan(parquet, with_tasks=True)]
    assert tasks == [ptr.task for ptr in scan(jsonl, with_tasks=True)] == ["t1"] + [None] * 8


def test_a_parquet_file_without_task_ids_or_id_columns_has_a_pointer_per_row(tmp_path):
    parquet, _ = both(tmp_path, ROWS)
    assert list(scan(parquet, with_tasks=False)) == [Pointer(0, row, -1) for row in range(len(ROWS))]
    pq.write_table(pa.table({"answer": ["a", "b", "c"]}), tmp_path / "plain.parquet")
    files = resolve_inputs([str(tmp_path / "plain.parquet"), str(tmp_path / "run.parquet")])
    got = list(scan(files, with_tasks=True))
    assert got[:3] == [Pointer(0, row, -1) for row in range(3)] and all(p.slot is None for p in got[:3])
    assert [p.file_idx for p in got[3:]] == [1] * len(ROWS) and got[3].task == "t1"


def test_records_without_a_model_in_two_files_answer_for_two_models(tmp_path):
    for stem in ("sys_a", "sys_b"):
        pq.write_table(pa.table({"task_id": ["t1", "t2"], "answer": ["x", "y"]}), tmp_path / f"{stem}.parquet")
    files = resolve_inputs([str(tmp_path / "sys_a.parquet"), str(tmp_path / "sys_b.parquet")])
    assert PointerArray.scan(files, with_tasks=True).first.tolist() == [-1, -1, -1, -1]  # no repeat across files
