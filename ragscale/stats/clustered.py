"""Cluster-aware inference on a mean: tasks that are turns of one conversation (MT-RAG) are not
independent, so the unit resampled or weighed is the conversation (the cluster), not the task.
Clusters are int codes per task (:func:`cluster_codes` makes them from labels), in any order,
not necessarily contiguous. Pure numpy/scipy; no Ray, no files.

- :func:`cluster_mean`: the mean with a cluster-robust (CR1, Liang-Zeger) standard error,
  ``V = G/(G-1) * sum_g (S_g - mean * N_g)**2 / N**2`` (S_g, N_g a cluster's sum and task count,
  G clusters, N tasks) and the interval ``mean +- t_{G-1} * sqrt(V)``. Assumes clusters independent
  of one another, any correlation inside one, and enough clusters for the t approximation (a few
  dozen); with one task per cluster it is the Student-t interval (``intervals.mean_ci``).
- :func:`design_effect`: that variance over the naive one (s**2 / N): how many times wider, squared,
  the honest interval is than one that treats tasks as independent.
- :func:`cluster_paired_tests`: (low, high, p) of a mean paired difference (the mean over tasks,
  ``sum_g D_g / sum_g n_g``). The interval: a BCa bootstrap that resamples whole clusters (the
  ratio statistic; acceleration from the leave-one-cluster-out jackknife). The p-value: a
  two-sided sign-flip test on the clusters' summed differences, which assumes under the null that
  each D_g is symmetric about 0 (A and B exchangeable within a conversation); exact enumeration
  when 2**G <= resamples. Comparisons whose clusters all hold one task are
  :func:`ragscale.stats.paired.paired_tests` itself (the same floats).

Seeding follows :mod:`ragscale.stats.paired`: one generator per (seed, number of clusters, stream),
shared by the comparisons with that many clusters; each comparison's result is computed on its own
from those draws, so it does not depend on the other comparisons or on their order.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ragscale.stats.intervals import t_cdf, t_ppf
from ragscale.stats.paired import (bca_bounds, chunk_steps, flip_count, paired_tests, resample_rng, sign_flips,
                                   two_sided_p)


def cluster_codes(labels: Sequence[object]) -> np.ndarray:
    """Int codes (0, 1, ...) of tasks' cluster labels, numbered in the labels' sorted string order
    (labels with the same string form are one cluster); a None label is a cluster of its own, coded
    after every label, in task order."""
    named = sorted({str(x) for x in labels if x is not None})
    code = {name: i for i, name in enumerate(named)}
    out = np.empty(len(labels), dtype=np.int64)
    nxt = len(named)
    for i, x in enumerate(labels):
        if x is None:
            out[i], nxt = nxt, nxt + 1
        else:
            out[i] = code[str(x)]
    return out


def _clusters_of(values: np.ndarray, clusters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(summed values, task counts) per cluster, clusters in the order of their codes."""
    values = np.asarray(values, dtype=float)
    clusters = np.asarray(clusters)
    if values.ndim != 1 or clusters.shape != values.shape:
        raise ValueError(f"values and clusters must be 1-d of one length, got {values.shape} and {clusters.shape}")
    _, inv = np.unique(clusters, return_inverse=True)
    inv = inv.ravel()
    g = int(inv.max()) + 1 if len(inv) else 0
    return np.bincount(inv, weights=values, minlength=g), np.bincount(inv, minlength=g)


def _cr1(values: np.ndarray, sums: np.ndarray, counts: np.ndarray, mean: float) -> float:
    """The CR1 variance of the mean: G/(G-1) * sum_g (S_g - mean * N_g)**2 / N**2 (G >= 2)."""
    g, n = len(sums), len(values)
    resid = sums - mean * counts
    return g / (g - 1) * float(resid @ resid) / (n * n)


def cr1_variance(values: np.ndarray, clusters: np.ndarray) -> float | None:
    """The CR1 variance of the mean of ``values`` (:func:`_cr1`); None for fewer than 2 clusters."""
    y = np.asarray(values, dtype=float)
    sums, counts = _clusters_of(y, clusters)
    return _cr1(y, sums, counts, math.fsum(y) / len(y)) if len(sums) >= 2 else None


def cluster_mean(values: np.ndarray, clusters: np.ndarray, confidence: float = 0.95) -> dict | None:
    """The mean of ``values`` with its cluster-robust (CR1) t interval on G - 1 degrees of freedom:
    ``{"mean", "ci": [lo, hi], "n", "clusters", "design_effect"}``; ``ci`` and ``design_effect``
    are None for fewer than 2 clusters, ``design_effect`` also when the values are all equal.
    None for fewer than 2 values."""
    y = np.asarray(values, dtype=float)
    sums, counts = _clusters_of(y, clusters)
    n, g = len(y), len(sums)
    if n < 2:
        return None
    mean = math.fsum(y) / n
    out = {"mean": mean, "ci": None, "n": n, "clusters": g, "design_effect": None}
    if g < 2:
        return out
    var = _cr1(y, sums, counts, mean)
    half = t_ppf(0.5 + confidence / 2, g - 1) * math.sqrt(var)
    out["ci"] = [mean - half, mean + half]
    s2 = float(((y - mean) ** 2).sum()) / (n - 1)
    out["design_effect"] = var / (s2 / n) if s2 > 0 else None
    return out


def subset_vs_all(values: np.ndarray, inside: np.ndarray, clusters: np.ndarray,
                  confidence: float = 0.95) -> dict | None:
    """The mean of the values ``inside`` a subset (a slice) minus the mean of all of them, with a
    cluster-robust (CR1) standard error: each value's influence on the two means,
    ``1[inside] (y - mean_in) / n_in - (y - mean) / N``, summed per cluster, ``V = G/(G-1) sum_g psi_g**2``;
    the t interval and two-sided p on min(G_in, G_out) - 1 degrees of freedom (the clusters with a
    value inside, outside: with a slice of few conversations, G - 1 would reject a true null about
    twice as often as it says). ``{"diff", "ci", "p", "n", "clusters"}``; None for an empty or whole
    subset, a side with fewer than 2 clusters, or no variation to weigh."""
    y = np.asarray(values, dtype=float)
    inside = np.asarray(inside, dtype=bool)
    k, n = int(inside.sum()), len(y)
    if k == 0 or k == n:
        return None
    mean_in, mean = math.fsum(y[inside]) / k, math.fsum(y) / n
    psi = np.where(inside, (y - mean_in) / k, 0.0) - (y - mean) / n
    sums, _ = _clusters_of(psi, clusters)
    g = len(sums)
    codes = np.asarray(clusters)
    g_in, g_out = len(np.unique(codes[inside])), len(np.unique(codes[~inside]))
    var = g / (g - 1) * float(sums @ sums) if min(g_in, g_out) >= 2 else 0.0
    if var <= 0:
        return None
    se, diff, df = math.sqrt(var), mean_in - mean, min(g_in, g_out) - 1
    half = t_ppf(0.5 + confidence / 2, df) * se
    p = 2.0 * t_cdf(-abs(diff) / se, df)
    return {"diff": diff, "ci": [diff - half, diff + half], "p": min(1.0, max(0.0, p)), "n": k, "clusters": g_in}


def design_effect(values: np.ndarray, clusters: np.ndarray) -> float | None:
    """The cluster-robust (CR1) variance of the mean over the naive s**2 / N (1 for one task per
    cluster; about 1 + (m - 1) * ICC for clusters of m tasks); None for fewer than 2 values or
    clusters, or values all equal."""
    est = cluster_mean(values, clusters)
    return None if est is None else est["design_effect"]


def cluster_bootstrap_ratios(sums: np.ndarray, counts: np.ndarray, resamples: int,
                             rng: np.random.Generator) -> np.ndarray:
    """(K, resamples) ratios sum(resampled S_g) / sum(resampled n_g): the G clusters resampled with
    replacement, the same resamples for every row of ``sums`` / ``counts`` (K, G). Each row is its
    own matrix-vector product of the resamples' cluster counts, so it does not depend on the others."""
    k, g = sums.shape
    out = np.empty((k, resamples))
    n = counts.astype(float)
    for start, size in chunk_steps(resamples, g):
        idx = rng.integers(0, g, (size, g))
        drawn = np.bincount((idx + (np.arange(size) * g)[:, None]).ravel(), minlength=size * g)
        drawn = drawn.reshape(size, g).astype(float)
        for j in range(k):
            out[j, start:start + size] = (drawn @ sums[j]) / (drawn @ n[j])
    return out


def cluster_bca_interval(sums: np.ndarray, counts: np.ndarray, boot: np.ndarray, confidence: float,
                         flat: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """BCa interval of each row's ratio sum(S) / sum(n) from its cluster-bootstrap ratios ``boot``
    (K, B): z0 from the share of ratios below the estimate, the acceleration from the
    leave-one-cluster-out jackknife of the ratio (scipy's conventions, as
    :func:`ragscale.stats.paired.bca_interval`). A row whose jackknife values are all equal, or
    marked ``flat``, gets [estimate, estimate]; one whose BCa levels are undefined the percentile
    interval."""

    total, n = sums.sum(axis=1), counts.sum(axis=1).astype(float)
    theta = total / n
    with np.errstate(divide="ignore", invalid="ignore"):
        jack = (total[:, None] - sums) / (n[:, None] - counts)  # (K, G): each cluster left out
        u = jack.mean(axis=1)[:, None] - jack
    lo, hi, ss = bca_bounds(theta, boot, u, confidence)
    flat_rows = ~(ss > 0) if flat is None else ~(ss > 0) | flat  # ~(> 0): NaN (one cluster) is flat too
    lo[flat_rows], hi[flat_rows] = theta[flat_rows], theta[flat_rows]
    return lo, hi


def cluster_signflip_pvalues(sums: np.ndarray, counts: np.ndarray, resamples: int,
                             rng: np.random.Generator) -> np.ndarray:
    """Two-sided sign-flip p-value of each row's sum(S) / sum(n): under the null every cluster's
    summed difference keeps or flips its sign with probability 1/2 (scipy.stats.permutation_test's
    conventions, as :func:`ragscale.stats.paired.signflip_pvalues`: exact when 2**G <= resamples,
    else ``resamples`` random flips and (count + 1) / (resamples + 1); a relative tolerance of
    100 eps for equal statistics)."""
    k, g = sums.shape
    n = counts.sum(axis=1).astype(float)
    total = sums.sum(axis=1)
    observed = total / n
    gamma = np.abs(observed) * np.finfo(float).eps * 100
    less = np.zeros(k, dtype=np.int64)
    greater = np.zeros(k, dtype=np.int64)
    exact, count = flip_count(g, resamples)
    for flips in sign_flips(g, resamples, rng):
        flips = flips.astype(float)
        for j in range(k):
            null = (total[j] - 2.0 * (flips @ sums[j])) / n[j]
            less[j] += int((null <= observed[j] + gamma[j]).sum())
            greater[j] += int((null >= observed[j] - gamma[j]).sum())
    return two_sided_p(less, greater, exact, count)


def cluster_paired_tests(diffs: Sequence[np.ndarray], clusters: Sequence[np.ndarray], *, resamples: int,
                         confidence: float, seed: int) -> list[tuple[float, float, float]]:
    """(ci low, ci high, two-sided p) of the mean of each difference vector, its tasks grouped by
    ``clusters`` (int codes, one per task): a cluster BCa bootstrap interval and a cluster sign-flip
    p-value. A comparison whose clusters each hold one task gets ``paired_tests``' result (those
    comparisons are tested together, as ``paired_tests`` batches them). With a single cluster the
    interval is the point [mean, mean] and p = 1, as ``paired_tests`` gives for one value."""
    if len(diffs) != len(clusters):
        raise ValueError(f"{len(diffs)} difference vectors but {len(clusters)} cluster vectors")
    out: list[tuple[float, float, float] | None] = [None] * len(diffs)
    singletons: list[int] = []
    by_g: dict[int, list[tuple[int, np.ndarray, np.ndarray, bool]]] = {}
    for i, (d, c) in enumerate(zip(diffs, clusters)):
        d = np.asarray(d, dtype=float)
        sums, counts = _clusters_of(d, c)
        if len(sums) == len(d):
            singletons.append(i)
        else:
            by_g.setdefault(len(sums), []).append((i, sums, counts, bool(np.ptp(d) == 0)))
    if singletons:
        done = paired_tests([diffs[i] for i in singletons], resamples=resamples, confidence=confidence, seed=seed)
        for i, res in zip(singletons, done):
            out[i] = res
    for g in sorted(by_g):
        rows = by_g[g]
        sums = np.stack([r[1] for r in rows])
        counts = np.stack([r[2] for r in rows])
        boot = cluster_bootstrap_ratios(sums, counts, resamples, resample_rng(seed, g, 0))
        lo, hi = cluster_bca_interval(sums, counts, boot, confidence, np.array([r[3] for r in rows]))
        p = cluster_signflip_pvalues(sums, counts, resamples, resample_rng(seed, g, 1))
        for j, (i, *_rest) in enumerate(rows):
            out[i] = (float(lo[j]), float(hi[j]), float(p[j]))
    return out  # type: ignore[return-value]
