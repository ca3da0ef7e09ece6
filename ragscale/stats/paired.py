"""The paired tests behind :mod:`ragscale.report.significance`, vectorized over comparisons.

Each comparison is a vector of per-task differences ``d`` (model A minus model B). For its mean:

- a **BCa bootstrap interval**: tasks resampled with replacement; the bias correction z0 and
  the acceleration as ``scipy.stats.bootstrap(method="BCa")`` computes them (the jackknife of a
  mean in closed form: its influence values are ``d - mean(d)``), the bounds as
  ``scipy.stats.quantile``'s linear interpolation;
- a **sign-flip permutation p-value** (two-sided): under "A and B are exchangeable on each task"
  every difference keeps or flips its sign with probability 1/2, as
  ``scipy.stats.permutation_test(permutation_type="samples")`` does for one sample: exact when
  2**n <= resamples, else ``resamples`` random flips and scipy's (count + 1) / (resamples + 1).

Comparisons with the same number of tasks share their resamples (one generator per task count,
seeded from the seed and the count) and are computed together: the bootstrap means as a gather
(few rows) or one matrix product of resample counts (many rows), the sign flips as one matrix
product (flipped sum = sum - 2 * d @ flipped). The
bootstrap draws what ``scipy.stats.bootstrap`` draws from the same generator; the tests check
both against scipy on the same data (tests/unit/test_significance.py).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

CHUNK = 1 << 22  # resampled entries held at once (32 MiB of float64)
GATHER_ROWS = 4  # comparisons of one size from which on bootstrap means are a matrix product
CORRECTIONS = ("holm", "bonferroni", "none", "bh")


def resample_rng(seed: int, n: int, stream: int) -> np.random.Generator:
    """The generator of one kind of resample (0: bootstrap, 1: sign flips) for comparisons of n tasks."""
    return np.random.default_rng([seed, n, stream])


def chunk_steps(total: int, per: int) -> list[tuple[int, int]]:
    """(start, size) chunks of ``total`` resamples of ``per`` entries each, CHUNK entries at most."""
    step = max(1, min(total, CHUNK // max(per, 1)))
    return [(s, min(step, total - s)) for s in range(0, total, step)]


def bootstrap_means(d: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(K, resamples) means of tasks resampled with replacement, the same resamples for each row of
    ``d`` (K, n), drawn as ``scipy.stats.bootstrap`` draws them from the same generator. A few rows:
    gathered and averaged as scipy does (the same bootstrap distribution to the last bit); many rows:
    each resample's counts of every task, times ``d`` (one matrix product; equal to rounding)."""
    k, n = d.shape
    out = np.empty((k, resamples))
    if k < GATHER_ROWS:
        for start, size in chunk_steps(resamples, n):
            idx = rng.integers(0, n, (size, n))
            for j in range(k):
                out[j, start:start + size] = np.take(d[j], idx).mean(axis=-1)
        return out
    for start, size in chunk_steps(resamples, n):
        idx = rng.integers(0, n, (size, n))
        counts = np.bincount((idx + (np.arange(size) * n)[:, None]).ravel(), minlength=size * n)
        out[:, start:start + size] = d @ counts.reshape(size, n).T.astype(float) / n
    return out


def bca_interval(d: np.ndarray, boot: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The BCa interval of each row's mean from its bootstrap means ``boot`` (K, B), as scipy computes
    it; a row whose values are all equal gets [value, value], one whose BCa levels are undefined
    the percentile interval."""
    theta = d.mean(axis=1)
    lo, hi, ss = bca_bounds(theta, boot, d - theta[:, None], confidence)
    flat = ss == 0
    lo[flat], hi[flat] = theta[flat], theta[flat]
    return lo, hi


def bca_bounds(theta: np.ndarray, boot: np.ndarray, u: np.ndarray,
               confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's BCa bounds from its estimate ``theta``, bootstrap values ``boot`` (K, B) and jackknife
    influence values ``u`` (scipy's z0 and acceleration; the percentile levels where BCa's are
    undefined), and the influence values' sums of squares (0: a flat row, for the caller)."""
    from scipy.special import ndtr, ndtri

    b = boot.shape[1]
    below = (boot < theta[:, None]).sum(axis=1) + (boot <= theta[:, None]).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ss = (u * u).sum(axis=1)
        z0 = ndtri(below / (2.0 * b))
        accel = (u ** 3).sum(axis=1) / (6.0 * ss ** 1.5)
        z = ndtri((1 - confidence) / 2)
        lo_level = ndtr(z0 + (z0 + z) / (1 - accel * (z0 + z)))
        hi_level = ndtr(z0 + (z0 - z) / (1 - accel * (z0 - z)))
    bad = ~(np.isfinite(lo_level) & np.isfinite(hi_level))
    lo_level[bad], hi_level[bad] = (1 - confidence) / 2, (1 + confidence) / 2
    ordered = np.sort(boot, axis=1)
    return row_quantile(ordered, lo_level), row_quantile(ordered, hi_level), ss


def row_quantile(ordered: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Row i's quantile ``q[i]`` of sorted rows, linear interpolation (numpy's and scipy's default)."""
    pos = q * (ordered.shape[1] - 1)
    below = np.clip(np.floor(pos).astype(int), 0, ordered.shape[1] - 1)
    above = np.minimum(below + 1, ordered.shape[1] - 1)
    rows = np.arange(len(q))
    frac = pos - below
    return ordered[rows, below] + frac * (ordered[rows, above] - ordered[rows, below])


def signflip_pvalues(d: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Two-sided sign-flip p-value of each row's mean (scipy.stats.permutation_test's conventions:
    exact below 2**n <= resamples, a relative tolerance of 100 eps for equal means)."""
    k, n = d.shape
    observed = d.mean(axis=1)
    gamma = np.abs(observed) * np.finfo(float).eps * 100
    less = np.zeros(k, dtype=np.int64)
    greater = np.zeros(k, dtype=np.int64)
    exact, total = flip_count(n, resamples)
    for flips in sign_flips(n, resamples, rng):
        null = (d.sum(axis=1)[:, None] - 2.0 * (d @ flips.T.astype(float))) / n  # (K, size): sum of +-d over n
        less += (null <= (observed + gamma)[:, None]).sum(axis=1)
        greater += (null >= (observed - gamma)[:, None]).sum(axis=1)
    return two_sided_p(less, greater, exact, total)


def flip_count(n: int, resamples: int) -> tuple[bool, int]:
    """Whether the sign flips of ``n`` values are enumerated (2**n <= resamples) and how many there are."""
    exact = n < 63 and 2 ** n <= resamples
    return exact, 2 ** n if exact else resamples


def sign_flips(n: int, resamples: int, rng: np.random.Generator):  # noqa: ANN201 - a generator of arrays
    """The sign patterns of a sign-flip test of ``n`` values, in chunks of (size, n) 0/1 arrays: every
    pattern once when enumerated (:func:`flip_count`), else ``resamples`` random ones, drawn packed."""
    exact, total = flip_count(n, resamples)
    for start, size in chunk_steps(total, n):
        if exact:  # every sign pattern once: the bits of start .. start + size - 1
            yield (np.arange(start, start + size)[:, None] >> np.arange(n)[None, :]) & 1
        else:
            yield np.unpackbits(rng.integers(0, 256, (size, (n + 7) // 8), dtype=np.uint8), axis=1)[:, :n]


def two_sided_p(less: np.ndarray, greater: np.ndarray, exact: bool, total: int) -> np.ndarray:
    """The two-sided p-value from the counts of patterns at or below / above the observed statistic,
    scipy.stats.permutation_test's way: exact when enumerated, else (count + 1) / (resamples + 1)."""
    adjust = 0 if exact else 1
    p = 2 * np.minimum(less + adjust, greater + adjust) / (total + adjust)
    return np.clip(p, 0.0, 1.0)


def paired_tests(diffs: Sequence[np.ndarray], *, resamples: int, confidence: float,
                 seed: int) -> list[tuple[float, float, float]]:
    """(ci low, ci high, p) of the mean of each difference vector (at least 2 values each)."""
    out: list[tuple[float, float, float] | None] = [None] * len(diffs)
    by_n: dict[int, list[int]] = {}
    for i, d in enumerate(diffs):
        by_n.setdefault(len(d), []).append(i)
    for n in sorted(by_n):
        rows = by_n[n]
        d = np.stack([np.asarray(diffs[i], dtype=float) for i in rows])
        lo, hi = bca_interval(d, bootstrap_means(d, resamples, resample_rng(seed, n, 0)), confidence)
        p = signflip_pvalues(d, resamples, resample_rng(seed, n, 1))
        for j, i in enumerate(rows):
            out[i] = (float(lo[j]), float(hi[j]), float(p[j]))
    return out  # type: ignore[return-value]


def adjust(pvalues: Sequence[float], correction: str) -> list[float]:
    """p-values adjusted for multiple comparisons: Holm's step-down (family-wise error), Bonferroni,
    Benjamini-Hochberg's step-up ("bh", false discovery rate: :func:`benjamini_hochberg`), or none."""
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    if correction == "none" or m == 0:
        return p.tolist()
    if correction == "bonferroni":
        return np.minimum(1.0, p * m).tolist()
    if correction == "bh":
        return benjamini_hochberg(p).tolist()
    if correction != "holm":
        raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}, got {correction!r}")
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = stepped
    return out.tolist()


def benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (the project's one definition of BH): the i-th smallest
    p times m / i, made monotone from the largest down (step-up), capped at 1; as statsmodels'
    ``multipletests(method="fdr_bh")``. Ties keep their input order (a stable sort)."""
    p = np.asarray(p, dtype=float)
    m = len(p)
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    stepped = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    out = np.empty(m)
    out[order] = stepped
    return out
