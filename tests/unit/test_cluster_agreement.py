"""Agreement intervals that resample whole conversations (ragscale.stats.agreement with clusters):
without clusters (or with clusters of one record) the same floats as scipy's record bootstrap; the
cluster BCa is scipy's BCa with clusters in place of records; a strong conversation effect widens
the intervals; the unit is reported (agreement.json, agreement.md), wired from the run and the
command; and a coverage simulation."""

import json
import os
import warnings

import numpy as np
import pytest

from ragscale.report import agreement as ag
from ragscale.stats.agreement import accuracy, cluster_bootstrap, kendall_tau_b, spearman, statistics_for
from ragscale.stats.intervals import rng_arg


def clustered(rng, g=40, lo=3, hi=6, sd_u=1.0, noise=0.5):
    """``g`` conversations of ``lo``..``hi`` turns; a conversation effect shared by both sides."""
    c = np.repeat(np.arange(g), rng.integers(lo, hi + 1, g))
    u = rng.normal(0, sd_u, g)[c]
    return u + rng.normal(0, noise, len(c)), u + rng.normal(0, noise, len(c)), c


def scipy_record_bootstrap(h, m, fns, n_boot, seed):
    """What the record bootstrap was before clusters: one paired scipy.stats.bootstrap, BCa."""
    from scipy import stats

    def statistic(a, b):
        return np.array([fn(a, b) for fn in fns])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((h, m), statistic, paired=True, vectorized=False, n_resamples=n_boot,
                              confidence_level=0.95, method="BCa", **rng_arg(seed))
    return list(zip(np.atleast_1d(res.confidence_interval.low), np.atleast_1d(res.confidence_interval.high)))


def test_without_clusters_the_record_bootstrap_is_unchanged():
    rng = np.random.default_rng(1)
    h, m, _ = clustered(rng)
    plain = statistics_for(h, m, n_boot=300, seed=4)
    want = scipy_record_bootstrap(h, m, [spearman, kendall_tau_b], 300, 4)
    assert [plain[k]["ci"] for k in ("spearman", "kendall")] == [[float(lo), float(hi)] for lo, hi in want]
    assert statistics_for(h, m, n_boot=300, seed=4, clusters=None) == plain
    singletons = np.arange(len(h))[::-1] * 7  # one record per cluster: scipy's bootstrap, the same floats
    assert statistics_for(h, m, n_boot=300, seed=4, clusters=singletons) == plain


def test_the_cluster_bca_is_scipys_with_clusters_for_records():
    """Clusters of one record, in record order, drawn from the same generator: scipy's BCa interval."""
    rng = np.random.default_rng(2)
    h, m, _ = clustered(rng, g=70, lo=1, hi=1)
    mine = cluster_bootstrap(h, m, [spearman, kendall_tau_b], np.arange(len(h)), 400, 9, 0.95)
    for (ci, method, undefined), (lo, hi) in zip(mine, scipy_record_bootstrap(h, m, [spearman, kendall_tau_b],
                                                                               400, 9)):
        assert method == "BCa" and undefined == 0
        assert ci == pytest.approx([lo, hi], abs=1e-12)


def test_a_conversation_effect_widens_the_intervals():
    rng = np.random.default_rng(3)
    h, m, c = clustered(rng, sd_u=1.0, noise=0.6)
    plain = statistics_for(h, m, n_boot=400)
    grouped = statistics_for(h, m, n_boot=400, clusters=c)
    for k in ("spearman", "kendall"):
        assert grouped[k]["value"] == plain[k]["value"]
        assert grouped[k]["ci_method"] == "BCa" and grouped[k]["boot_undefined"] == 0
        assert np.diff(grouped[k]["ci"])[0] > 1.3 * np.diff(plain[k]["ci"])[0], k
    again = statistics_for(h, m, n_boot=400, clusters=c)
    assert again == grouped  # seeded


def test_an_undefined_jackknife_falls_back_to_the_percentile_interval():
    """The metric varies in one conversation only: leaving it out (and some resamples) makes the
    metric constant, Spearman undefined: the percentile interval of the defined replicates."""
    rng = np.random.default_rng(4)
    c = np.repeat(np.arange(12), 4)
    h = rng.normal(size=len(c))
    m = np.where(c == 0, h, 0.0)
    out = statistics_for(h, m, n_boot=200, clusters=c)["spearman"]
    assert out["ci_method"] == "percentile" and 0 < out["boot_undefined"] < 200
    lo, hi = out["ci"]
    assert lo <= hi


def test_coverage_simulation():
    """300 samples of 60 conversations of 3-6 turns, each conversation's judge wrong 5% or 45% of the
    time (accuracy 0.75): resampling conversations covers the true accuracy about 95% of the time
    (0.937 here, 0.945 over 1000 samples), resampling turns clearly less (0.833 here, 0.841)."""
    rng = np.random.default_rng(7)
    reps = 300
    covered = {"cluster": 0, "record": 0}

    def agree(a, b):  # accuracy, vectorised
        return float((a == b).mean())

    for i in range(reps):
        sizes = rng.integers(3, 7, 60)
        c = np.repeat(np.arange(60), sizes)
        wrong = np.where(rng.random(60) < 0.5, 0.05, 0.45)[c]
        h = (rng.random(len(c)) < 0.5).astype(float)
        m = np.where(rng.random(len(c)) < wrong, 1 - h, h)
        for key, codes in (("cluster", c), ("record", np.arange(len(c)))):
            ((lo, hi), _, _), = cluster_bootstrap(h, m, [agree], codes, 300, i, 0.95)
            covered[key] += lo <= 0.75 <= hi
    rate = {k: v / reps for k, v in covered.items()}
    assert accuracy([1, 0, 1], [1, 1, 1]) == agree(np.array([1, 0, 1]), np.array([1, 1, 1]))
    assert rate["cluster"] >= 0.9 and rate["record"] <= 0.88 and rate["cluster"] - rate["record"] >= 0.05, rate


def write_run(tmp_path, conversation=True):
    """Two models on 30 conversations of 4 turns, a human rating of every record."""
    rng = np.random.default_rng(5)
    recs, rows = [], []
    for model in ("a", "b"):
        effect = rng.normal(0, 1, 30)
        for conv in range(30):
            for turn in range(4):
                human = float(np.clip(np.round(2.5 + effect[conv] + rng.normal(0, 0.5)), 1, 4))
                judge = float(np.clip(np.round(2.5 + effect[conv] + rng.normal(0, 0.7)), 1, 4))
                rec = {"task_id": f"c{conv}::{turn}", "model_id": model, "metrics": {"judge": [judge]}, "error": None,
                       "ragscale": {"record_key": f"{model}-{conv}-{turn}"}}
                if conversation:
                    rec["conversation_id"] = f"c{conv}"
                recs.append(rec)
                rows.append({"task_id": f"c{conv}::{turn}", "model_id": model, "judge": human})
    os.makedirs(tmp_path / "run")
    with open(tmp_path / "run" / "records.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    with open(tmp_path / "h.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    return str(tmp_path / "run"), str(tmp_path / "h.jsonl"), recs


def test_the_result_states_its_unit(tmp_path):
    run, human, recs = write_run(tmp_path)
    res = ag.agreement(run, human, n_boot=200)
    boot = res["bootstrap"]
    assert (boot["unit"], boot["by"], boot["units"], boot["records"]) == ("conversation", "conversation_id", 30, 240)
    assert boot["text"] == "resampled by conversation: 30 conversations (240 records)"
    assert {r["model"]: r["units"] for r in res["rows"]} == {"a": 30, "b": 30, "ALL": 30}
    md = ag.to_markdown(res)
    assert "- intervals: 95% bootstrap, 200 resamples, resampled by conversation: 30 conversations (240 records)" in md
    plain = ag.agreement(run, human, n_boot=200, cluster_by=None)
    assert plain["bootstrap"]["text"] == "resampled by record: 240 records" and plain["bootstrap"]["by"] is None
    for r, p in zip(res["rows"], plain["rows"]):
        assert r["spearman"]["value"] == p["spearman"]["value"] and p["units"] == p["n"]
        assert np.diff(r["spearman"]["ci"])[0] > np.diff(p["spearman"]["ci"])[0]
    sink = ag.AgreementSink(run, human, n_boot=200)  # the run's pass: the same result
    for rec in recs:
        sink.add(rec)
    assert sink.finish() == res


def test_a_run_without_the_field_resamples_records_as_before(tmp_path):
    run, human, _ = write_run(tmp_path, conversation=False)
    res, plain = ag.agreement(run, human, n_boot=100), ag.agreement(run, human, n_boot=100, cluster_by=None)
    assert res["bootstrap"]["text"] == "resampled by record: 240 records (no record has conversation_id)"
    assert res["rows"] == plain["rows"]


def test_the_run_and_the_command_pass_the_unit(tmp_path):
    from ragscale.commands.agree import build_parser
    from ragscale.config import AgreementConf, CalibrationConf, SignificanceConf
    from ragscale.report.sinks import ReportSettings, _open_agreement

    run, human, _ = write_run(tmp_path)
    for cluster_by in ("conversation_id", None):
        settings = ReportSettings(SignificanceConf(), CalibrationConf(), AgreementConf(human=human),
                                  cluster_by=cluster_by)
        assert _open_agreement(settings, None, run).sink.cluster_by == cluster_by
    assert build_parser().parse_args(["r", "--human", "h"]).cluster_by == "conversation_id"
    assert build_parser().parse_args(["r", "--human", "h", "--cluster-by", "none"]).cluster_by == "none"
