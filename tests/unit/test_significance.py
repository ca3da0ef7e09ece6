"""Significance between models: the paired tests against scipy called directly on the same data,
known differences detected and identical models not, Holm by hand, the all-pairs and vs-leader
designs, the summary.json block, leaderboard.md and significance.csv, and bad settings."""

import csv
import json
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from ragscale.config import SignificanceConf
from ragscale.errors import UserError
from ragscale.report import headline as hd
from ragscale.report import leaderboard as lb
from ragscale.report import significance as sig
from ragscale.stats import paired as st
from ragscale.stats.intervals import rng_arg
from ragscale.report.summary import SummarySink

BLOCK_KEYS = ["method", "confidence", "alpha", "correction", "design", "resamples", "unit", "metrics"]
ENTRY_KEYS = {"a", "b", "n", "mean_a", "mean_b", "diff", "ci", "p", "p_adjusted", "significant", "better"}


def mean(x, axis=-1):
    return np.mean(x, axis=axis)


def values_of(scores: dict[str, np.ndarray], metric: str = "RB_agg") -> sig.PairedValues:
    """PairedValues of records whose metric is ``scores[model][task]`` (NaN: the record has no value)."""
    pv = sig.PairedValues([metric])
    for model, vals in scores.items():
        for t, v in enumerate(vals):
            pv.add({"task_id": f"t{t}", "model_id": model, "error": None,
                    "metrics": {metric: None if np.isnan(v) else [float(v)]}})
    return pv


def settings(**kw) -> SignificanceConf:
    return replace(SignificanceConf(), **kw)


# ---------------------------------------------------------------- the tests themselves, against scipy

@pytest.mark.parametrize("n", [5, 10, 13])
def test_exact_pvalue_equals_scipys_permutation_test(n):
    """2**n <= resamples: every sign pattern, as scipy enumerates them: equal p-values."""
    rng = np.random.default_rng(n)
    d = np.round(rng.normal(0.1, 0.3, (4, n)), 2)
    d[3] = rng.normal(0, 1, n)
    want = stats.permutation_test((d,), mean, permutation_type="samples", n_resamples=10000, axis=-1,
                                  vectorized=True).pvalue
    assert st.signflip_pvalues(d, 10000, np.random.default_rng(0)) == pytest.approx(want, abs=1e-12)


def test_random_pvalue_agrees_with_scipys_permutation_test():
    """Random sign flips: scipy's p-value within Monte Carlo error (10 000 flips each: sd <= 0.005)."""
    rng = np.random.default_rng(7)
    d = rng.normal(0.0, 1.0, (6, 80)) + np.array([0.0, 0.1, 0.2, 0.25, 0.3, 0.5])[:, None]
    mine = st.signflip_pvalues(d, 10000, np.random.default_rng(1))
    ref = stats.permutation_test((d,), mean, permutation_type="samples", n_resamples=10000, axis=-1,
                                 vectorized=True, **rng_arg(2)).pvalue
    assert np.abs(mine - ref).max() < 0.025
    assert mine[-1] < 0.01 and mine[0] > 0.05  # and the test is not blind: a clear shift is found


@pytest.mark.parametrize("kind", ["continuous", "binary"])
def test_bootstrap_interval_equals_scipys_paired_bca(kind):
    """The interval of paired_tests is scipy.stats.bootstrap's paired BCa interval of mean(a - b),
    called directly with the generator paired_tests uses for that many tasks."""
    rng = np.random.default_rng(3)
    n = 150
    if kind == "continuous":
        a = rng.normal(0.6, 0.2, n)
        b = a - 0.05 + rng.normal(0, 0.2, n)
    else:  # 0/1 scores: many ties among the resampled means
        a = (rng.random(n) < 0.7).astype(float)
        b = (rng.random(n) < 0.6).astype(float)
    lo, hi, p = st.paired_tests([a - b], resamples=2000, confidence=0.95, seed=4)[0]
    ref = stats.bootstrap((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), paired=True, vectorized=True,
                          n_resamples=2000, method="BCa", **{k: st.resample_rng(4, n, 0) for k in rng_arg(0)})
    assert (lo, hi) == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high), abs=1e-9)
    assert 0 < p <= 1


def test_bca_formula_equals_scipys_on_its_own_distribution():
    """Given scipy's bootstrap distribution, the BCa bounds are scipy's (also with ties and skew)."""
    rng = np.random.default_rng(11)
    d = np.vstack([rng.exponential(1, 40) - 1, rng.integers(-1, 2, 40), np.round(rng.normal(0, 1, 40), 1)])
    res = stats.bootstrap((d,), mean, n_resamples=3000, method="BCa", axis=-1, vectorized=True, **rng_arg(5))
    lo, hi = st.bca_interval(d, res.bootstrap_distribution, 0.95)
    assert lo == pytest.approx(res.confidence_interval.low, abs=1e-12)
    assert hi == pytest.approx(res.confidence_interval.high, abs=1e-12)


def test_many_comparisons_share_resamples_by_matrix_product():
    """From GATHER_ROWS comparisons of one size on, bootstrap means are a matrix product of resample
    counts: the same draws, so the same means (to rounding) as the gather scipy does."""
    rng = np.random.default_rng(2)
    d = rng.normal(size=(st.GATHER_ROWS + 2, 57))
    many = st.bootstrap_means(d, 500, np.random.default_rng(9))
    one = np.vstack([st.bootstrap_means(row[None, :], 500, np.random.default_rng(9)) for row in d])
    assert many == pytest.approx(one, abs=1e-12)


def test_holm_and_bonferroni_by_hand():
    p = [0.01, 0.04, 0.03, 0.2]
    # Holm: sorted 0.01, 0.03, 0.04, 0.2 times 4, 3, 2, 1 = 0.04, 0.09, 0.08, 0.2; running max: 0.04, 0.09, 0.09, 0.2
    assert st.adjust(p, "holm") == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert st.adjust(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.8])
    assert st.adjust(p, "none") == pytest.approx(p)
    assert st.adjust([0.5, 0.6], "holm") == pytest.approx([1.0, 1.0])  # capped at 1
    with pytest.raises(ValueError):
        st.adjust(p, "sidak")


# ---------------------------------------------------------------- detection and its absence

def test_known_difference_detected_identical_models_not():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.8, 200)
    scores = {"strong": base + 0.08 + rng.normal(0, 0.1, 200), "weak": base + rng.normal(0, 0.1, 200)}
    scores["copy"] = scores["weak"].copy()
    block = sig.compare(["strong", "weak", "copy"], values_of(scores), settings(resamples=2000))
    assert list(block) == BLOCK_KEYS and block["design"] == "all-pairs" and block["correction"] == "holm"
    assert block["method"] == "paired bootstrap (BCa) + paired permutation test"
    by_pair = {(e["a"], e["b"]): e for e in block["metrics"]["RB_agg"]}
    assert len(by_pair) == 3 and all(ENTRY_KEYS <= set(e) for e in by_pair.values())
    hit = by_pair[("strong", "weak")]
    assert hit["significant"] and hit["better"] == "strong" and hit["n"] == 200
    assert hit["diff"] == pytest.approx(hit["mean_a"] - hit["mean_b"]) == pytest.approx(
        float(np.mean(scores["strong"] - scores["weak"])))
    assert 0 < hit["ci"][0] < hit["diff"] < hit["ci"][1] < 0.16
    # no sign flip reaches the observed difference: the smallest p of 2000 random flips, (0 + 1) / 2001 per
    # side; Holm multiplies the two smallest (strong vs weak, strong vs copy) by 3
    assert hit["p"] == pytest.approx(2 / 2001) and hit["p_adjusted"] == pytest.approx(6 / 2001)
    same = by_pair[("weak", "copy")]
    assert not same["significant"] and same["better"] is None and same["p"] == 1.0 and same["ci"] == [0.0, 0.0]
    assert same["note"] == "all differences zero"
    # Holm over the metric's three p-values, by hand
    ps = [by_pair[k]["p"] for k in by_pair]
    assert [by_pair[k]["p_adjusted"] for k in by_pair] == pytest.approx(st.adjust(ps, "holm"))


def test_no_difference_is_rarely_significant():
    """20 seeded datasets of two models with the same distribution: p >= 0.05 in most of them."""
    kept = 0
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        base = rng.uniform(0, 1, 120)
        scores = {"a": base + rng.normal(0, 0.1, 120), "b": base + rng.normal(0, 0.1, 120)}
        e = sig.compare(["a", "b"], values_of(scores), settings(resamples=1000, seed=seed))["metrics"]["RB_agg"][0]
        kept += e["p"] >= 0.05
        assert e["significant"] == (e["p_adjusted"] <= 0.05)
    assert kept >= 16


def test_lower_is_better_and_deterministic():
    """A taxonomy rate ranks lower first: the model with the lower mean is the better one."""
    rng = np.random.default_rng(1)
    low = rng.uniform(0, 0.3, 100)
    scores = {"careful": low, "sloppy": low + 0.2}
    pv = values_of(scores, "UnsupportedClaimRate")
    assert hd.higher_is_better("UnsupportedClaimRate") is False
    a = sig.compare(["careful", "sloppy"], pv, settings(resamples=500))
    assert a["metrics"]["UnsupportedClaimRate"][0]["better"] == "careful"
    assert a == sig.compare(["careful", "sloppy"], pv, settings(resamples=500))  # seeded
    noisy = {"careful": low, "sloppy": low + rng.normal(0.01, 0.2, 100)}
    one = sig.compare(["careful", "sloppy"], values_of(noisy), settings(resamples=500, seed=1))
    other = sig.compare(["careful", "sloppy"], values_of(noisy), settings(resamples=500, seed=2))
    assert one["metrics"]["RB_agg"][0]["ci"] != other["metrics"]["RB_agg"][0]["ci"]


# ---------------------------------------------------------------- pairing, designs, notes

def test_pairing_by_task_with_repeats_errors_nulls_and_keyless_records():
    pv = sig.PairedValues(["RB_agg"])
    rows = [("a", "t1", 1.0), ("a", "t1", 0.0), ("a", "t2", 1.0), ("a", "t3", 0.2),  # t1 twice: averaged
            ("b", "t1", 0.1), ("b", "t2", 0.4), ("b", "t4", 0.9)]
    for model, task, v in rows:
        pv.add({"task_id": task, "model_id": model, "error": None, "metrics": {"RB_agg": [v]}})
    pv.add({"task_id": "t3", "model_id": "b", "error": {"stage": "judge"}, "metrics": {"RB_agg": [0.0]}})
    pv.add({"task_id": "t3", "model_id": "b", "error": None, "metrics": {"RB_agg": None}})
    pv.add({"model_id": "b", "error": None, "metrics": {"RB_agg": [0.5]}})  # no task key
    pv.add({"conversation_id": "c", "turn": 2, "model_id": "b", "error": None, "metrics": {"RB_agg": [0.5]}})
    assert pv.keyless == 1 and sig.task_key({"query_id": 7}) == "query_id=7"
    e = sig.compare(["a", "b"], pv, settings())["metrics"]["RB_agg"][0]
    assert e["n"] == 2 and e["mean_a"] == pytest.approx(0.75) and e["mean_b"] == pytest.approx(0.25)
    assert e["note"] == "fewer than 10 paired tasks" and e["p"] is not None


def test_untestable_pairs_have_notes_and_no_p():
    scores = {"a": np.array([0.5, np.nan, 0.2]), "b": np.array([0.1, 0.3, np.nan]), "c": np.array([np.nan] * 3)}
    pv = values_of(scores)
    block = sig.compare(["a", "b", "c"], pv, settings())
    by_pair = {(e["a"], e["b"]): e for e in block["metrics"]["RB_agg"]}
    one = by_pair[("a", "b")]
    assert one["n"] == 1 and one["p"] is None and one["ci"] is None and one["diff"] == pytest.approx(0.4)
    assert one["note"] == "only 1 paired task: not tested" and not one["significant"]
    none = by_pair[("a", "c")]
    assert none["n"] == 0 and none["mean_a"] is None and none["diff"] is None and none["note"] == "no paired tasks"


def test_vs_leader_with_nine_models():
    rng = np.random.default_rng(5)
    base = rng.uniform(0, 1, 60)
    scores = {f"m{i}": base + 0.01 * i + rng.normal(0, 0.05, 60) for i in range(9)}
    order = [f"m{i}" for i in range(8, -1, -1)]  # the leader first
    block = sig.compare(order, values_of(scores), settings(resamples=500))
    entries = block["metrics"]["RB_agg"]
    assert block["design"] == "vs-leader" and len(entries) == 8
    assert all(e["a"] == "m8" for e in entries) and [e["b"] for e in entries] == order[1:]
    assert entries[-1]["significant"] and entries[-1]["better"] == "m8"  # 0.08 above m0 with sd 0.07 per task
    wide = sig.compare(order, values_of(scores), settings(resamples=500, all_pairs_max_models=9))
    assert wide["design"] == "all-pairs" and len(wide["metrics"]["RB_agg"]) == 36


def test_fewer_than_two_models_no_block(tmp_path):
    pv = values_of({"solo": np.array([0.1, 0.2, 0.3])})
    assert sig.compare(["solo"], pv, settings()) is None
    sink = SummarySink(str(tmp_path), ["RB_agg"])
    for t in range(3):
        rec = {"task_id": f"t{t}", "model_id": "solo", "error": None, "metrics": {"RB_agg": [0.5]},
               "ragscale": {"record_key": f"k{t}"}}
        sink.add(rec)
    summary = sink.finish(None, lambda s: sig.for_summary(s, pv, settings()))
    with open(tmp_path / "summary.json") as fh:
        assert "significance" not in summary and "significance" not in json.load(fh)
    assert "Significance" not in lb.format_markdown(summary)
    assert "significance" not in lb.write_leaderboard(summary, str(tmp_path))


# ---------------------------------------------------------------- summary.json, leaderboard.md, significance.csv

def _sweep_summary(tmp_path):
    rng = np.random.default_rng(8)
    base = rng.uniform(0.2, 0.8, 100)
    scores = {"alpha": base + 0.1 + rng.normal(0, 0.05, 100), "beta": base + rng.normal(0, 0.05, 100),
              "gamma": base + rng.normal(0, 0.05, 100)}
    metrics = ["RB_agg", "Length"]
    sink = SummarySink(str(tmp_path), metrics)
    pv = sig.PairedValues(sig.compared_metrics(metrics))
    for model, vals in scores.items():
        for t, v in enumerate(vals):
            rec = {"task_id": f"t{t}", "model_id": model, "error": None, "metrics": {"RB_agg": [v], "Length": [10]},
                   "ragscale": {"record_key": f"{model}{t}"}}
            sink.add(rec)
            pv.add(rec)
    return sink.finish(None, lambda s: sig.for_summary(s, pv, settings(resamples=1000)))


def test_block_in_summary_leaderboard_and_csv(tmp_path):
    summary = _sweep_summary(tmp_path)
    with open(tmp_path / "summary.json") as fh:
        block = json.load(fh)["significance"]
    assert block == json.loads(json.dumps(summary["significance"])) and list(block["metrics"]) == ["RB_agg"]
    assert [(e["a"], e["b"]) for e in block["metrics"]["RB_agg"]] == [("alpha", "beta"), ("alpha", "gamma"),
                                                                      ("beta", "gamma")]  # leaderboard order
    paths = lb.write_leaderboard(summary, str(tmp_path))
    with open(paths["markdown"], encoding="utf-8") as fh:
        md = fh.read()
    section = md[md.index("## Significance"):]
    # 1000 random flips: the smallest p is 2 / 1001, times 3 (Holm, the two pairs with alpha); the
    # interval resamples the tasks in the order of their ids (t0, t1, t10, ...: PairedValues.task_order)
    assert "- **alpha > beta**, difference 0.1035 [0.0890, 0.1187], adjusted p = 0.006\n" in section
    assert "- beta vs gamma: not distinguishable on these 100 tasks (difference" in section
    assert "holm" in section and "every pair of models compared" in section
    with open(paths["significance"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["metric"] for r in rows] == ["RB_agg"] * 3 and rows[0]["significant"] == "True"
    assert float(rows[0]["diff"]) == pytest.approx(block["metrics"]["RB_agg"][0]["diff"], rel=1e-5)
    assert rows[0]["correction"] == "holm" and rows[2]["better"] == ""


def test_compared_metrics_are_the_leaderboards():
    mtrag = ["RB_agg", "RL_F", "RB_llm", "RB_agg_idk", "RL_F_idk", "RB_llm_idk", "HMean_idk", "Length"]
    assert sig.compared_metrics(mtrag) == ["HMean_idk", "RL_F_idk", "RB_llm_idk", "RB_agg_idk", "AnsAcc"]
    assert sig.compared_metrics(["Recall", "RB_agg"]) == ["RB_agg", "AnsAcc"]


# ---------------------------------------------------------------- settings

@pytest.mark.parametrize("key, value, message", [
    ("resamples", 5, "significance.resamples must be an integer >= 100, got 5"),
    ("confidence", 1.0, "significance.confidence must be a number between 0 and 1 (exclusive), got 1.0"),
    ("alpha", 0, "significance.alpha must be a number between 0 and 1"),
    ("correction", "sidak", "significance.correction must be one of holm, bonferroni, none, bh, got 'sidak'"),
    ("all_pairs_max_models", 1, "significance.all_pairs_max_models must be an integer >= 2"),
    ("seed", -1, "significance.seed must be an integer >= 0"),
    ("enabled", "yes", "significance.enabled must be true or false"),
])
def test_bad_settings_are_one_line_errors(key, value, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sig.check_settings(settings(**{key: value}))


def test_bad_config_fails_before_the_run():
    from ragscale.plan import compose, plan_run

    sig.check_settings(compose(["+scenario=mtrag"]).significance)  # the defaults are valid
    with pytest.raises(UserError, match="significance.correction must be one of holm, bonferroni, none"):
        plan_run(compose(["+scenario=mtrag", "significance.correction=sidak"]))
