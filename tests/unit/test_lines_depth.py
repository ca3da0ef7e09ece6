"""How deep a JSON value is nested and NaN cleaning (ragscale.io.lines), for scalars as for
containers: a scalar is 0 levels deep and is its own clean copy."""

from __future__ import annotations

import math

import pytest

from ragscale.io.lines import clean_nan, depth


@pytest.mark.parametrize("value, levels", [
    (5, 0), ("text", 0), (None, 0), (1.5, 0),
    ([], 1), ({}, 1), (["a", 1], 1), ({"a": "b"}, 1),
    ([[]], 2), ({"a": [1, {"b": "c"}]}, 3), (["x", ["y", ["z"]], {}], 3),
])
def test_depth_counts_nested_arrays_and_objects(value, levels):
    assert depth(value) == levels


@pytest.mark.parametrize("value", [3, "text", "", True, 0, 2.5, -1e308])
def test_a_finite_scalar_is_kept(value):
    assert clean_nan(value) == value


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, None])
def test_a_nan_or_infinite_scalar_is_none(value):
    assert clean_nan(value) is None


def test_nan_is_none_at_any_depth():
    assert clean_nan({"a": [1, math.nan, {"b": math.inf}], "c": "x"}) == {"a": [1, None, {"b": None}], "c": "x"}
