"""PairedValues' unit of resampling (docs/statistics.md, "Conversation-aware inference"): the sentence
and numbers summary.json's ``significance.unit`` carries, with the unit's name in the singular or the
plural; and its rows: tasks in the order of their keys, also after more tasks came in."""

import warnings

import numpy as np
import pytest

from ragscale.report import significance as sig


def _values(tasks, cluster_by=None):
    """``tasks``: (task id, record fields) pairs; one record each of model m scoring 0.5."""
    pv = sig.PairedValues(["RB_agg"], cluster_by=cluster_by)
    for task, fields in tasks:
        pv.add({"task_id": task, "model_id": "m", "error": None, "metrics": {"RB_agg": [0.5]}, **fields})
    return pv


@pytest.mark.parametrize("tasks, cluster_by, want", [
    ([("t1", {})], None, {"by": None, "name": "task", "units": 1, "tasks": 1, "text": "resampled by task: 1 task"}),
    ([("t1", {}), ("t2", {})], None,
     {"by": None, "name": "task", "units": 2, "tasks": 2, "text": "resampled by task: 2 tasks"}),
    ([("t1", {}), ("t2", {})], "conversation_id",
     {"by": None, "name": "task", "units": 2, "tasks": 2,
      "text": "resampled by task: 2 tasks (no record has conversation_id)"}),
])
def test_without_a_cluster_value_the_unit_is_the_task(tasks, cluster_by, want):
    assert _values(tasks, cluster_by).unit() == want


def test_conversations_are_named_as_such_with_the_task_count():
    pv = _values([("t1", {"conversation_id": "c1"}), ("t2", {"conversation_id": "c1"}),
                  ("t3", {"conversation_id": "c2"})], "conversation_id")
    assert pv.unit() == {"by": "conversation_id", "name": "conversation", "units": 2, "tasks": 3,
                         "text": "resampled by conversation: 2 conversations (3 tasks)"}


@pytest.mark.parametrize("field, plural", [
    ("topic", "topics"),
    ("turn", "turns"),
    ("category", "categories"),
    ("proXy", "proXies"),
    ("weekday", "weekdays"),
    ("day", "days"),
])
def test_another_fields_units_are_named_by_the_field_in_the_plural(field, plural):
    pv = _values([("t1", {field: "x"}), ("t2", {field: "y"}), ("t3", {field: "y"})], field)
    assert pv.unit() == {"by": field, "name": field, "units": 2, "tasks": 3,
                         "text": f"resampled by {field}: 2 {plural} (3 tasks)"}


@pytest.mark.parametrize("field", ["category", "topic"])
def test_a_single_unit_is_named_in_the_singular(field):
    pv = _values([("t1", {field: "x"}), ("t2", {field: "x"})], field)
    assert pv.unit()["text"] == f"resampled by {field}: 1 {field} (2 tasks)"


@pytest.mark.parametrize("missing, tail", [
    (1, "; 1 task without category, each on its own"),
    (2, "; 2 tasks without category, each on its own"),
])
def test_tasks_without_the_field_stand_alone_and_are_counted(missing, tail):
    tasks = [("t1", {"category": "x"}), ("t2", {"category": "x"})] + [(f"u{i}", {}) for i in range(missing)]
    pv = _values(tasks, "category")
    units = 1 + missing
    assert pv.unit() == {"by": "category", "name": "category", "units": units, "tasks": 2 + missing,
                         "text": f"resampled by category: {units} categories ({2 + missing} tasks){tail}"}


def test_rows_follow_the_task_keys_also_after_more_tasks_came_in():
    pv = sig.PairedValues(["RB_agg"])
    for task, v in [("t2", 0.2), ("t0", 0.0)]:
        pv.add({"task_id": task, "model_id": "m", "error": None, "metrics": {"RB_agg": [v]}})
    np.testing.assert_array_equal(pv.row("m", "RB_agg"), [0.0, 0.2])
    for task, v in [("t1", 0.1), ("t3", 0.3)]:
        pv.add({"task_id": task, "model_id": "m", "error": None, "metrics": {"RB_agg": [v]}})
    np.testing.assert_array_equal(pv.row("m", "RB_agg"), [0.0, 0.1, 0.2, 0.3])
    at, vals = pv.records("m", "RB_agg")
    assert at.tolist() == [0, 1, 2, 3] and vals.tolist() == [0.0, 0.1, 0.2, 0.3]


def test_without_records_rows_are_empty():
    pv = sig.PairedValues(["RB_agg"])
    assert pv.row("m", "RB_agg").shape == (0,)
    at, vals = pv.records("m", "RB_agg")
    assert at.shape == vals.shape == (0,)
    assert pv.clusters() is None


def test_a_task_a_model_did_not_answer_is_nan_without_a_numpy_warning():
    pv = sig.PairedValues(["RB_agg"])
    pv.add({"task_id": "t1", "model_id": "a", "error": None, "metrics": {"RB_agg": [0.4]}})
    pv.add({"task_id": "t1", "model_id": "a", "error": None, "metrics": {"RB_agg": [0.6]}})
    pv.add({"task_id": "t2", "model_id": "b", "error": None, "metrics": {"RB_agg": [0.1]}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        row = pv.row("a", "RB_agg")
    np.testing.assert_array_equal(row, [0.5, np.nan])
