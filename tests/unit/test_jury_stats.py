"""Agreement of a judge panel (ragscale.stats.jury): alpha over the panel, each judge against the
median of the others, the records where the judges disagree most, the streaming collector."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest

from ragscale.stats.jury import JuryCollector, jury_agreement
from ragscale.stats.krippendorff import alpha

NAN = np.nan


def _panel(seed: int = 0, records: int = 200) -> np.ndarray:
    """Three judges on a 0..3 scale: a and b follow the truth closely, c is random."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 4, records).astype(float)
    a = truth.copy()
    b = truth.copy()
    flip = rng.random(records) < 0.1
    b[flip] = np.clip(truth[flip] + 1, 0, 3)
    c = rng.integers(0, 4, records).astype(float)
    return np.vstack([a, b, c])


def test_two_identical_judges():
    x = np.tile(np.array([0.1, 0.5, 1.0, 0.7, 0.5, 0.1]), (2, 1))
    out = jury_agreement(["a", "b"], x, "interval")
    assert out["alpha"] == 1.0
    assert out["level"] == "interval"
    assert out["records"] == 6
    assert out["disagreements"] == []
    for name in ("a", "b"):
        assert out["judges"][name]["alpha_vs_rest"] == 1.0
        assert out["judges"][name]["n"] == 6
        assert out["judges"][name]["mean"] == pytest.approx(np.mean(x[0]))


def test_two_judges_vs_rest_is_their_alpha():
    x = _panel()[[0, 2]]
    out = jury_agreement(["a", "c"], x, "ordinal")
    assert out["alpha"] == pytest.approx(alpha(x, "ordinal"))
    assert out["judges"]["a"]["alpha_vs_rest"] == pytest.approx(out["alpha"], abs=1e-12)
    assert out["judges"]["c"]["alpha_vs_rest"] == pytest.approx(out["alpha"], abs=1e-12)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_random_judge_agrees_least(level):
    x = _panel()
    out = jury_agreement(["a", "b", "c"], x, level)
    vs = {name: j["alpha_vs_rest"] for name, j in out["judges"].items()}
    assert min(vs, key=vs.get) == "c"
    assert vs["c"] < 0.1
    assert out["alpha"] == pytest.approx(alpha(x, level))
    # leave-one-out: c against the verdict of a and b: their median (their mean where they differ);
    # nominal: their majority, a record where they split left out
    rest = (x[0] + x[1]) / 2 if level != "nominal" else np.where(x[0] == x[1], x[0], NAN)
    assert vs["c"] == pytest.approx(alpha(np.vstack([x[2], rest]), level), abs=1e-12)
    rest_of_a = np.where(x[1] == x[2], x[1], NAN) if level == "nominal" else (x[1] + x[2]) / 2
    assert vs["a"] == pytest.approx(alpha(np.vstack([x[0], rest_of_a]), level), abs=1e-12)


def test_four_judges_median_of_rest():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 4, (4, 50)).astype(float)
    x[rng.random(x.shape) < 0.3] = NAN
    out = jury_agreement(["a", "b", "c", "d"], x, "interval")
    for j, name in enumerate("abcd"):
        rest = np.delete(x, j, axis=0)
        ref = [statistics.median(v) if (v := [r for r in col if not math.isnan(r)]) else NAN for col in rest.T]
        assert out["judges"][name]["alpha_vs_rest"] == pytest.approx(alpha(np.vstack([x[j], ref]), "interval"),
                                                                     abs=1e-12)


def test_planted_disagreements_in_order():
    base = np.full((3, 10), 2.0)
    base[:, 1] = [0, 3, 3]  # range 3, sd 1.41
    base[:, 4] = [0, 1, 2]  # range 2, sd 0.82
    base[:, 6] = [0, 0, 2]  # range 2, sd 0.94: before record 4
    base[:, 8] = [0, 1, 2]  # range 2, sd 0.82: ties with 4, after it
    base[:, 2] = [1, 2, 2]  # range 1
    base[:, 9] = [3, NAN, NAN]  # a single value: not a disagreement
    ids = [f"r{i}" for i in range(10)]
    out = jury_agreement(["a", "b", "c"], base, "interval", top=4, record_ids=ids)
    assert [d["record"] for d in out["disagreements"]] == ["r1", "r6", "r4", "r8"]
    assert [d["range"] for d in out["disagreements"]] == [3.0, 2.0, 2.0, 2.0]
    assert out["disagreements"][0]["scores"] == {"a": 0.0, "b": 3.0, "c": 3.0}
    assert out["records"] == 9
    more = jury_agreement(["a", "b", "c"], base, "interval", top=10)
    assert [d["record"] for d in more["disagreements"]] == [1, 6, 4, 8, 2]  # indices; no range-0 records
    assert jury_agreement(["a", "b", "c"], base, "interval", top=0)["disagreements"] == []


def test_missing_values():
    x = np.array([
        [1.0, 2.0, NAN, 3.0, NAN, 0.0],
        [1.0, NAN, 2.0, 3.0, NAN, 3.0],
        [NAN, 2.0, 0.0, 3.0, 1.0, NAN],
    ])
    out = jury_agreement(["a", "b", "c"], x, "ordinal", record_ids=list("uvwxyz"))
    assert {k: v["n"] for k, v in out["judges"].items()} == {"a": 4, "b": 4, "c": 4}
    assert out["judges"]["a"]["mean"] == pytest.approx(1.5)
    assert out["records"] == 5  # y has one value
    assert [d["record"] for d in out["disagreements"]] == ["z", "w"]
    assert out["disagreements"][0]["scores"] == {"a": 0.0, "b": 3.0}  # c has no value for z
    assert out["alpha"] == pytest.approx(alpha(x, "ordinal"))


def test_undefined_is_none():
    x = np.array([[1.0, 1.0, NAN], [1.0, 1.0, NAN], [NAN, NAN, NAN]])
    out = jury_agreement(["a", "b", "silent"], x, "nominal")
    assert out["alpha"] is None  # a single value seen
    assert out["judges"]["silent"] == {"n": 0, "alpha_vs_rest": None, "mean": None}
    assert out["judges"]["a"]["alpha_vs_rest"] is None
    one = jury_agreement(["only"], np.array([[1.0, 2.0]]), "interval")
    assert one["alpha"] is None and one["judges"]["only"]["alpha_vs_rest"] is None
    assert one["records"] == 0 and one["disagreements"] == []


def test_json_serializable():
    out = jury_agreement(["a", "b", "c"], _panel(records=30), "interval", record_ids=[str(i) for i in range(30)])
    assert json.loads(json.dumps(out)) == out


def test_rejects_bad_input():
    x = _panel(records=5)
    with pytest.raises(ValueError, match="rows"):
        jury_agreement(["a", "b"], x, "interval")
    with pytest.raises(ValueError, match="unique"):
        jury_agreement(["a", "a", "b"], x, "interval")
    with pytest.raises(ValueError, match="record ids"):
        jury_agreement(["a", "b", "c"], x, "interval", record_ids=["1"])
    with pytest.raises(ValueError, match="level"):
        jury_agreement(["a", "b", "c"], x, "cardinal")
    with pytest.raises(ValueError, match="top"):
        jury_agreement(["a", "b", "c"], x, "interval", top=-1)


def test_collector_equals_batch():
    x = _panel(records=60)
    x[1, ::7] = NAN
    names = ["a", "b", "c"]
    ids = [f"q{i}" for i in range(60)]
    collector = JuryCollector()
    for i, rid in enumerate(ids):
        collector.add(rid, {n: (None if math.isnan(x[j, i]) else float(x[j, i])) for j, n in enumerate(names)})
    assert len(collector) == 60
    assert collector.finish("ordinal", top=3) == jury_agreement(names, x, "ordinal", top=3, record_ids=ids)


def test_collector_late_and_absent_judges():
    collector = JuryCollector()
    collector.add("r0", {"a": 1.0})
    collector.add("r1", {"a": 2.0, "b": 2.0})
    collector.add("r2", {"b": 3.0, "a": 0.0})
    collector.add("r3", {"b": float("nan"), "c": 1.0, "a": 1.0})
    out = collector.finish("interval")
    assert list(out["judges"]) == ["a", "b", "c"]  # first-seen order
    assert {k: v["n"] for k, v in out["judges"].items()} == {"a": 4, "b": 2, "c": 1}
    expected = np.array([[1.0, 2.0, 0.0, 1.0], [NAN, 2.0, 3.0, NAN], [NAN, NAN, NAN, 1.0]])
    assert out == jury_agreement(["a", "b", "c"], expected, "interval", record_ids=["r0", "r1", "r2", "r3"])
    assert out["records"] == 3
    assert [d["record"] for d in out["disagreements"]] == ["r2"]


def test_collector_rejects():
    collector = JuryCollector()
    collector.add("r0", {"a": 1.0, "b": 1.0})
    with pytest.raises(ValueError, match="already"):
        collector.add("r0", {"a": 2.0})
    with pytest.raises(ValueError, match="infinite"):
        collector.add("r1", {"a": float("inf"), "new": 1.0})
    assert len(collector) == 1
    assert list(collector.finish("nominal")["judges"]) == ["a", "b"]  # the refused record left nothing


def test_empty_collector():
    assert JuryCollector().finish("interval") == {"alpha": None, "level": "interval", "judges": {}, "records": 0,
                                                  "disagreements": []}
