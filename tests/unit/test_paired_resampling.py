"""The paired tests' resampling rules (ragscale.stats.paired) beyond test_paired_rules.py: linear
quantiles that reach both ends exactly, the percentile fallback where BCa's levels are undefined, a
BCa level at the formula's pole, chunks of at most CHUNK entries, when sign flips are enumerated, the
documented generators and packed random flips (a seed gives the same results), scipy's p-value
conventions, and float results whatever the input numbers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ragscale.stats import paired as st


@pytest.mark.parametrize("row", [[-0.02, 0.01], [-0.03, -0.01, 0.02], [0.0, 1.0, 2.0, 3.0, 4.0]])
def test_row_quantile_levels_0_and_1_are_exactly_the_smallest_and_largest_values(row):
    ordered = np.array([row, row])
    assert st.row_quantile(ordered, np.array([0.0, 1.0])).tolist() == [row[0], row[-1]]


@pytest.mark.parametrize("q", [0.0, 0.01, 0.1, 0.25, 0.5, 0.74, 0.8, 0.9, 0.975, 0.999, 1.0])
def test_row_quantile_interpolates_linearly_as_numpy(q):
    ordered = np.sort(np.random.default_rng(4).normal(size=(3, 5)), axis=1)
    want = [np.quantile(r, q) for r in ordered]
    assert st.row_quantile(ordered, np.full(3, q)) == pytest.approx(want, abs=1e-15)


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.5])
@pytest.mark.parametrize("side", [1.0, -1.0])
def test_undefined_bca_levels_give_the_percentile_interval(confidence, side):
    d = np.array([[0.0, 1.0, 5.0]])
    boot = (2.0 + side * (1.0 + np.random.default_rng(1).random(200)))[None, :]  # all on one side of the mean
    lo, hi = st.bca_interval(d, boot, confidence)
    want = np.quantile(boot[0], [(1 - confidence) / 2, (1 + confidence) / 2])
    assert [lo[0], hi[0]] == pytest.approx(want.tolist(), abs=1e-12)


def test_a_bca_level_at_the_formulas_pole_is_the_top_of_the_distribution_without_a_warning():
    boot = np.concatenate([-np.arange(1, 99998) / 1e5, [0.5, 0.75, 1.0]])[None, :]  # 99 997 of 100 000 below 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lo, hi, ss = st.bca_bounds(np.array([0.0]), boot, np.array([[1.0, 0.0]]), 0.9530985645421156)
    assert hi.tolist() == [1.0] and ss.tolist() == [1.0] and np.isfinite(lo).all()


@pytest.mark.parametrize("total, per, expected", [
    (10, 1, [(0, 8), (8, 2)]),
    (10, 0, [(0, 8), (8, 2)]),
    (10, 4, [(0, 2), (2, 2), (4, 2), (6, 2), (8, 2)]),
    (5, 3, [(0, 2), (2, 2), (4, 1)]),
    (3, 9, [(0, 1), (1, 1), (2, 1)]),
    (1, 9, [(0, 1)]),
    (6, 2, [(0, 4), (4, 2)]),
    (0, 2, []),
])
def test_chunks_hold_at_most_chunk_entries_and_at_least_one_resample(monkeypatch, total, per, expected):
    monkeypatch.setattr(st, "CHUNK", 8)
    assert st.chunk_steps(total, per) == expected


@pytest.mark.parametrize("n, resamples, expected", [
    (10, 1024, (True, 1024)),
    (10, 1023, (False, 1023)),
    (3, 1000, (True, 8)),
    (62, 2 ** 62, (True, 2 ** 62)),
    (63, 2 ** 63, (False, 2 ** 63)),
    (64, 2 ** 64, (False, 2 ** 64)),
])
def test_sign_flips_are_enumerated_up_to_62_values_when_resamples_allow(n, resamples, expected):
    assert st.flip_count(n, resamples) == expected


@pytest.mark.parametrize("n", [7, 8, 9, 16])
def test_random_sign_flips_are_the_bits_of_the_generators_bytes(n):
    got = np.concatenate(list(st.sign_flips(n, 100, np.random.default_rng(7))))
    raw = np.random.default_rng(7).integers(0, 256, (100, (n + 7) // 8), dtype=np.uint8)
    assert got.tolist() == np.unpackbits(raw, axis=1)[:, :n].tolist()


def test_enumerated_sign_flips_are_every_pattern_once():
    got = np.concatenate(list(st.sign_flips(3, 100, np.random.default_rng(0))))
    assert sorted(map(tuple, got.tolist())) == [(a, b, c) for a in (0, 1) for b in (0, 1) for c in (0, 1)]


def test_each_comparison_is_computed_from_the_documented_generators():
    rng = np.random.default_rng(5)
    diffs = [rng.normal(size=20), rng.normal(size=20) + 0.3, rng.normal(size=9)]
    out = st.paired_tests(diffs, resamples=199, confidence=0.9, seed=11)
    for n, rows in ((20, [0, 1]), (9, [2])):
        d = np.stack([diffs[i] for i in rows])
        assert st.resample_rng(11, n, 1).integers(0, 1 << 30) == np.random.default_rng([11, n, 1]).integers(0, 1 << 30)
        lo, hi = st.bca_interval(d, st.bootstrap_means(d, 199, np.random.default_rng([11, n, 0])), 0.9)
        p = st.signflip_pvalues(d, 199, np.random.default_rng([11, n, 1]))
        assert [out[i] for i in rows] == [(lo[j], hi[j], p[j]) for j in range(len(rows))]


@pytest.mark.parametrize("values", [
    [0.1, -0.3, 0.7, 0.2, 0.55, -0.05, 0.4],
    [1, 0, 1, 1, -1, 0, 1, 1],
])
def test_the_tests_compute_in_float64_whatever_the_input_numbers(values):
    for dtype in (np.float32, np.int64, np.float16):
        if dtype is np.int64 and any(v != int(v) for v in values):
            continue
        given = np.array(values, dtype=dtype)
        kw = {"resamples": 300, "confidence": 0.95, "seed": 2}
        assert st.paired_tests([given], **kw) == st.paired_tests([given.astype(float)], **kw)


@pytest.mark.parametrize("less, greater, exact, total, expected", [
    ([3], [6], True, 8, [0.75]),
    ([0], [8], True, 8, [0.0]),
    ([0], [99], False, 99, [0.02]),
    ([5], [94], False, 99, [0.12]),
    ([60], [60], False, 99, [1.0]),
])
def test_two_sided_p_is_scipys_exact_or_count_plus_one_and_capped_at_1(less, greater, exact, total, expected):
    p = st.two_sided_p(np.array(less), np.array(greater), exact, total)
    assert p.tolist() == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("correction", st.CORRECTIONS)
@pytest.mark.parametrize("p", [[0, 1], [1, 0, 1], [True, False]])
def test_adjusted_pvalues_are_floats_for_any_numbers(correction, p):
    out = st.adjust(p, correction)
    assert all(type(v) is float for v in out) and len(out) == len(p)
