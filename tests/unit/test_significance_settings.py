"""The significance settings' checks (docs/configuration.md, docs/statistics.md): each bad value is a
one-line UserError naming the setting (``significance.`` for the config, ``--`` for ragscale compare),
what it must be and the value given; the limits themselves are accepted."""

from dataclasses import replace

import pytest

from ragscale.config import SignificanceConf
from ragscale.errors import UserError
from ragscale.report import significance as sig

BETWEEN = "a number between 0 and 1 (exclusive)"


@pytest.mark.parametrize("key, value", [
    ("enabled", True), ("enabled", False),
    ("resamples", 100), ("resamples", 10000),
    ("confidence", 0.5), ("confidence", 0.999), ("alpha", 0.001), ("alpha", 0.1),
    ("correction", "holm"), ("correction", "bonferroni"), ("correction", "none"), ("correction", "bh"),
    ("all_pairs_max_models", 2), ("all_pairs_max_models", 20),
    ("seed", 0), ("seed", 7),
])
def test_values_within_the_limits_are_accepted(key, value):
    sig.check_settings(replace(SignificanceConf(), **{key: value}))


@pytest.mark.parametrize("key, value, want", [
    ("enabled", "yes", "true or false"),
    ("enabled", 1, "true or false"),
    ("enabled", None, "true or false"),
    ("resamples", 99, "an integer >= 100"),
    ("resamples", 100.0, "an integer >= 100"),
    ("resamples", True, "an integer >= 100"),
    ("resamples", "1000", "an integer >= 100"),
    ("confidence", 0, BETWEEN),
    ("confidence", 1, BETWEEN),
    ("confidence", 1.0, BETWEEN),
    ("confidence", -0.5, BETWEEN),
    ("confidence", True, BETWEEN),
    ("confidence", "0.95", BETWEEN),
    ("alpha", 0.0, BETWEEN),
    ("alpha", 1, BETWEEN),
    ("alpha", False, BETWEEN),
    ("alpha", None, BETWEEN),
    ("correction", "sidak", "one of holm, bonferroni, none, bh"),
    ("correction", "Holm", "one of holm, bonferroni, none, bh"),
    ("all_pairs_max_models", 1, "an integer >= 2"),
    ("all_pairs_max_models", 2.0, "an integer >= 2"),
    ("all_pairs_max_models", True, "an integer >= 2"),
    ("seed", -1, "an integer >= 0"),
    ("seed", 1.5, "an integer >= 0"),
    ("seed", False, "an integer >= 0"),
    ("seed", None, "an integer >= 0"),
])
def test_a_bad_value_is_named_with_what_it_must_be(key, value, want):
    with pytest.raises(UserError) as err:
        sig.check_settings(replace(SignificanceConf(), **{key: value}))
    assert str(err.value) == f"significance.{key} must be {want}, got {value!r}"


def test_the_prefix_names_the_settings_of_the_command_line():
    with pytest.raises(UserError) as err:
        sig.check_settings(replace(SignificanceConf(), resamples=10), prefix="--")
    assert str(err.value) == "--resamples must be an integer >= 100, got 10"

