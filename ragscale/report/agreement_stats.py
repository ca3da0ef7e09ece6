"""Agreement statistics of paired (human, metric) values (numpy only; tested against scipy):

- Spearman's rho: Pearson correlation of average ranks (scipy.stats.spearmanr);
- Kendall's tau-b with tie correction (scipy.stats.kendalltau's default), by merge sort;
- Cohen's kappa, unweighted and quadratic-weighted ((a - b)² of the values), when both sides
  are categorical: at most ``MAX_CATEGORIES`` distinct values each, and the metric's values
  among the human scale's (the human file's declared categories, else the values the humans
  used);
- accuracy when both sides are binary (0/1).
An undefined statistic (fewer than 2 records, a constant side, chance agreement of 1) is
``None`` with the reason, never 0. Confidence intervals: percentile bootstrap over records
(resampled with replacement, ``n_boot`` replicates, fixed seed); replicates where the statistic
is undefined are skipped and counted.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

MAX_CATEGORIES = 10


def _rank(a: np.ndarray) -> np.ndarray:
    """Average ranks (1-based), tied values sharing the mean of their ranks."""
    order = np.argsort(a, kind="mergesort")
    s = a[order]
    first = np.r_[True, s[1:] != s[:-1]]  # start of each run of equal values
    group = np.cumsum(first) - 1  # run index of each sorted position
    starts = np.r_[np.nonzero(first)[0], len(s)]  # run boundaries
    avg = (starts[:-1] + starts[1:] - 1) / 2 + 1  # mean 1-based rank of each run
    ranks = np.empty(len(a))
    ranks[order] = avg[group]
    return ranks


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    dx, dy = x - x.mean(), y - y.mean()
    den = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return None if den == 0 else float(dx @ dy) / den


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (average ranks for ties); ``None`` when undefined."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2:
        return None
    return _pearson(_rank(x), _rank(y))


def _inversions(r: np.ndarray) -> int:
    """Pairs i < j with r[i] > r[j] of non-negative integers: a bottom-up merge sort in numpy
    (each level counts the inversions between neighbouring sorted blocks with one searchsorted)."""
    n = len(r)
    if n < 2:
        return 0
    size = 1 << (n - 1).bit_length()
    k = int(r.max()) + 2  # values of a block live in [b*k, b*k + k - 1]; padding k - 1 sorts last
    a = np.full(size, k - 1, dtype=np.int64)
    a[:n] = r
    inv, w = 0, 1
    while w < size:
        nb = size // (2 * w)
        blocks = a.reshape(nb, 2, w)  # each half-block is sorted
        off = (np.arange(nb, dtype=np.int64) * k)[:, None]
        pos = np.searchsorted((blocks[:, 0, :] + off).ravel(), (blocks[:, 1, :] + off).ravel(), side="right")
        inv += int(nb * w * w - (pos - np.repeat(np.arange(nb) * w, w)).sum())  # left elements > each right one
        a = np.sort(blocks.reshape(nb, 2 * w), axis=1).ravel()
        w *= 2
    return inv


def _tied_pairs(change: np.ndarray) -> int:
    """Pairs within runs of equal values, given ``change[i]``: sorted item i+1 differs from item i."""
    bounds = np.r_[0, np.nonzero(change)[0] + 1, len(change) + 1]
    t = np.diff(bounds)
    return int((t * (t - 1) // 2).sum())


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b (tie-corrected, as scipy.stats.kendalltau's default), in O(n log² n):
    (concordant - discordant) / sqrt((n0 - ties in x) · (n0 - ties in y)); ``None`` when undefined."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    if n < 2:
        return None
    n0 = n * (n - 1) // 2
    order = np.lexsort((y, x))  # by x, ties in x by y: pairs tied in x are never inversions
    xs, ys = x[order], y[order]
    xchange = xs[1:] != xs[:-1]
    xtie, ntie = _tied_pairs(xchange), _tied_pairs(xchange | (ys[1:] != ys[:-1]))
    ysorted = np.sort(y)
    ytie = _tied_pairs(ysorted[1:] != ysorted[:-1])
    if xtie == n0 or ytie == n0:
        return None
    dis = _inversions(np.searchsorted(ysorted, ys))  # y as integer ranks
    return float(n0 - xtie - ytie + ntie - 2 * dis) / math.sqrt(float(n0 - xtie) * float(n0 - ytie))


def cohen_kappa(x: Sequence[float], y: Sequence[float], weights: str | None = None) -> float | None:
    """Cohen's kappa of two raters' categories (values compared exactly): 1 - Σ w·observed /
    Σ w·expected-by-chance over the confusion table. Unweighted: w = 1 off the diagonal;
    ``weights="quadratic"`` (ordinal labels): w = (a - b)², the squared distance of the values
    (equal to sklearn's quadratic weights on an evenly spaced scale, and unchanged by categories
    nobody used, so bootstrap replicates stay comparable). ``None`` when chance agreement is total."""
    x, y = [float(v) for v in x], [float(v) for v in y]
    n = len(x)
    if n < 1:
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
                   seed: int = 0, confidence: float = 0.95) -> dict:
    """Every applicable statistic of paired (human, metric) values, each as
    ``{"value", "ci": [lo, hi] | None, "reason"?, "boot_undefined"?}``; inapplicable ones absent.
    ``categorical`` / ``binary`` (kappa / accuracy apply) are decided from the data when ``None``."""
    h, m = np.asarray(human, float), np.asarray(metric, float)
    n = len(h)
    fns: dict[str, Any] = {"spearman": spearman, "kendall": kendall_tau_b}
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
        reps: dict[str, list[float]] = {name: [] for name in live}
        rng = np.random.default_rng(seed)
        for _ in range(n_boot):  # the same resampled records for every statistic
            idx = rng.integers(0, n, n)
            hb, mb = h[idx], m[idx]
            for name in live:
                r = fns[name](hb, mb)
                if r is not None:
                    reps[name].append(r)
        alpha = (1 - confidence) / 2
        for name in live:
            if reps[name]:
                out[name]["ci"] = [float(np.quantile(reps[name], alpha)), float(np.quantile(reps[name], 1 - alpha))]
            out[name]["boot_undefined"] = n_boot - len(reps[name])
    return out
