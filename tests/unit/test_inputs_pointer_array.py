"""The run's pointers as numpy columns (ragscale.io.inputs.PointerArray): a record repeats an
earlier one only when their (model, task, run) slot hashes are equal, whatever 64-bit values the
hashes take, and pointers built without ``first`` repeat nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragscale.io import inputs
from ragscale.io.inputs import KEY_LINE_BITS, InputFile, Pointer, PointerArray, resolve_inputs


def test_pointers_built_without_first_repeat_nothing():
    arr = PointerArray(np.array([0, 0, 1], np.int32), np.array([1, 2, 0], np.int64), np.array([0, 5, -1], np.int64),
                       np.zeros(3, np.int64), np.zeros(3, bool))
    assert arr.first.dtype == np.int64
    assert arr.first.tolist() == [-1, -1, -1]
    assert arr[np.array([2, 0])].first.tolist() == [-1, -1]


@pytest.mark.parametrize("a, b", [
    (0, -(2**63)),  # 0.0 and -0.0 as float64
    (0x7FF8000000000001, 0x7FF8000000000002),  # both NaN as float64
    (0x7FF0000000000001, -1),  # both NaN as float64
])
def test_distinct_slot_hashes_are_distinct_slots_whatever_their_bits(monkeypatch, a, b):
    pointers = [Pointer(0, 1, 0, "t", a), Pointer(0, 2, 9, "t", b), Pointer(0, 3, 18, "t", a), Pointer(0, 4, 27, None)]
    monkeypatch.setattr(inputs, "scan", lambda files, *, with_tasks, fast=True: iter(pointers))
    arr = PointerArray.scan([InputFile("/x/in.jsonl", "jsonl", "in", "in-0")], with_tasks=True)
    assert arr.first.tolist() == [-1, -1, 1, -1]
    assert arr.line.tolist() == [1, 2, 3, 4] and arr.has_task.tolist() == [True, True, True, False]


def test_a_record_repeating_a_model_task_and_run_points_at_the_first(tmp_path):
    a = tmp_path / "a.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in [
        {"model_id": "m", "task_id": "t1", "response": "x"},
        {"model_id": "m", "task_id": "t2", "response": "y"},
        {"model_id": "n", "task_id": "t1", "response": "z"},
    ]))
    b = tmp_path / "b.jsonl"
    b.write_text(json.dumps({"model_id": "m", "task_id": "t1", "response": "again"}) + "\n")
    arr = PointerArray.scan(resolve_inputs([str(a), str(b)]), with_tasks=True)
    assert arr.file_idx.tolist() == [0, 0, 0, 1] and arr.line.tolist() == [1, 2, 3, 1]
    assert arr.first.tolist() == [-1, -1, -1, (0 << KEY_LINE_BITS) | 1]
