"""Krippendorff's alpha (ragscale.stats.krippendorff): the published worked example of Krippendorff
(2011), agreement with the `krippendorff` package, the undefined cases, invariances."""

from __future__ import annotations

import numpy as np
import pytest

from ragscale.stats.krippendorff import LEVELS, alpha, coincidences

NAN = np.nan

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers (rows)
# × 12 units (columns), missing values as NaN. Unit 12 has a single value: not pairable.
PAPER = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
])


@pytest.mark.parametrize("level, published", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849),
                                              ("ratio", 0.797)])
def test_published_example(level, published):
    assert round(alpha(PAPER, level), 3) == published


def test_published_coincidence_matrix():
    values, o = coincidences(PAPER)
    assert values.tolist() == [1, 2, 3, 4, 5]
    expected = np.array([[7, 4 / 3, 1 / 3, 1 / 3, 0],
                         [4 / 3, 10, 4 / 3, 1 / 3, 0],
                         [1 / 3, 4 / 3, 8, 1 / 3, 0],
                         [1 / 3, 1 / 3, 1 / 3, 4, 0],
                         [0, 0, 0, 0, 3]])
    np.testing.assert_allclose(o, expected, atol=1e-12)
    np.testing.assert_allclose(o.sum(axis=1), [9, 13, 10, 5, 3])  # n_c; n = 40


def _from_coincidences(data: np.ndarray, level: str) -> float:
    """The textbook computation: 1 - (n - 1) Σ o δ² / Σ n_c n_k δ² over the coincidence matrix."""
    v, o = coincidences(data)
    n_c = o.sum(axis=1)
    if level == "nominal":
        d2 = (v[:, None] != v[None, :]).astype(float)
    elif level == "interval":
        d2 = (v[:, None] - v[None, :]) ** 2
    else:  # ordinal
        d2 = np.zeros((len(v), len(v)))
        for c in range(len(v)):
            for k in range(len(v)):
                lo, hi = min(c, k), max(c, k)
                d2[c, k] = (n_c[lo:hi + 1].sum() - (n_c[c] + n_c[k]) / 2) ** 2
    return 1 - (n_c.sum() - 1) * (o * d2).sum() / (n_c @ d2 @ n_c)


SCALES = {"grades": np.arange(4.0), "ratings": np.round(np.arange(1, 11) * 0.1, 1), "flags": np.array([0.0, 1.0])}


def _random(seed: int, scale: str, coders: int, units: int, missing: float = 0.3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.choice(SCALES[scale], units)
    x = np.where(rng.random((coders, units)) < 0.6, truth, rng.choice(SCALES[scale], (coders, units)))
    x[rng.random((coders, units)) < missing] = NAN
    return x


CASES = [(seed, scale, coders, units) for seed, (scale, coders, units) in enumerate(
    [(s, c, u) for s in SCALES for c in (2, 3, 5) for u in (7, 60)])]


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
@pytest.mark.parametrize("seed, scale, coders, units", CASES)
def test_matches_krippendorff_package(level, seed, scale, coders, units):
    krippendorff = pytest.importorskip("krippendorff")
    x = _random(seed, scale, coders, units)
    ours = alpha(x, level)
    assert ours is not None
    assert ours == pytest.approx(krippendorff.alpha(reliability_data=x, level_of_measurement=level), abs=1e-9)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
@pytest.mark.parametrize("seed, scale, coders, units", CASES[::3])
def test_closed_forms_equal_the_coincidence_matrix(level, seed, scale, coders, units):
    x = _random(seed, scale, coders, units)
    assert alpha(x, level) == pytest.approx(_from_coincidences(x, level), abs=1e-12)


def test_many_distinct_values_interval_and_ordinal():
    krippendorff = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(7)
    truth = rng.normal(size=100)
    x = truth + rng.normal(scale=0.5, size=(4, 100))
    x[rng.random(x.shape) < 0.25] = NAN
    for level in ("interval", "ordinal"):
        assert alpha(x, level) == pytest.approx(krippendorff.alpha(reliability_data=x, level_of_measurement=level),
                                                abs=1e-9)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("scale", list(SCALES))
def test_perfect_agreement_is_one(level, scale):
    rng = np.random.default_rng(1)
    x = np.tile(rng.choice(SCALES[scale], 50), (4, 1))
    x[rng.random(x.shape) < 0.3] = NAN
    x[:, :2] = SCALES[scale][:2]  # at least two values seen
    x[:, 40] = [SCALES[scale][0], NAN, NAN, NAN]  # unpairable: left out
    assert alpha(x, level) == 1.0


@pytest.mark.parametrize("level", LEVELS)
def test_undefined_is_none(level):
    assert alpha(np.full((3, 5), NAN), level) is None  # no values
    assert alpha(np.array([[1.0, 2.0, 3.0]]), level) is None  # one coder: nothing pairable
    assert alpha(np.array([[1.0, NAN, 2.0], [NAN, 3.0, NAN]]), level) is None  # no unit with 2 values
    assert alpha(np.full((3, 5), 2.0), level) is None  # a single value: no expected disagreement
    # one value among the pairable units; the other values are in unpairable units
    assert alpha(np.array([[2.0, 2.0, 1.0, NAN], [2.0, 2.0, NAN, 3.0]]), level) is None
    assert alpha(np.empty((4, 0)), level) is None


def test_systematic_disagreement_is_negative():
    x = np.array([[0.0, 1.0] * 10, [1.0, 0.0] * 10])
    for level in ("nominal", "ordinal", "interval"):
        assert alpha(x, level) < 0


def test_unpairable_units_do_not_count():
    extra = np.array([[5.0, NAN, NAN], [NAN, 1.0, NAN], [NAN, NAN, NAN], [NAN, NAN, 7.0]])
    for level in LEVELS:
        assert alpha(np.hstack([PAPER, extra]), level) == pytest.approx(alpha(PAPER, level), abs=1e-12)


def test_invariances():
    rng = np.random.default_rng(3)
    x = _random(11, "grades", 4, 80)
    perm_units, perm_coders = rng.permutation(80), rng.permutation(4)
    for level in LEVELS:
        a = alpha(x, level)
        assert alpha(x[perm_coders][:, perm_units], level) == pytest.approx(a, abs=1e-12)
    # interval: affine maps; ordinal: monotone maps; nominal: any relabelling
    assert alpha(3 * x - 7, "interval") == pytest.approx(alpha(x, "interval"), abs=1e-12)
    assert alpha(np.exp(x), "ordinal") == pytest.approx(alpha(x, "ordinal"), abs=1e-12)
    assert alpha(np.exp(x), "interval") != pytest.approx(alpha(x, "interval"), abs=1e-6)
    relabel = np.array([10.0, -1.0, 0.5, 4.0])
    y = np.where(np.isnan(x), NAN, relabel[np.nan_to_num(x).astype(int)])
    assert alpha(y, "nominal") == pytest.approx(alpha(x, "nominal"), abs=1e-12)
    assert alpha(y, "ordinal") != pytest.approx(alpha(x, "ordinal"), abs=1e-6)
    # ratio: scale maps
    assert alpha(2.5 * x, "ratio") == pytest.approx(alpha(x, "ratio"), abs=1e-12)


def test_levels_differ_on_the_same_data():
    values = {level: alpha(PAPER, level) for level in LEVELS}
    assert len({round(v, 6) for v in values.values()}) == len(LEVELS)


def test_large_input():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 4, (4, 100_000)).astype(float)
    x[rng.random(x.shape) < 0.2] = NAN
    for level in ("nominal", "ordinal", "interval"):
        assert -0.1 < alpha(x, level) < 0.1  # independent coders
    y = rng.random((4, 100_000))
    assert -0.1 < alpha(y, "interval") < 0.1


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="level"):
        alpha(PAPER, "cardinal")
    with pytest.raises(ValueError, match="2-D"):
        alpha(np.array([1.0, 2.0]), "nominal")
    with pytest.raises(ValueError, match="finite"):
        alpha(np.array([[1.0, np.inf], [1.0, 2.0]]), "interval")
    with pytest.raises(ValueError, match=">= 0"):
        alpha(np.array([[1.0, -1.0], [1.0, 2.0]]), "ratio")
    with pytest.raises(ValueError, match="distinct values"):
        coincidences(np.random.default_rng(0).random((2, 3000)))


@pytest.mark.parametrize("data, level, message", [
    ([[1.0, np.inf], [1.0, 2.0]], "interval", "reliability data must be finite or NaN (missing)"),
    ([[1.0, -2.0], [1.0, 2.0]], "ratio", "the ratio level needs values >= 0"),
    ([1.0, 2.0], "interval", "reliability data must be a 2-D (coders × units) array, got shape (2,)"),
    ([[1.0, 2.0], [1.0, 2.0]], "cardinal", "level must be one of nominal, ordinal, interval, ratio, got 'cardinal'"),
])
def test_bad_reliability_data_says_what_is_wrong(data, level, message):
    with pytest.raises(ValueError) as e:
        alpha(np.array(data), level)
    assert str(e.value) == message
