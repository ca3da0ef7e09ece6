"""Agreement statistics of paired (human, metric) values, from scipy.stats where scipy has them:

- Spearman's rho (``scipy.stats.spearmanr``, average ranks for ties);
- Kendall's tau-b with tie correction (``scipy.stats.kendalltau(variant="b")``);
- Cohen's kappa, unweighted and quadratic-weighted ((a - b)² of the values), when both sides
  are categorical: at most ``MAX_CATEGORIES`` distinct values each, and the metric's values
  among the human scale's (the human file's declared categories, else the values the humans
  used); computed here, see :func:`cohen_kappa` and docs/statistics.md for why;
- accuracy when both sides are binary (0/1).
An undefined statistic (fewer than 2 records, a NaN, a constant side, chance agreement of 1) is
``None`` with the reason, never 0. Confidence intervals: ``scipy.stats.bootstrap`` over records
(paired, ``n_boot`` resamples, fixed seed, the same resamples for every statistic), BCa; where
BCa is undefined (a resample on which the statistic is undefined, or a degenerate jackknife) the
percentile interval of the defined replicates, with the undefined ones counted.

Records are not independent when several are turns of one conversation: given each record's
cluster (``clusters``, int codes; :func:`ragscale.stats.clustered.cluster_codes`), the bootstrap
resamples whole clusters instead (:func:`cluster_bootstrap`: G clusters drawn with replacement,
their records concatenated, every statistic recomputed on the resample), BCa with the acceleration
from the leave-one-cluster-out jackknife (scipy's formulas, clusters in place of records), the
percentile interval where BCa is undefined, as above. Clusters that each hold one record are
scipy's record bootstrap itself (the same floats as without clusters).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ragscale.stats.intervals import rng_arg

MAX_CATEGORIES = 10


def _undefined(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether a correlation of ``x`` and ``y`` is undefined: fewer than 2 pairs, a NaN, or a constant side."""
    return (len(x) < 2 or bool(np.isnan(x).any() or np.isnan(y).any())
            or bool((x == x[0]).all()) or bool((y == y[0]).all()))


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (``scipy.stats.spearmanr``; average ranks for ties); ``None`` when undefined."""
    from scipy import stats

    x, y = np.asarray(x, float), np.asarray(y, float)
    return None if _undefined(x, y) else float(stats.spearmanr(x, y).statistic)


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b (tie-corrected; ``scipy.stats.kendalltau(variant="b")``); ``None`` when undefined."""
    from scipy import stats

    x, y = np.asarray(x, float), np.asarray(y, float)
    return None if _undefined(x, y) else float(stats.kendalltau(x, y, variant="b").statistic)


def cohen_kappa(x: Sequence[float], y: Sequence[float], weights: str | None = None) -> float | None:
    """Cohen's kappa of two raters' categories (values compared exactly): 1 - Σ w·observed /
    Σ w·expected-by-chance over the confusion table. Unweighted: w = 1 off the diagonal;
    ``weights="quadratic"`` (ordinal labels): w = (a - b)², the squared distance of the values
    (equal to sklearn's quadratic weights on an evenly spaced scale, and unchanged by categories
    nobody used, so bootstrap replicates stay comparable). ``None`` when chance agreement is total."""
    x, y = [float(v) for v in x], [float(v) for v in y]
    n = len(x)
    if n < 1 or any(math.isnan(v) for v in x + y):
        return None
    cats = sorted(set(x) | set(y))
    idx = {c: i for i, c in enumerate(cats)}
    k = len(cats)
    obs = np.zeros((k, k))
    for a, b in zip(x, y):
        obs[idx[a], idx[b]] += 1
    obs /= n
    exp = np.outer(obs.sum(1), obs.sum(0))
    if weights is None:
        w = 1.0 - np.eye(k)
    elif weights == "quadratic":
        c = np.asarray(cats)
        w = (c[:, None] - c[None, :]) ** 2
    else:
        raise ValueError(f"weights must be None or 'quadratic', got {weights!r}")
    den = float((w * exp).sum())
    return None if den == 0 else 1.0 - float((w * obs).sum()) / den


def accuracy(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Share of records where both sides give the same label."""
    return sum(1 for a, b in zip(x, y) if a == b) / len(x) if len(x) else None


def _why_undefined(x: np.ndarray, y: np.ndarray) -> str:
    if len(x) < 2:
        return f"{len(x)} paired record(s); need at least 2"
    if np.isnan(x).any() or np.isnan(y).any():
        return "NaN values"
    if len(set(x.tolist())) < 2 and len(set(y.tolist())) < 2:
        return "both sides are constant"
    if len(set(x.tolist())) < 2:
        return "the human ratings are constant"
    if len(set(y.tolist())) < 2:
        return "the metric is constant"
    return "undefined"


STATS = ("spearman", "kendall", "kappa", "kappa_quadratic", "accuracy")


def is_categorical(human: Sequence[float], metric: Sequence[float], scale: Iterable[float] | None = None) -> bool:
    """Both sides take at most MAX_CATEGORIES values and the metric's values are on the human scale
    (``scale``, else the values the humans used)."""
    hs, ms = set(human), set(metric)
    allowed = set(scale) if scale else hs
    return len(hs) <= MAX_CATEGORIES and len(ms) <= MAX_CATEGORIES and ms <= allowed | hs


def is_binary(human: Sequence[float], metric: Sequence[float]) -> bool:
    """Both sides are 0/1 labels."""
    return set(human) <= {0.0, 1.0} and set(metric) <= {0.0, 1.0}


def statistics_for(human: Sequence[float], metric: Sequence[float], *, scale: Iterable[float] | None = None,
                   categorical: bool | None = None, binary: bool | None = None, n_boot: int = 1000,
                   seed: int = 0, confidence: float = 0.95, clusters: Sequence[int] | None = None) -> dict:
    """Every applicable statistic of paired (human, metric) values, each as ``{"value", "ci": [lo, hi] |
    None, "reason"?, "ci_method"?, "boot_undefined"?}``; inapplicable ones absent.
    ``categorical`` / ``binary`` (kappa / accuracy apply) are decided from the data when ``None``.
    ``clusters``: each record's unit of resampling (int codes; None: every record alone)."""
    h, m = np.asarray(human, float), np.asarray(metric, float)
    n = len(h)
    fns: dict[str, Callable[[Any, Any], float | None]] = {"spearman": spearman, "kendall": kendall_tau_b}
    if categorical if categorical is not None else is_categorical(h.tolist(), m.tolist(), scale):
        fns["kappa"] = cohen_kappa
        fns["kappa_quadratic"] = lambda a, b: cohen_kappa(a, b, "quadratic")
    if binary if binary is not None else is_binary(h.tolist(), m.tolist()):
        fns["accuracy"] = accuracy
    out: dict[str, dict] = {}
    for name, fn in fns.items():
        value = fn(h, m) if n >= 2 else None
        out[name] = {"value": value, "ci": None}
        if value is None:
            out[name]["reason"] = _why_undefined(h, m)
    live = [name for name in fns if out[name]["value"] is not None]
    if live and n_boot > 0:
        for name, (ci, method, undefined) in zip(live, _bootstrap(h, m, [fns[k] for k in live], n_boot, seed,
                                                                  confidence, clusters)):
            out[name].update({"ci": ci, "boot_undefined": undefined})
            if ci is not None:
                out[name]["ci_method"] = method
    return out


def _bootstrap(h: np.ndarray, m: np.ndarray, fns: list[Callable[[Any, Any], float | None]], n_boot: int, seed: int,
               confidence: float, clusters: Sequence[int] | None = None) -> list[tuple[list[float] | None, str, int]]:
    """(interval, "BCa" | "percentile", undefined replicates) per statistic: one paired
    ``scipy.stats.bootstrap`` over records for all of them (the same resamples), or
    :func:`cluster_bootstrap` when ``clusters`` group some records; BCa, the percentile interval of
    the defined replicates where BCa is undefined."""
    from scipy import stats

    if clusters is not None:
        codes = np.unique(np.asarray(clusters), return_inverse=True)[1].ravel()
        if len(codes) != len(h):
            raise ValueError(f"{len(h)} records but {len(codes)} cluster codes")
        if codes.max(initial=-1) + 1 < len(h):  # some cluster holds several records
            return cluster_bootstrap(h, m, fns, codes, n_boot, seed, confidence)

    def statistic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.array([np.nan if (v := fn(a, b)) is None else v for fn in fns])

    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):  # undefined BCa: handled below
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap((h, m), statistic, paired=True, vectorized=False, n_resamples=n_boot,
                              confidence_level=confidence, method="BCa", **rng_arg(seed))
    lows, highs = np.atleast_1d(res.confidence_interval.low), np.atleast_1d(res.confidence_interval.high)
    dist = np.atleast_2d(res.bootstrap_distribution)
    alpha = (1 - confidence) / 2
    out = []
    for lo, hi, reps in zip(lows, highs, dist):
        reps = reps[np.isfinite(reps)]
        if math.isfinite(lo) and math.isfinite(hi):
            out.append(([float(lo), float(hi)], "BCa", n_boot - len(reps)))
        elif len(reps):
            out.append(([float(np.quantile(reps, alpha)), float(np.quantile(reps, 1 - alpha))], "percentile",
                        n_boot - len(reps)))
        else:
            out.append((None, "percentile", n_boot))
    return out


def cluster_bootstrap(h: np.ndarray, m: np.ndarray, fns: list[Callable[[Any, Any], float | None]], codes: np.ndarray,
                      n_boot: int, seed: int, confidence: float) -> list[tuple[list[float] | None, str, int]]:
    """:func:`_bootstrap`'s result resampling whole clusters (``codes``: 0 .. G-1 per record): each of
    ``n_boot`` resamples draws G clusters with replacement (``numpy.random.default_rng(seed)``) and
    concatenates their records; BCa as scipy computes it (z0 from the share of replicates below the
    estimate, ties counted half; the acceleration ``sum u**3 / (6 * (sum u**2)**1.5)`` of the
    leave-one-cluster-out jackknife deviations u), the percentile interval of the defined replicates
    where a replicate, a jackknife value or the BCa levels are undefined."""
    from scipy.special import ndtr, ndtri

    def statistic(idx: np.ndarray) -> np.ndarray:
        a, b = h[idx], m[idx]
        return np.array([np.nan if (v := fn(a, b)) is None else v for fn in fns])

    g = int(codes.max()) + 1
    order = np.argsort(codes, kind="stable")  # records by cluster: cluster c is order[start[c]:start[c] + size[c]]
    size = np.bincount(codes, minlength=g)
    start = np.cumsum(size) - size
    rng = np.random.default_rng(seed)
    theta = statistic(np.arange(len(h)))
    boot = np.empty((len(fns), n_boot))
    with np.errstate(divide="ignore", invalid="ignore"):
        for b in range(n_boot):
            drawn = rng.integers(0, g, g)
            sizes = size[drawn]
            offset = np.repeat(start[drawn] - (np.cumsum(sizes) - sizes), sizes)
            boot[:, b] = statistic(order[offset + np.arange(int(sizes.sum()))])
        jack = np.stack([statistic(np.flatnonzero(codes != c)) for c in range(g)], axis=1)  # (stats, G)
        u = jack.mean(axis=1, keepdims=True) - jack
        accel = (u ** 3).sum(axis=1) / (6.0 * (u ** 2).sum(axis=1) ** 1.5)
        z0 = ndtri(((boot < theta[:, None]).sum(axis=1) + (boot <= theta[:, None]).sum(axis=1)) / (2.0 * n_boot))
        z = ndtri((1 - confidence) / 2)
        levels = (ndtr(z0 + (z0 + z) / (1 - accel * (z0 + z))), ndtr(z0 + (z0 - z) / (1 - accel * (z0 - z))))
    alpha = (1 - confidence) / 2
    out: list[tuple[list[float] | None, str, int]] = []
    for i, reps in enumerate(boot):
        defined = reps[np.isfinite(reps)]
        lo_level, hi_level = float(levels[0][i]), float(levels[1][i])
        if len(defined) == n_boot and math.isfinite(lo_level) and math.isfinite(hi_level):
            out.append(([float(np.quantile(reps, lo_level)), float(np.quantile(reps, hi_level))], "BCa", 0))
        elif len(defined):
            out.append(([float(np.quantile(defined, alpha)), float(np.quantile(defined, 1 - alpha))], "percentile",
                        n_boot - len(defined)))
        else:
            out.append((None, "percentile", n_boot))
    return out
