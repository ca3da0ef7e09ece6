"""Cluster-robust calibrated estimates (ragscale.stats.ppi with clusters): without clusters (or with
clusters of one record) every number is ppi-python's; the CR1 variance by hand; wider intervals
under intra-conversation correlation; a coverage simulation (conversations of 3-6 turns, labels
spread over turns) where the cluster-robust PPI++ interval holds its level and ppi-python's does
not; and the calibration block a clustered run gets."""

import json
import math

import numpy as np
import pytest
from scipy.stats import norm, t

from ragscale.config import CalibrationConf, SignificanceConf
from ragscale.report import calibration as cal
from ragscale.stats import ppi
from ragscale.stats.clustered import cluster_mean, cr1_variance

pytestmark = pytest.mark.usefixtures("needs_ppi")


def conversations(rng, g=60, lo=3, hi=6, sd_u=0.3, label=0.4, mu=0.6):
    """``g`` conversations of ``lo``..``hi`` turns: a conversation effect shared by the human value and
    the judge (biased, noisy), a random share ``label`` of the turns labelled."""
    sizes = rng.integers(lo, hi + 1, g)
    c = np.repeat(np.arange(g), sizes)
    y = mu + rng.normal(0, sd_u, g)[c] + rng.normal(0, 0.2, len(c))
    yhat = 0.7 * y + 0.25 + rng.normal(0, 0.15, len(c)) + rng.normal(0, 0.1, g)[c]
    lab = rng.random(len(c)) < label
    return y, yhat, c, lab


def test_without_clusters_every_number_is_ppi_pythons():
    import ppi_py

    rng = np.random.default_rng(1)
    y, yhat, c, lab = conversations(rng)
    plain = ppi.estimate(y[lab], yhat[lab], yhat[~lab])
    lo, hi = (float(np.ravel(v)[0]) for v in ppi_py.ppi_mean_ci(y[lab], yhat[lab], yhat[~lab], alpha=0.05))
    assert plain["calibrated"]["ci"] == [lo, hi] and "units" not in plain["calibrated"]
    assert plain["calibrated"]["mean"] == float(np.ravel(ppi_py.ppi_mean_pointestimate(y[lab], yhat[lab],
                                                                                        yhat[~lab]))[0])
    lo, hi = ppi_py.classical_mean_ci(y[lab], alpha=0.05)
    assert plain["human_only"]["ci"] == [float(lo), float(hi)]
    singletons = np.arange(len(y))[::-1]  # one record per cluster: the same floats
    assert ppi.estimate(y[lab], yhat[lab], yhat[~lab], 0.95, singletons[lab], singletons[~lab]) == plain
    assert ppi.classical(y, 0.95, singletons) == ppi.classical(y, 0.95)
    d, dhat = y - 0.5, yhat - 0.5
    base = ppi.difference(d[lab], dhat[lab], dhat[~lab], 0.95)
    assert ppi.difference(d[lab], dhat[lab], dhat[~lab], 0.95, singletons[lab], singletons[~lab]) == base
    assert base[2] == float(np.ravel(ppi_py.ppi_mean_pval(d[lab], dhat[lab], dhat[~lab], null=0.0))[0])
    everyone = ppi.difference(d, dhat, np.empty(0), 0.95)
    assert ppi.difference(d, dhat, np.empty(0), 0.95, singletons, np.empty(0, dtype=int)) == everyone


def test_power_lambda_is_ppi_pythons():
    rng = np.random.default_rng(2)
    for _ in range(20):
        y, yhat, _, lab = conversations(rng, g=20)
        lam = ppi.power_lambda(y[lab], yhat[lab], yhat[~lab])
        point = ppi.estimate(y[lab], yhat[lab], yhat[~lab])["calibrated"]["mean"]
        assert point == pytest.approx(lam * yhat[~lab].mean() + (y[lab] - lam * yhat[lab]).mean(), abs=1e-12)


def test_cr1_variance_by_hand():
    # labelled: clusters 0 (2 records), 1 (1), 2 (2); unlabelled: clusters 0 (1), 2 (2), 3 (2)
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    yhat = np.array([0.8, 0.3, 0.6, 0.9, 0.2])
    cl = np.array([0, 0, 1, 2, 2])
    yu = np.array([0.7, 0.4, 0.5, 0.9, 0.1])
    cu = np.array([0, 2, 2, 3, 3])
    lam = 0.5
    r, v = y - lam * yhat, lam * yu
    rbar, vbar = r.mean(), v.mean()
    e_l = {g: sum(r[i] - rbar for i in range(5) if cl[i] == g) / 5 for g in range(4)}
    e_u = {g: sum(v[j] - vbar for j in range(5) if cu[j] == g) / 5 for g in range(4)}
    want = (3 / 2 * sum(x * x for x in e_l.values()) + 3 / 2 * sum(x * x for x in e_u.values())
            + 2 * 4 / 3 * sum(e_l[g] * e_u[g] for g in range(4)))
    assert ppi.ppi_cluster_variance(y, yhat, yu, lam, cl, cu) == pytest.approx(want, rel=1e-12)
    # the CR1 variance of one mean: G/(G-1) * sum_g (S_g - mean n_g)**2 / n**2, cluster_mean's
    sums = np.array([1.0, 1.0, 1.0])
    counts = np.array([2, 1, 2])
    hand = 3 / 2 * float(((sums - 0.6 * counts) ** 2).sum()) / 25
    assert cr1_variance(y, cl) == pytest.approx(hand, rel=1e-12)
    lo, hi = cluster_mean(y, cl)["ci"]
    assert (hi - lo) / 2 == pytest.approx(t.ppf(0.975, 2) * math.sqrt(hand), rel=1e-12)
    assert ppi.classical(y, 0.95, cl) == {"mean": 0.6, "ci": [lo, hi], "units": 3}


def test_the_calibrated_interval_is_the_normal_one_around_ppi_pythons_estimate():
    rng = np.random.default_rng(3)
    y, yhat, c, lab = conversations(rng)
    e = ppi.estimate(y[lab], yhat[lab], yhat[~lab], 0.9, c[lab], c[~lab])
    plain = ppi.estimate(y[lab], yhat[lab], yhat[~lab], 0.9)
    assert e["calibrated"]["mean"] == plain["calibrated"]["mean"]
    assert e["calibrated"]["lambda"] == plain["calibrated"]["lambda"]
    lam = ppi.power_lambda(y[lab], yhat[lab], yhat[~lab])
    se = math.sqrt(ppi.ppi_cluster_variance(y[lab], yhat[lab], yhat[~lab], lam, c[lab], c[~lab]))
    lo, hi = e["calibrated"]["ci"]
    assert (hi - lo) / 2 == pytest.approx(norm.ppf(0.95) * se, rel=1e-12)
    assert e["calibrated"]["units"] == 60 and e["naive"]["units"] == 60


def test_intra_cluster_correlation_widens_every_interval():
    rng = np.random.default_rng(4)
    y, yhat, c, lab = conversations(rng, sd_u=0.4)
    e = ppi.estimate(y[lab], yhat[lab], yhat[~lab], 0.95, c[lab], c[~lab])
    plain = ppi.estimate(y[lab], yhat[lab], yhat[~lab], 0.95)
    for k in ("naive", "human_only", "calibrated"):
        assert np.diff(e[k]["ci"])[0] > 1.3 * np.diff(plain[k]["ci"])[0], k


def test_a_clustered_difference_tests_with_its_interval():
    rng = np.random.default_rng(5)
    y, yhat, c, lab = conversations(rng, sd_u=0.4, mu=0.1)
    for d, dhat in ((y - 0.6, yhat - 0.6), (y, yhat)):
        mean, (lo, hi), p = ppi.difference(d[lab], dhat[lab], dhat[~lab], 0.95, c[lab], c[~lab])
        plain = ppi.difference(d[lab], dhat[lab], dhat[~lab], 0.95)
        assert mean == plain[0] and hi - lo > plain[1][1] - plain[1][0]
        se = (hi - lo) / 2 / norm.ppf(0.975)
        assert p == pytest.approx(2 * norm.sf(abs(mean) / se), rel=1e-9)
        assert (p < 0.05) == (not lo <= 0 <= hi)
    # every task labelled: the CR1 t test, as the cluster_mean interval
    mean, ci, p = ppi.difference(y - 0.5, yhat - 0.5, np.empty(0), 0.95, c, np.empty(0, dtype=int))
    assert ci == cluster_mean(y - 0.5, c)["ci"]
    assert p == pytest.approx(2 * t.sf(abs(mean) / math.sqrt(cr1_variance(y - 0.5, c)), 59), rel=1e-12)


def test_one_cluster_falls_back_to_ppi_pythons_interval():
    rng = np.random.default_rng(6)
    y, yhat, _, lab = conversations(rng, g=10)
    one = np.zeros(len(y), dtype=int)
    assert ppi.estimate(y[lab], yhat[lab], yhat[~lab], 0.95, one[lab], one[~lab]) == \
        ppi.estimate(y[lab], yhat[lab], yhat[~lab], 0.95)


def test_coverage_simulation():
    """1000 samples of 60 conversations of 3-6 turns (a strong conversation effect, 40% of the turns
    labelled at random): the cluster-robust PPI++ interval covers the true mean about 95% of the time
    (0.934 here; 0.944 over 3000), ppi-python's (every turn independent) about 76%; the humans-only
    ones 0.94 and 0.82. Without the labelled/unlabelled covariance inside conversations the
    cluster-robust interval would cover about 90%."""
    rng = np.random.default_rng(2025)
    reps, mu = 1000, 0.6
    covered = {"cluster": 0, "ppi": 0, "human_cluster": 0, "human_ppi": 0, "no_covariance": 0}
    for _ in range(reps):
        y, yhat, c, lab = conversations(rng, mu=mu)
        e = ppi.estimate(y[lab], yhat[lab], yhat[~lab], 0.95, c[lab], c[~lab])
        plain = ppi.estimate(y[lab], yhat[lab], yhat[~lab], 0.95)
        for key, est in (("cluster", e["calibrated"]), ("ppi", plain["calibrated"]),
                         ("human_cluster", e["human_only"]), ("human_ppi", plain["human_only"])):
            covered[key] += est["ci"][0] <= mu <= est["ci"][1]
        lam = ppi.power_lambda(y[lab], yhat[lab], yhat[~lab])
        var = cr1_variance(y[lab] - lam * yhat[lab], c[lab]) + cr1_variance(lam * yhat[~lab], c[~lab])
        covered["no_covariance"] += abs(e["calibrated"]["mean"] - mu) <= norm.ppf(0.975) * math.sqrt(var)
    rate = {k: v / reps for k, v in covered.items()}
    assert rate["cluster"] >= 0.92 and rate["human_cluster"] >= 0.92, rate
    assert rate["ppi"] <= 0.85 and rate["human_ppi"] <= 0.88, rate
    assert rate["no_covariance"] < rate["cluster"] - 0.02, rate


def make_run(tmp_path, cluster=True):
    """Two models on 40 conversations of 4 turns, a conversation effect, half the turns labelled."""
    rng = np.random.default_rng(8)
    recs, labels = [], []
    for model, shift in (("alpha", 0.1), ("beta", -0.1)):
        effect = rng.normal(0, 0.25, 40)
        for conv in range(40):
            for turn in range(4):
                h = float(np.clip(0.5 + shift + effect[conv] + rng.normal(0, 0.1), 0, 1))
                value = float(np.clip(0.8 * h + 0.15 + rng.normal(0, 0.05), 0, 1))
                tid = f"c{conv}-t{turn}"
                rec = {"task_id": tid, "model_id": model, "metrics": {"RL_F": [value]}, "error": None,
                       "ragscale": {"record_key": f"{model}-{tid}"}}
                if cluster:
                    rec["conversation_id"] = f"c{conv}"
                recs.append(rec)
                if turn % 2 == 0:
                    labels.append({"task_id": tid, "model_id": model, "faithfulness": h})
    (tmp_path / "run").mkdir()
    with open(tmp_path / "run" / "records.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    with open(tmp_path / "h.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in labels)
    summary = {"metrics": ["RL_F"], "models": {m: {"count": 160, "errors": 0, "metrics": {"RL_F": 0.5},
                                                   "n": {"RL_F": 160}} for m in ("alpha", "beta")}}
    return str(tmp_path / "run"), str(tmp_path / "h.jsonl"), summary


def test_the_calibration_block_states_its_unit_and_widens(tmp_path):
    run, human, summary = make_run(tmp_path)
    conf = CalibrationConf(human=human, min_labels=20)
    args = (run, human, ["faithfulness=RL_F"], [], conf, SignificanceConf(), summary)
    block = cal.calibrate(*args)
    plain = cal.calibrate(*args, cluster_by=None)
    assert block["unit"]["by"] == "conversation_id" and block["unit"]["units"] == 40
    assert block["unit"]["text"] == "clustered by conversation: 40 conversations (160 tasks)"
    assert plain["unit"]["by"] is None and plain["unit"]["text"] == "every record on its own: 320 records"
    assert "(clustered by conversation: 40 conversations (160 tasks))" in cal.to_markdown(block)
    for model in ("alpha", "beta"):
        got, base = block["metrics"]["RL_F"]["models"][model], plain["metrics"]["RL_F"]["models"][model]
        for k in ("naive", "human_only", "calibrated"):
            assert got[k]["mean"] == pytest.approx(base[k]["mean"], abs=1e-12)
            assert np.diff(got[k]["ci"])[0] > np.diff(base[k]["ci"])[0], (model, k)
            assert got[k]["units"] == 40 and "units" not in base[k]
    (entry,), (base,) = block["comparisons"]["RL_F"], plain["comparisons"]["RL_F"]
    assert entry["diff"] == base["diff"] and entry["ci"][1] - entry["ci"][0] > base["ci"][1] - base["ci"][0]
    assert entry["p"] >= base["p"]


def test_a_run_without_the_field_is_ppi_pythons(tmp_path):
    run, human, summary = make_run(tmp_path, cluster=False)
    conf = CalibrationConf(human=human, min_labels=20)
    args = (run, human, ["faithfulness=RL_F"], [], conf, SignificanceConf(), summary)
    block, plain = cal.calibrate(*args), cal.calibrate(*args, cluster_by=None)
    assert block["unit"]["text"] == "every record on its own: 320 records (no record has conversation_id)"
    block.pop("unit"), plain.pop("unit")
    assert block == plain


def test_the_command_takes_cluster_by(tmp_path):
    from ragscale.commands.calibrate import build_parser

    assert build_parser().parse_args(["r", "--human", "h"]).cluster_by == "conversation_id"
    assert build_parser().parse_args(["r", "--human", "h", "--cluster-by", "none"]).cluster_by == "none"


@pytest.mark.parametrize("clustered", [False, True])
def test_a_degenerate_ppi_estimate_falls_back_to_the_humans_alone(monkeypatch, clustered):
    """When PPI++ gives a non-finite estimate, interval or p (a degenerate lambda), the difference is
    the labelled tasks' own, with their clusters when there are any."""
    import types

    d, dhat, du = np.array([0.1, -0.2, 0.3, 0.05, 0.2]), np.array([0.4, 0.5, 0.7, 0.1, 0.3]), np.array([0.0, 1.0, 0.2])
    c, cu = (np.array([0, 0, 1, 1, 2]), np.array([3, 4, 4])) if clustered else (None, None)
    humans = ppi.difference(d, dhat, np.empty(0), 0.9, c, None if c is None else np.empty(0, dtype=np.int64))
    real = ppi.ppi()
    nan = types.SimpleNamespace(**{k: getattr(real, k) for k in dir(real) if not k.startswith("_")})
    nan.ppi_mean_pointestimate = lambda *a, **k: np.array([np.nan])
    monkeypatch.setattr(ppi, "ppi", lambda: nan)
    assert ppi.difference(d, dhat, du, 0.9, c, cu) == humans
    assert humans[0] == pytest.approx(d.mean())


def test_the_p_of_a_difference_without_spread_and_of_clustered_humans():
    """No spread: p 0 for a difference that is not 0, 1 for one that is; the humans alone with clusters:
    the CR1 t test's p on G - 1 degrees of freedom, not the normal's."""
    none = np.empty(0)
    assert ppi.difference(np.full(4, 0.2), np.full(4, 0.1), none, 0.95)[2] == 0.0
    assert ppi.difference(np.zeros(4), np.zeros(4), none, 0.95)[2] == 1.0
    d = np.array([0.3, 0.1, -0.1, 0.4, 0.2, 0.0])
    c = np.array([0, 0, 1, 1, 2, 2])
    mean, _, p = ppi.difference(d, d, none, 0.95, c, np.empty(0, dtype=np.int64))
    se = math.sqrt(cr1_variance(d, c))
    assert p == pytest.approx(2 * t.sf(abs(mean) / se, 2)) and p != pytest.approx(2 * norm.sf(abs(mean) / se))
