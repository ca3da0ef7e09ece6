"""The paired tests' rules (ragscale.stats.paired) beyond the comparisons with scipy in
test_significance.py: the sign-flip p-value's conventions (scipy's near-tie tolerance, every
pattern counted however the patterns are chunked), the interval of differences that vary,
Benjamini-Hochberg's step-up and cap, and a computation that warns about nothing."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from ragscale.stats import paired as st

EPS = np.finfo(float).eps


def scipy_p(d, resamples):
    return stats.permutation_test((d,), lambda x, axis=-1: np.mean(x, axis=axis), permutation_type="samples",
                                  n_resamples=resamples, axis=-1, vectorized=True).pvalue


@pytest.mark.parametrize("d", [
    [1.0, -1.0, 1.0, 1.0, 2.0],
    [0.5, -0.25, 0.75, 0.0, 1.0, -1.0],
    [3.0, 1.0, -2.0, 1.0],
    [0.2, 0.2, 0.2],
    [-0.4, 0.1, -0.3, -0.2, 0.0, -0.1, 0.3],
])
def test_an_exact_pvalue_is_scipys_on_mixed_signs(d):
    d = np.array([d])
    assert st.signflip_pvalues(d, 1000, np.random.default_rng(0)) == pytest.approx(scipy_p(d, 1000), abs=1e-12)


@pytest.mark.parametrize("d, expected", [
    ([1.01, 50 * EPS], 1.0),
    ([1.01, 51 * EPS], 0.5),
    ([2 - 101 * EPS, 100 * EPS], 1.0),
    ([2 - 202 * EPS, 101 * EPS], 0.5),
])
def test_a_null_statistic_within_100_eps_of_the_observed_one_counts_as_a_tie_as_in_scipy(d, expected):
    d = np.array([d])
    p = st.signflip_pvalues(d, 100, np.random.default_rng(0))
    assert p.tolist() == [expected] and p == pytest.approx(scipy_p(d, 100), abs=0)


@pytest.mark.parametrize("chunk", [8, 24, 1 << 22])
def test_every_sign_pattern_counts_however_the_patterns_are_chunked(monkeypatch, chunk):
    monkeypatch.setattr(st, "CHUNK", chunk)
    d = np.array([[1.0] * 6, [-1.0] * 6, [0.5, -0.25, 0.75, 0.0, 1.0, -1.0]])
    p = st.signflip_pvalues(d, 64, np.random.default_rng(0))
    assert p == pytest.approx([2 / 64, 2 / 64, 0.6875], abs=1e-12)


@pytest.mark.parametrize("d", [[0.0, 0.0, 1.0, 1.0], [1.0, 2.0], [0.25, -0.25, 0.5, 0.0]])
def test_differences_that_vary_get_an_interval_around_their_mean(d):
    lo, hi, _ = st.paired_tests([np.array(d)], resamples=999, confidence=0.95, seed=1)[0]
    assert lo < np.mean(d) < hi


def test_equal_differences_get_the_point_interval():
    assert st.paired_tests([np.array([0.3] * 5)], resamples=999, confidence=0.95, seed=1)[0][:2] == (0.3, 0.3)


def test_paired_tests_warn_about_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = st.paired_tests([np.array([0.1, 0.2, -0.1, 0.4]), np.array([0.0] * 3), np.array([1.0, -1.0, 0.5])],
                              resamples=200, confidence=0.9, seed=3)
    assert len(out) == 3 and all(0.0 <= p <= 1.0 for *_, p in out)


@pytest.mark.parametrize("p, expected", [
    ([0.01, 0.04, 0.03, 0.2], [0.04, 0.05333333333333334, 0.05333333333333334, 0.2]),
    ([0.3], [0.3]),
    ([1.5], [1.0]),
    ([0.2, 1.5], [0.4, 1.0]),
    ([0.02, 0.02, 0.5], [0.03, 0.03, 0.5]),
])
def test_benjamini_hochberg_steps_up_and_caps_at_1(p, expected):
    assert st.benjamini_hochberg(np.array(p)).tolist() == pytest.approx(expected, abs=1e-15)
    assert st.adjust(p, "bh") == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("p", [[], [0, 1], np.array([], dtype=np.int64), np.array([1, 0, 1])])
def test_benjamini_hochberg_gives_float_pvalues_for_any_numbers(p):
    out = st.benjamini_hochberg(p)
    assert out.dtype == np.float64 and len(out) == len(p)


@pytest.mark.parametrize("rows", [1, st.GATHER_ROWS - 1, st.GATHER_ROWS, st.GATHER_ROWS + 1])
def test_bootstrap_means_are_gathered_below_gather_rows_and_a_count_product_from_it_on(rows):
    d = np.random.default_rng(2).normal(size=(rows, 7))
    idx = np.random.default_rng(9).integers(0, 7, (50, 7))
    if rows < st.GATHER_ROWS:
        want = np.stack([np.take(row, idx).mean(axis=-1) for row in d])
    else:
        want = d @ np.stack([np.bincount(r, minlength=7) for r in idx]).T.astype(float) / 7
    assert st.bootstrap_means(d, 50, np.random.default_rng(9)).tolist() == want.tolist()
