"""Prediction-powered estimates of a mean and of a paired difference (PPI++, Angelopoulos, Duchi and
Zrnic, 2023, with power tuning; ppi-python): human labels on a subset correct a judge's bias, the
judge's values on the unlabelled records narrow the interval. The naive (judge only) and human-only
estimates beside them use the CLT interval. The calibration report (:mod:`ragscale.report.calibration`)
reads them; docs/calibration.md says what each assumes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ragscale.errors import UserError


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


def classical(values: np.ndarray, confidence: float) -> dict | None:
    """Mean and CLT interval (ppi-python's ``classical_mean_ci``); None for no values."""
    if len(values) == 0:
        return None
    return _interval(values.mean(), ppi().classical_mean_ci(values, alpha=1 - confidence))


def estimate(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray, confidence: float = 0.95) -> dict:
    """Naive (judge on every record), human-only and PPI++ estimates of the human mean, each
    ``{"mean", "ci"}``; the calibrated one also ``lambda``, the power-tuning weight of the judge
    (0: the judge ignored, 1: plain PPI), None where it does not change the estimate. With every
    record labelled or a constant judge the calibrated estimate is the human-only one."""
    p = ppi()
    y, yhat, yu = (np.asarray(a, dtype=float) for a in (y, yhat, yhat_unlabeled))
    alpha = 1 - confidence
    out = {"naive": classical(np.concatenate([yhat, yu]), confidence), "human_only": classical(y, confidence)}
    judge = np.concatenate([yhat, yu])
    if len(yu) == 0 or np.ptp(judge) == 0:  # every record labelled, or a constant judge: nothing to add
        out["calibrated"] = dict(out["human_only"], **{"lambda": 0.0})
        return out
    point = float(np.ravel(p.ppi_mean_pointestimate(y, yhat, yu))[0])
    cal = _interval(point, p.ppi_mean_ci(y, yhat, yu, alpha=alpha))
    if not all(math.isfinite(v) for v in (cal["mean"], *cal["ci"])):  # a degenerate lambda: the humans alone
        out["calibrated"] = dict(out["human_only"], **{"lambda": 0.0})
        return out
    shift = yu.mean() - yhat.mean()  # the estimate is mean(y) + lambda * shift
    cal["lambda"] = float((point - y.mean()) / shift) if abs(shift) > 1e-12 else None
    out["calibrated"] = cal
    return out


def difference(d: np.ndarray, dhat: np.ndarray, dhat_unlabeled: np.ndarray, confidence: float) -> tuple:
    """(estimate, [low, high], two-sided p for 0) of a mean difference by PPI++ (classical
    when no task is unlabelled or the judged differences are constant)."""
    from scipy.stats import norm

    p = ppi()
    alpha = 1 - confidence
    if len(dhat_unlabeled) == 0 or np.ptp(np.concatenate([dhat, dhat_unlabeled])) == 0:
        est = classical(d, confidence)
        se = d.std() / math.sqrt(len(d))
        pval = 1.0 if se == 0 and est["mean"] == 0 else (0.0 if se == 0 else float(2 * norm.sf(abs(est["mean"]) / se)))
        return est["mean"], est["ci"], pval
    point = float(np.ravel(p.ppi_mean_pointestimate(d, dhat, dhat_unlabeled))[0])
    lo, hi = (float(np.ravel(x)[0]) for x in p.ppi_mean_ci(d, dhat, dhat_unlabeled, alpha=alpha))
    pval = float(np.ravel(p.ppi_mean_pval(d, dhat, dhat_unlabeled, null=0.0))[0])
    if not all(math.isfinite(v) for v in (point, lo, hi, pval)):  # a degenerate lambda: the humans alone
        return difference(d, dhat, np.empty(0), confidence)
    return point, [lo, hi], pval
