"""Experiment tracking's names and params at their limits (ragscale.tracking): the 250-character
key, the 500-character value, suffixes of clashing long keys, top-level lists and scalars."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from ragscale.tracking import MAX_NAME, MAX_PARAM_VALUE, flatten, metrics_of, params_of, sanitize_name


@pytest.mark.parametrize("raw, expected", [
    ("run 1 ", "run 1 "),  # a trailing space is an allowed character, kept
    ("modelX", "modelX"),
    ("model/X", "model/X"),
    ("a" * 249 + "/b", "a" * 249),  # cut at 250 right after a slash: no trailing slash
])
def test_a_sanitized_name_keeps_its_last_allowed_characters_and_never_ends_in_a_slash(raw, expected):
    assert sanitize_name(raw) == expected


def test_a_param_value_of_exactly_500_characters_is_kept_whole():
    assert flatten({"k": "y" * MAX_PARAM_VALUE}) == {"k": "y" * MAX_PARAM_VALUE}
    assert flatten({"k": "y" * (MAX_PARAM_VALUE + 1)}) == {"k": "y" * (MAX_PARAM_VALUE - 1) + "…"}


def test_a_value_json_cannot_encode_is_logged_as_its_text():
    assert flatten({"path": PurePosixPath("/data/in.jsonl"), "ids": [PurePosixPath("a")]}) == {
        "path": '"/data/in.jsonl"', "ids": '["a"]'}


def test_a_top_level_list_of_dicts_is_indexed_from_zero_without_a_leading_dot():
    assert flatten([{"name": "a"}, {"name": "b", "n": 2}]) == {"0.name": "a", "1.name": "b", "1.n": "2"}


@pytest.mark.parametrize("obj, expected", [(5, "5"), ("text", "text"), ({}, "{}"), ([], "[]"), (None, "null")])
def test_a_top_level_scalar_or_empty_container_is_one_param_named_value(obj, expected):
    assert flatten(obj) == {"value": expected}


def test_long_keys_that_clash_get_numbered_suffixes_within_250_characters():
    long = "m" * 300
    params = params_of({long: 1, long + "x": 2, long + "y": 3})
    assert params == {"m" * MAX_NAME: "1", "m" * (MAX_NAME - 2) + "_2": "2", "m" * (MAX_NAME - 2) + "_3": "3"}
    metrics = metrics_of({"models": {"x" * 300: {"metrics": {"P@5": 0.1}}, "x" * 301: {"metrics": {"P@5": 0.2}}}})
    assert metrics == {"x" * MAX_NAME: 0.1, "x" * (MAX_NAME - 2) + "_2": 0.2}


def test_the_tenth_clash_keeps_a_key_of_250_characters():
    params = params_of({"k" * 300 + str(i): i for i in range(10)})
    assert list(params)[-1] == "k" * (MAX_NAME - 3) + "_10"
    assert all(len(k) == MAX_NAME for k in params)
