"""Cluster-robust statistics (ragscale.stats.clustered), by hand: the CR1 variance and the slice
test's formula and degrees of freedom, the sign-flip test's tolerance for equal statistics, its
generator and its chunking, flat intervals, and the edge cases that give None."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ragscale.stats import clustered as cl
from ragscale.stats import paired as st

EPS = np.finfo(float).eps


def test_cr1_variance_by_hand():
    y, c = np.array([1.0, 2.0, 4.0, 7.0]), np.array([5, 5, 9, 9])
    assert cl.cr1_variance(y, c) == 4.0  # 2/1 * ((3 - 7)**2 + (11 - 7)**2) / 4**2
    y3, c3 = np.array([1.0, 2.0, 4.0, 7.0, 6.0, 0.0]), np.array([0, 0, 1, 1, 2, 2])
    mean, s = 20 / 6, np.array([3.0, 11.0, 6.0])
    assert cl.cr1_variance(y3, c3) == pytest.approx(3 / 2 * float(((s - 2 * mean) ** 2).sum()) / 36, rel=1e-12)


def test_cr1_variance_needs_two_clusters():
    assert cl.cr1_variance(np.array([1.0, 2.0, 4.0]), np.zeros(3, dtype=int)) is None


def test_design_effect_of_fewer_than_two_values_is_none():
    assert cl.design_effect(np.array([1.0]), np.array([0])) is None


def _by_hand(y, inside, c, df, confidence=0.95):
    k, n = inside.sum(), len(y)
    psi = np.where(inside, (y - y[inside].mean()) / k, 0.0) - (y - y.mean()) / n
    per = np.bincount(c, weights=psi)
    g = len(per)
    se = np.sqrt(g / (g - 1) * float(per @ per))
    diff = y[inside].mean() - y.mean()
    half = stats.t.ppf(0.5 + confidence / 2, df) * se
    return {"diff": diff, "ci": [diff - half, diff + half], "p": 2 * stats.t.sf(abs(diff) / se, df)}


def test_subset_vs_all_by_hand_with_two_conversations_inside():
    y = np.array([1.0, 2.0, 3.0, 5.0, 5.0, 6.0, 8.0, 9.0, 10.0, 0.0])
    c = np.repeat(np.arange(5), 2)
    inside = c < 2
    est = cl.subset_vs_all(y, inside, c, 0.9)
    want = _by_hand(y, inside, c, df=1, confidence=0.9)  # min(2 inside, 3 outside) - 1
    assert est == {"diff": pytest.approx(want["diff"], rel=1e-12), "ci": pytest.approx(want["ci"], rel=1e-12),
                   "p": pytest.approx(want["p"], rel=1e-12), "n": 4, "clusters": 2}
    assert 0 < est["p"] < 1


def test_subset_vs_all_takes_the_subset_as_flags():
    y = np.array([1.0, 2.0, 3.0, 5.0, 5.0, 6.0, 8.0, 9.0, 10.0, 0.0, 4.0, 4.5])
    c = np.repeat(np.arange(6), 2)
    flags = [1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1]
    assert cl.subset_vs_all(y, flags, c) == cl.subset_vs_all(y, np.array(flags, dtype=bool), c)


@pytest.mark.parametrize("units, p", [(148, 1.0), (152, 0.5)], ids=["99 eps apart: tied", "101 eps apart: not"])
def test_signflip_statistics_within_100_eps_are_tied(units, p):
    """Two clusters (0.75 and a tiny s): flipping s gives a statistic s below the observed, tied with
    it (counted on both sides) when s is within 100 eps of the observed (relative)."""
    sums, counts = np.array([[0.75, units * 2.0 ** -54]]), np.array([[1, 1]])
    rel = sums[0, 1] / (sums.sum() / 2) / EPS
    assert (rel < 100) == (p == 1.0)
    assert cl.cluster_signflip_pvalues(sums, counts, 1000, np.random.default_rng(0)).tolist() == [p]


def test_random_sign_flips_come_from_the_seed_and_cluster_count_stream_1():
    rng = np.random.default_rng(5)
    c = np.repeat(np.arange(15), 3)
    d = rng.normal(0.1, 0.5, len(c))
    p = cl.cluster_paired_tests([d], [c], resamples=999, confidence=0.95, seed=7)[0][2]
    sums, counts = np.bincount(c, weights=d)[None], np.bincount(c)[None]
    assert p == cl.cluster_signflip_pvalues(sums, counts, 999, st.resample_rng(7, 15, 1))[0]


def test_the_exact_p_value_does_not_depend_on_the_chunking(monkeypatch):
    rng = np.random.default_rng(9)
    c = np.repeat(np.arange(10), 2)
    d = rng.normal(0.2, 0.5, len(c))
    whole = cl.cluster_paired_tests([d], [c], resamples=2000, confidence=0.95, seed=1)[0][2]
    monkeypatch.setattr(st, "CHUNK", 64)
    assert cl.cluster_paired_tests([d], [c], resamples=2000, confidence=0.95, seed=1)[0][2] == whole


def test_the_bca_interval_without_flat_marks_flat_rows_from_the_jackknife():
    sums = np.array([[0.8, 0.8, 0.8, 0.8], [0.5, 1.5, 0.2, 2.0]])
    counts = np.array([[2, 2, 2, 2], [1, 3, 2, 2]])
    boot = cl.cluster_bootstrap_ratios(sums, counts, 2000, np.random.default_rng(3))
    lo, hi = cl.cluster_bca_interval(sums, counts, boot, 0.9)
    assert lo[0] == hi[0] == pytest.approx(0.4)
    assert lo[1] < sums[1].sum() / 8 < hi[1]
    flagged = cl.cluster_bca_interval(sums, counts, boot, 0.9, np.array([False, False]))
    assert (lo.tolist(), hi.tolist()) == (flagged[0].tolist(), flagged[1].tolist())


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("c", [np.zeros(4, dtype=int), np.array([0, 0, 1, 1])], ids=["one cluster", "two"])
def test_comparisons_emit_no_warnings(c):
    lo, hi, p = cl.cluster_paired_tests([np.array([0.1, 0.5, 0.2, 0.9])], [c], resamples=100, confidence=0.95,
                                        seed=0)[0]
    assert lo <= hi and 0 < p <= 1


def test_mismatched_inputs_are_refused_with_the_counts():
    with pytest.raises(ValueError) as err:
        cl.cluster_paired_tests([np.zeros(3), np.zeros(2)], [np.zeros(3, dtype=int)], resamples=10, confidence=0.95,
                                seed=0)
    assert str(err.value) == "2 difference vectors but 1 cluster vectors"
