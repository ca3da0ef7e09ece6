"""The metric catalog's rules for a spec's facts (needs, bounds), for the names a user may give
a metric (short labels, the "did you mean" of an unknown one) and for a panel's per-judge
columns (ragscale.metrics.registry)."""

from __future__ import annotations

import pytest

from ragscale.errors import UserError
from ragscale.metrics import registry
from ragscale.metrics.registry import UNIT, MetricSpec, accepted_names, canonical, jury_level


def test_a_metric_may_need_every_record_field():
    assert MetricSpec("m", "judge", "custom", needs=("question", "contexts", "reference")).needs == (
        "question", "contexts", "reference")


def test_a_field_outside_the_record_fields_is_refused_with_the_list():
    with pytest.raises(ValueError) as e:
        MetricSpec("m", "judge", "custom", needs=("question", "answer"))
    assert str(e.value) == "metric m: needs ('question', 'answer'): a field is not one of question, contexts, reference"


@pytest.mark.parametrize("dtype, bounds, expected", [
    ("bool", None, UNIT),  # a flag is 0 or 1
    ("bool", (0.0, 2.0), (0.0, 2.0)),
    ("float", None, None),  # not bounded unless declared
    ("int", None, None),
    ("float", (-1.0, 1.0), (-1.0, 1.0)),
])
def test_a_flag_is_bounded_by_zero_and_one_and_other_metrics_by_what_they_declare(dtype, bounds, expected):
    assert MetricSpec("m", "judge", "custom", dtype=dtype, bounds=bounds).bounds == expected


@pytest.mark.parametrize("bounds", [(1.0, 1.0), (1.0, 0.0)])
def test_bounds_must_have_a_low_below_the_high(bounds):
    with pytest.raises(ValueError) as e:
        MetricSpec("m", "judge", "custom", bounds=bounds)
    assert str(e.value) == f"metric m: bounds {bounds!r} are not (low, high)"


def test_a_short_label_two_metrics_share_names_neither(monkeypatch):
    specs = registry.catalog()
    monkeypatch.setitem(specs, "zz_one", MetricSpec("zz_one", "judge", "custom", short="ZZ"))
    monkeypatch.setitem(specs, "zz_two", MetricSpec("zz_two", "judge", "custom", short="ZZ"))
    monkeypatch.setitem(specs, "zz_solo", MetricSpec("zz_solo", "judge", "custom", short="ZS"))
    names = accepted_names()
    assert "ZZ" not in names and names["ZS"] == "zz_solo"
    with pytest.raises(UserError):
        canonical("ZZ")


@pytest.mark.parametrize("typo, suggested", [
    ("hhem_scor", "'hhem'"),  # hhem_score and hhem are the same metric
    ("answerd", "'answered'"),
    ("citation_f", "'citation_f1', 'citation_recall'"),
    ("nuggets_vita", "'nuggets_vital', 'nuggets_all', 'nuggets_strict_vital'"),
])
def test_an_unknown_metric_suggests_up_to_three_close_metrics_each_once(typo, suggested):
    with pytest.raises(UserError) as e:
        canonical(typo)
    assert str(e.value) == (f"unknown metric {typo!r} (did you mean {suggested}?); `ragscale metrics` lists every "
                            "metric with its aliases")


@pytest.mark.parametrize("column, level", [
    ("SufficiencyHit@K@gpt-4o", "nominal"),  # the metric's own name has an @
    ("SufficiencyHit@K", "nominal"),
    ("RB_llm@gpt-4o", "ordinal"),
])
def test_a_per_judge_column_has_its_metrics_level(column, level):
    assert jury_level(column) == level
