"""Prediction-powered estimates of a mean and of a paired difference (PPI++, Angelopoulos, Duchi and
Zrnic, 2023, with power tuning; ppi-python): human labels on a subset correct a judge's bias, the
judge's values on the unlabelled records narrow the interval. The naive (judge only) and human-only
estimates beside them use the CLT interval. The calibration report (:mod:`ragscale.report.calibration`)
reads them; docs/calibration.md says what each assumes.

Clusters (a cluster-robust variance where ppi-python has none, documented here). Records that are
turns of one conversation are not independent, and ppi-python's intervals, which treat every record
as independent, are then too narrow. Given each record's cluster (``clusters`` of the labelled,
``clusters_unlabeled`` of the unlabelled records; int codes, :func:`ragscale.stats.clustered.cluster_codes`)
the point estimates stay ppi-python's, and so does its power-tuned lambda (clipped to [0, 1]; the
iid formula ``sum((y - mean y)(yhat - mean yhat)) / n / ((1 + n/N) * var(yhat, all records))``,
still a valid weight, no longer the optimal one); only the intervals change:

- naive and human-only (one mean): :func:`ragscale.stats.clustered.cluster_mean`, the CR1 t interval
  on G - 1 degrees of freedom;
- calibrated, ``theta = lambda * mean_U(yhat) + mean_L(y - lambda * yhat)`` (U: the N unlabelled
  records, L: the n labelled): with ``e_L,g = sum_{i in g, L} (r_i - mean r) / n`` (r = y - lambda yhat)
  and ``e_U,g = sum_{j in g, U} (v_j - mean v) / N`` (v = lambda yhat) per cluster g,
  ``Var = G_L/(G_L-1) sum_g e_L,g**2 + G_U/(G_U-1) sum_g e_U,g**2 + 2 G/(G-1) sum_g e_L,g e_U,g``
  (G_L, G_U, G: the clusters with labelled, unlabelled, any records). The first two terms are the
  CR1 variances of the two means, ppi-python's CLT variance (the sum of the two means' variances)
  with clusters in place of records: as ppi-python does, the labelled and the unlabelled parts are
  treated as two independent samples (clusters independent of one another, the labelled records
  chosen independently of their values). The third term is their covariance inside conversations
  that hold both labelled and unlabelled turns (0 when labels cover whole conversations; ppi-python's
  independent records have none): without it the interval undercovered when labels were spread
  over turns (about 90% for 95%, tests/unit/test_cluster_ppi.py). The interval is
  ``theta +- z_{1-alpha/2} sqrt(Var)``, the normal quantile as ppi-python's (statsmodels'
  ``_zconfint_generic``);
- a paired difference is the same on the per-task differences, its two-sided p for 0
  ``2 * (1 - Phi(|theta| / sqrt(Var)))`` (the humans-only one: the CR1 t test on G - 1 degrees of
  freedom, as its interval).

Without clusters, with clusters that each hold one record, or with fewer than 2 clusters in a part
(nothing to estimate a cluster variance from) every number is ppi-python's, as before.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ragscale.errors import UserError
from ragscale.stats.clustered import cr1_variance


def ppi() -> Any:
    """The ``ppi_py`` module (ppi-python), or a UserError saying how to install it."""
    try:
        import ppi_py
    except ImportError:
        raise UserError("calibration needs ppi-python: pip install 'ragscale[calibrate]' "
                        "(make test installs it)") from None
    return ppi_py


def _interval(mean: float, ci: Any) -> dict:
    lo, hi = (float(np.ravel(x)[0]) for x in ci)
    return {"mean": float(mean), "ci": [lo, hi]}


def _grouped(clusters: Any, clusters_unlabeled: Any, n: int, n_unlabeled: int) -> tuple[Any, Any]:
    """(labelled, unlabelled) cluster codes 0 .. G-1 numbered together, or (None, None) without
    clusters or when every cluster holds one record."""
    if clusters is None:
        return None, None
    cu = np.empty(0, dtype=np.int64) if clusters_unlabeled is None else np.asarray(clusters_unlabeled)
    c = np.asarray(clusters)
    if c.shape != (n,) or cu.shape != (n_unlabeled,):
        raise ValueError(f"cluster codes of {c.shape} and {cu.shape} for {n} labelled and {n_unlabeled} unlabelled "
                         "records")
    codes = np.unique(np.concatenate([c, cu]), return_inverse=True)[1].ravel()
    if codes.max(initial=-1) + 1 == n + n_unlabeled:
        return None, None
    return codes[:n], codes[n:]


def power_lambda(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray) -> float:
    """ppi-python's power-tuned lambda of a mean (``ppi_mean_ci``'s, clipped to [0, 1]):
    ``cov_n(y, yhat) / ((1 + n/N) * var(yhat and yhat_unlabeled, ddof=1))``."""
    n, big = len(y), len(yhat_unlabeled)
    cov = float(((y - y.mean()) * (yhat - yhat.mean())).sum()) / n
    var = float(np.var(np.concatenate([yhat, yhat_unlabeled]), ddof=1))
    return float(np.clip(cov / ((1 + n / big) * var), 0.0, 1.0))


def ppi_cluster_variance(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray, lam: float,
                         clusters: np.ndarray, clusters_unlabeled: np.ndarray) -> float | None:
    """The cluster-robust variance of the PPI++ mean with weight ``lam`` (the module docstring's
    formula; clusters numbered together); None with fewer than 2 clusters of labelled or of
    unlabelled records."""
    g_l, g_u = len(np.unique(clusters)), len(np.unique(clusters_unlabeled))
    if g_l < 2 or g_u < 2:
        return None
    _, inv = np.unique(np.concatenate([clusters, clusters_unlabeled]), return_inverse=True)
    inv = inv.ravel()
    g, n, big = int(inv.max()) + 1, len(y), len(yhat_unlabeled)
    r, v = y - lam * yhat, lam * yhat_unlabeled
    e_l = np.bincount(inv[:n], weights=r - r.mean(), minlength=g) / n
    e_u = np.bincount(inv[n:], weights=v - v.mean(), minlength=g) / big
    return (g_l / (g_l - 1) * float(e_l @ e_l) + g_u / (g_u - 1) * float(e_u @ e_u)
            + 2 * g / (g - 1) * float(e_l @ e_u))


def classical(values: np.ndarray, confidence: float, clusters: Any = None) -> dict | None:
    """Mean and CLT interval (ppi-python's ``classical_mean_ci``); None for no values. With
    ``clusters`` grouping some values (and at least 2 of them) the CR1 t interval of
    :func:`ragscale.stats.clustered.cluster_mean`, with ``units``: how many clusters."""
    if len(values) == 0:
        return None
    c, _ = _grouped(clusters, None, len(values), 0)
    if c is not None:
        from ragscale.stats.clustered import cluster_mean

        est = cluster_mean(values, c, confidence)
        if est is not None and est["ci"] is not None:
            return {"mean": float(est["mean"]), "ci": [float(x) for x in est["ci"]], "units": int(est["clusters"])}
    return _interval(values.mean(), ppi().classical_mean_ci(values, alpha=1 - confidence))


def estimate(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray, confidence: float = 0.95,
             clusters: Any = None, clusters_unlabeled: Any = None) -> dict:
    """Naive (judge on every record), human-only and PPI++ estimates of the human mean, each
    ``{"mean", "ci"}``; the calibrated one also ``lambda``, the power-tuning weight of the judge
    (0: the judge ignored, 1: plain PPI), None where it does not change the estimate. With every
    record labelled or a constant judge the calibrated estimate is the human-only one.
    ``clusters`` / ``clusters_unlabeled``: each labelled / unlabelled record's cluster; the intervals
    are then cluster-robust (the module docstring), each estimate with ``units``."""
    p = ppi()
    y, yhat, yu = (np.asarray(a, dtype=float) for a in (y, yhat, yhat_unlabeled))
    c, cu = _grouped(clusters, clusters_unlabeled, len(y), len(yu))
    alpha = 1 - confidence
    both = None if c is None else np.concatenate([c, cu])
    out = {"naive": classical(np.concatenate([yhat, yu]), confidence, both), "human_only": classical(y, confidence, c)}
    judge = np.concatenate([yhat, yu])
    if len(yu) == 0 or np.ptp(judge) == 0:  # every record labelled, or a constant judge: nothing to add
        out["calibrated"] = dict(out["human_only"], **{"lambda": 0.0})
        return out
    point = float(np.ravel(p.ppi_mean_pointestimate(y, yhat, yu))[0])
    cal = _interval(point, p.ppi_mean_ci(y, yhat, yu, alpha=alpha))
    if not all(math.isfinite(v) for v in (cal["mean"], *cal["ci"])):  # a degenerate lambda: the humans alone
        out["calibrated"] = dict(out["human_only"], **{"lambda": 0.0})
        return out
    var = None if c is None else ppi_cluster_variance(y, yhat, yu, power_lambda(y, yhat, yu), c, cu)
    if var is not None:
        from scipy.stats import norm

        half = float(norm.ppf(1 - alpha / 2)) * math.sqrt(max(var, 0.0))
        cal.update(ci=[point - half, point + half], units=int(len(np.unique(both))))
    shift = yu.mean() - yhat.mean()  # the estimate is mean(y) + lambda * shift
    cal["lambda"] = float((point - y.mean()) / shift) if abs(shift) > 1e-12 else None
    out["calibrated"] = cal
    return out


def _pvalue(mean: float, se: float, df: float | None = None) -> float:
    """Two-sided p of ``mean`` against 0 with standard error ``se`` (normal, or t on ``df``)."""
    from scipy.stats import norm, t

    if se == 0:
        return 1.0 if mean == 0 else 0.0
    z = abs(mean) / se
    return float(2 * (norm.sf(z) if df is None else t.sf(z, df)))


def difference(d: np.ndarray, dhat: np.ndarray, dhat_unlabeled: np.ndarray, confidence: float,
               clusters: Any = None, clusters_unlabeled: Any = None) -> tuple:
    """(estimate, [low, high], two-sided p for 0) of a mean difference by PPI++ (classical
    when no task is unlabelled or the judged differences are constant); cluster-robust with
    ``clusters`` / ``clusters_unlabeled`` (the module docstring)."""
    p = ppi()
    alpha = 1 - confidence
    c, cu = _grouped(clusters, clusters_unlabeled, len(d), len(dhat_unlabeled))
    if len(dhat_unlabeled) == 0 or np.ptp(np.concatenate([dhat, dhat_unlabeled])) == 0:
        est = classical(d, confidence, c)
        var = None if c is None else cr1_variance(d, c)
        if var is not None and "units" in est:  # the CR1 t test, as its interval
            return est["mean"], est["ci"], _pvalue(est["mean"], math.sqrt(var), est["units"] - 1)
        return est["mean"], est["ci"], _pvalue(est["mean"], d.std() / math.sqrt(len(d)))
    point = float(np.ravel(p.ppi_mean_pointestimate(d, dhat, dhat_unlabeled))[0])
    lo, hi = (float(np.ravel(x)[0]) for x in p.ppi_mean_ci(d, dhat, dhat_unlabeled, alpha=alpha))
    pval = float(np.ravel(p.ppi_mean_pval(d, dhat, dhat_unlabeled, null=0.0))[0])
    if not all(math.isfinite(v) for v in (point, lo, hi, pval)):  # a degenerate lambda: the humans alone
        return difference(d, dhat, np.empty(0), confidence, c, None if c is None else np.empty(0, dtype=np.int64))
    var = None if c is None else ppi_cluster_variance(d, dhat, dhat_unlabeled, power_lambda(d, dhat, dhat_unlabeled),
                                                      c, cu)
    if var is not None:
        from scipy.stats import norm

        se = math.sqrt(max(var, 0.0))
        half = float(norm.ppf(1 - alpha / 2)) * se
        return point, [point - half, point + half], _pvalue(point, se)
    return point, [lo, hi], pval
