"""Every report names a count of resampled units with the same plural: the significance sentence,
the HTML report's comparisons and the agreement block say "weekdays", "categories", "conversations"."""

import pytest

from ragscale.report import html_significance
from ragscale.report.wording import plural

CASES = [("conversation", "conversations"), ("category", "categories"), ("weekday", "weekdays"),
         ("day", "days"), ("key", "keys"), ("topic", "topics"), ("proxy", "proxies")]


@pytest.mark.parametrize("name, many", CASES)
def test_a_name_is_made_plural_once_there_is_more_or_less_than_one(name, many):
    assert [plural(name, n) for n in (0, 1, 2, 4)] == [many, name, many, many]


@pytest.mark.parametrize("name, many", CASES)
def test_the_html_reports_comparisons_count_units_with_the_same_plural(name, many):
    block = {"unit": {"name": name}, "metrics": {"Recall": [
        {"a": "m1", "b": "m2", "n": 12, "units": 4, "diff": 0.1, "p": 0.5},
        {"a": "m1", "b": "m3", "n": 12, "units": 1, "diff": 0.1, "p": 0.5}]}}
    rows = html_significance.significance({"significance": block})["metrics"][0]["rows"]
    assert [r["units"] for r in rows] == [f" (4 {many})", f" (1 {name})"]
