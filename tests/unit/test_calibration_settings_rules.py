"""The calibration's settings as a user writes them: each bad setting's one line, word for word, the
``calibration.map`` items parsed into the maps they mean (a linear map that reverses or shifts the
scale, a table), and the pairs and maps a run's labels resolve to."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragscale.errors import UserError
from ragscale.report.agreement_io import HumanRatings
from ragscale.report.calibration_settings import ScaleMap, check_settings, parse_maps, resolve


def settings(**kw):
    return SimpleNamespace(**{"min_labels": 10, "confidence": 0.95, "map": [], **kw})


@pytest.mark.parametrize("key, value, want", [
    ("min_labels", 1, "an integer >= 2"),
    ("min_labels", True, "an integer >= 2"),
    ("min_labels", 2.0, "an integer >= 2"),
    ("min_labels", 12.5, "an integer >= 2"),
    ("confidence", 0, "a number between 0 and 1 (exclusive)"),
    ("confidence", 1, "a number between 0 and 1 (exclusive)"),
    ("confidence", 1.5, "a number between 0 and 1 (exclusive)"),
    ("confidence", True, "a number between 0 and 1 (exclusive)"),
    ("confidence", "high", "a number between 0 and 1 (exclusive)"),
    ("confidence", "0.9", "a number between 0 and 1 (exclusive)"),
])
def test_a_bad_setting_is_one_line_naming_it_and_its_value(key, value, want):
    with pytest.raises(UserError) as e:
        check_settings(settings(**{key: value}), prefix="calibrate.")
    assert str(e.value) == f"calibrate.{key} must be {want}, got {value!r}"


@pytest.mark.parametrize("ok", [dict(min_labels=2), dict(min_labels=500), dict(confidence=0.5),
                                dict(confidence=0.999), dict(map=["grade=1..4:0..1"])])
def test_good_settings_pass(ok):
    assert check_settings(settings(**ok)) is None


EXPECTED = ("expected HUMAN=A..B:C..D (linear) or HUMAN=v1:m1,v2:m2,... (a table), "
            "e.g. faithfulness=1..4:0..1")


@pytest.mark.parametrize("item, reason", [
    ("grade", EXPECTED),
    ("=1..4:0..1", EXPECTED),
    ("grade=", EXPECTED),
    (" = ", EXPECTED),
    ("grade=yes:1=", "'1=' is not a number"),
    ("grade=1..four:0..1", "'four' is not a number"),
    ("grade=1..4:0..inf", "'inf' is not a finite number"),
    ("grade=yes:high", "'high' is not a number"),
    ("grade=yes:nan", "'nan' is not a finite number"),
    ("grade=1:2:3", "'1:2' is not a human value (a number, yes/no or true/false)"),
    ("grade=maybe:1", "'maybe' is not a human value (a number, yes/no or true/false)"),
    ("grade=yes:1,no", "'no' is not VALUE:MAPPED"),
    ("grade=1..4", "a linear map is A..B:C..D, e.g. 1..4:0..1"),
    ("grade=2..2:0..1", "the human range 2..2 is empty"),
])
def test_a_bad_map_item_is_one_line_naming_the_item(item, reason):
    with pytest.raises(UserError) as e:
        parse_maps([item])
    assert str(e.value) == f"calibration.map {item!r}: {reason}"


def test_map_items_parse_into_the_maps_they_mean():
    maps = parse_maps(["faithfulness = 1..5:1..0", "grade=yes:1, no:0", "shift=0..10:-1..1"])
    assert maps == {
        "faithfulness": ScaleMap("faithfulness", "1..5:1..0", linear=(1.0, 5.0, 1.0, 0.0)),
        "grade": ScaleMap("grade", "yes:1, no:0", table={1.0: 1.0, 0.0: 0.0}),
        "shift": ScaleMap("shift", "0..10:-1..1", linear=(0.0, 10.0, -1.0, 1.0)),
    }
    # a reversed scale: 1 (worst) is 1.0, 5 (best) is 0.0
    assert [maps["faithfulness"](v) for v in (1, 2, 3, 5)] == [1.0, 0.75, 0.5, 0.0]
    assert [maps["shift"](v) for v in (0, 5, 10)] == [-1.0, 0.0, 1.0]
    assert [maps["grade"](v) for v in (1.0, 0.0)] == [1.0, 0.0]
    with pytest.raises(UserError) as e:
        maps["grade"](0.5)
    assert str(e.value) == "calibration.map grade=yes:1, no:0: human value 0.5 is not mapped (mapped: 0, 1)"


def labels(*metrics: str) -> HumanRatings:
    return HumanRatings(source="/data/labels.csv", layout="plain",
                        values={("m", "t1"): {m: 1.0 for m in metrics}})


def test_labels_resolve_to_their_pairs_and_maps():
    chosen, maps = resolve(labels("faith", "grade"), ["faith=Faithfulness", "grade=RB_agg"],
                           ["faith=1..4:0..1"], ["Faithfulness", "RB_agg", "RL_F"])
    assert chosen == {"faith": "Faithfulness", "grade": "RB_agg"}
    assert maps == {"faith": ScaleMap("faith", "1..4:0..1", linear=(1.0, 4.0, 0.0, 1.0))}


def test_a_map_of_an_unpaired_human_metric_names_every_one_and_the_pairs():
    with pytest.raises(UserError) as e:
        resolve(labels("faith", "grade"), ["faith=Faithfulness", "grade=RB_agg"],
                ["zeta=1..4:0..1", "alpha=yes:1,no:0", "faith=1..4:0..1"], ["Faithfulness", "RB_agg"])
    assert str(e.value) == ("calibration.map: alpha, zeta is not a paired human metric "
                            "(pairs: faith=Faithfulness, grade=RB_agg)")


def test_a_pair_naming_no_human_metric_names_the_labels_file():
    with pytest.raises(UserError) as e:
        resolve(labels("faith"), ["grade=RB_agg"], [], ["RB_agg"])
    assert str(e.value) == ("--pair grade=RB_agg: 'grade' is not a human metric in /data/labels.csv; "
                            "human metrics: faith")
