"""Confidence intervals from scipy.stats: Student-t intervals of a mean and Wilson score
intervals of a proportion, used by the comparison plots (:mod:`ragscale.report.plots`) and the
HTML report; and how a seed reaches scipy's resampling functions (:func:`rng_arg`). scipy is
imported when first needed (about 0.7 s), so the commands that fail early stay quick.

Every per-model interval of a metric's mean (report.html's leaderboard, distribution tables and
charts, ``ragscale plot``, the calibration's estimates) is :func:`mean_interval`: the Student-t
interval clipped to the metric's catalog ``bounds`` (docs/statistics.md, "Intervals of means")."""

from __future__ import annotations

import inspect
import math
from typing import Sequence

import numpy as np

CONFIDENCE = 0.95


class ExactSum:
    """A running sum that does not depend on the order of its terms: Shewchuk's exact partials
    (what ``math.fsum`` keeps), added one value at a time, so a mean over records streamed in any
    order is the same float (the pool finishes records in a different order each run). A few
    floats of memory; a non-finite term (inf, nan) is summed apart, where order cannot matter."""

    __slots__ = ("partials", "special")

    def __init__(self) -> None:
        self.partials: list[float] = []
        self.special = 0.0

    def add(self, x: float) -> None:
        if not math.isfinite(x):
            self.special += x
            return
        i = 0
        for y in self.partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo:
                self.partials[i] = lo
                i += 1
            x = hi
        self.partials[i:] = [x]

    def value(self) -> float:
        """The correctly rounded sum of the terms added."""
        return math.fsum(self.partials) + self.special if self.special else math.fsum(self.partials)


def rng_arg(seed: int) -> dict[str, np.random.Generator]:
    """The keyword argument that seeds ``scipy.stats.bootstrap`` / ``permutation_test`` with
    ``numpy.random.default_rng(seed)``, under the name this scipy uses (scipy 1.15 renamed
    ``random_state`` to ``rng``)."""
    from scipy import stats

    name = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"
    return {name: np.random.default_rng(seed)}


def t_cdf(t: float, df: float) -> float:
    """CDF of Student's t distribution with ``df`` degrees of freedom."""
    from scipy import stats

    return float(stats.t.cdf(t, df))


def norm_ppf(p: float) -> float:
    """Quantile of the standard normal distribution."""
    from scipy import stats

    return float(stats.norm.ppf(p))


def t_ppf(p: float, df: float) -> float:
    """Quantile of Student's t distribution."""
    from scipy import stats

    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError("t_ppf needs 0 < p < 1 and df > 0")
    return float(stats.t.ppf(p, df))


def mean_ci(n: int, mean: float, sd: float, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Student-t confidence interval of a mean from n, mean and sample sd (ddof=1)."""
    if n < 2 or not math.isfinite(sd):
        return None
    half = t_ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n)
    return (mean - half, mean + half)


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Student-t confidence interval of the mean of ``values``; ``None`` for n < 2."""
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    return mean_ci(n, mean, sd, confidence)


def clip(ci: tuple[float, float], bounds: tuple[float, float] | None,
         observed: tuple[float, float] | None = None) -> tuple[float, float]:
    """``ci`` cut to ``bounds`` (a metric's range; None: unbounded), widened to the ``observed`` values'
    (min, max) should a value lie outside the stated range: the true mean lies inside both, so the
    clipped interval covers it whenever ``ci`` did."""
    if bounds is None:
        return ci
    lo, hi = bounds
    if observed is not None:
        lo, hi = min(lo, observed[0]), max(hi, observed[1])
    return max(ci[0], lo), min(ci[1], hi)


def mean_interval(metric: str, n: int, mean: float, sd: float, observed: tuple[float, float] | None = None,
                  confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The interval every per-model mean of ``metric`` is shown with: the Student-t interval
    (:func:`mean_ci`) clipped to the metric's catalog bounds (:func:`clip`); None for n < 2."""
    ci = mean_ci(n, mean, sd, confidence)
    return None if ci is None else clip(ci, bounds_of(metric), observed)


def bounds_of(metric: str | None) -> tuple[float, float] | None:
    """A metric's catalog bounds (None for an unbounded metric or one not in the catalog)."""
    from ragscale.metrics.registry import lookup

    spec = lookup(metric) if metric else None
    return None if spec is None else spec.bounds


def wilson_interval(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Wilson score interval of a proportion k/n (``scipy.stats.binomtest``); ``None`` for n == 0."""
    from scipy import stats

    if n == 0:
        return None
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence, method="wilson")
    return (float(ci.low), float(ci.high))
