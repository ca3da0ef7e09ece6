"""Krippendorff's alpha of a (coders × units) array, NaN where a coder gave no value, from the
definitions of Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability" (Annenberg School
for Communication, University of Pennsylvania):

    alpha = 1 - D_o / D_e = 1 - (n - 1) · Σ_ck o_ck δ²_ck / Σ_ck n_c n_k δ²_ck

with o_ck = Σ_u (number of c-k pairs of values in unit u) / (m_u - 1) the coincidence matrix
(ordered pairs of values of different coders), n_c = Σ_k o_ck the values' marginal frequencies and
n = Σ_c n_c. Only pairable units count: a unit with fewer than 2 values is left out, its value
too. The metric δ² of each level:

- ``nominal``: 0 for equal values, else 1;
- ``ordinal``: (Σ_{g=c..k} n_g - (n_c + n_k) / 2)², from the marginal frequencies of the values
  between c and k (so only the order of the values matters);
- ``interval``: (c - k)²;
- ``ratio``: ((c - k) / (c + k))², for values >= 0.

Values are compared exactly (any float: 0/1 flags, 0..3 grades, 0.1..1.0 ratings). The nominal,
ordinal and interval sums are computed in closed form without a values × values matrix: the
ordinal δ is |M_k - M_c| with M_c = Σ_{g<c} n_g + n_c / 2 (the midranks of the values), so the
ordinal alpha is the interval alpha of the midranks, and Σ_{i,j} (x_i - x_j)² = 2 m Σ (x_i - x̄)²
within a unit and over all pairable values. ``ratio`` builds the coincidence matrix (at most
``MAX_MATRIX_VALUES`` distinct values). Alpha is ``None`` where it is undefined: fewer than 2
pairable values, or a single value among them (expected disagreement 0); never 0.
"""

from __future__ import annotations

import numpy as np

LEVELS = ("nominal", "ordinal", "interval", "ratio")
MAX_MATRIX_VALUES = 2000  # the coincidence matrix (ratio level) is values × values


def _pairable(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The values of the pairable units (``data``'s units with at least 2 values), unit by unit;
    the index of each value's unit among them; each pairable unit's number of values m_u."""
    x = np.asarray(data, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"reliability data must be a 2-D (coders × units) array, got shape {x.shape}")
    if np.isinf(x).any():
        raise ValueError("reliability data must be finite or NaN (missing)")
    m_u = (~np.isnan(x)).sum(axis=0)
    keep = m_u >= 2
    by_unit = x[:, keep].T  # units × coders: row-major order groups the values by unit
    present = ~np.isnan(by_unit)
    unit = np.nonzero(present)[0]
    return by_unit[present], unit, m_u[keep]


def coincidences(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of the pairable units (ascending) and the coincidence matrix
    o_ck = Σ_u (c-k pairs in unit u) / (m_u - 1) over them (Krippendorff 2011, section C)."""
    from scipy import sparse

    values, unit, m_u = _pairable(data)
    uniq, codes = np.unique(values, return_inverse=True)
    v = len(uniq)
    if v > MAX_MATRIX_VALUES:
        raise ValueError(f"{v} distinct values: the coincidence matrix is limited to {MAX_MATRIX_VALUES}")
    w = 1.0 / (m_u - 1)
    counts = sparse.csr_matrix((np.ones(len(values)), (unit, codes)), shape=(len(m_u), v))  # n_uc
    o = (counts.multiply(w[:, None]).T @ counts).toarray()  # Σ_u w_u n_uc n_uk
    o[np.diag_indices(v)] -= np.bincount(codes, weights=w[unit], minlength=v)  # a value is no pair with itself
    return uniq, o


def _interval(t: np.ndarray, unit: np.ndarray, m_u: np.ndarray) -> float:
    """1 - (n - 1) Σ_u m_u/(m_u - 1) SS_u / (n SS): the interval alpha (δ² = (c - k)²), with SS_u
    the sum of squared deviations within unit u and SS over all pairable values."""
    n = len(t)
    d = t - t[np.r_[0, np.cumsum(m_u)[:-1]]][unit]  # deviation from the unit's first value: 0 where all agree
    s1 = np.bincount(unit, weights=d, minlength=len(m_u))
    s2 = np.bincount(unit, weights=d * d, minlength=len(m_u))
    within = float(np.sum((s2 - s1 * s1 / m_u) / (m_u - 1) * m_u))
    c = t - t.mean()
    return 1.0 - (n - 1) * within / (n * float(np.dot(c, c)))


def alpha(data: np.ndarray, level: str) -> float | None:
    """Krippendorff's alpha of ``data`` (coders × units, NaN = missing) at ``level`` ("nominal",
    "ordinal", "interval" or "ratio"); ``None`` when undefined (fewer than 2 pairable values, or a
    single distinct value among them). See the module's docstring for the definitions."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    values, unit, m_u = _pairable(data)
    if level == "ratio" and (values < 0).any():
        raise ValueError("the ratio level needs values >= 0")
    if len(values) < 2:
        return None
    uniq, codes = np.unique(values, return_inverse=True)
    v = len(uniq)
    if v < 2:
        return None
    n = len(values)
    n_c = np.bincount(codes, minlength=v).astype(float)
    if level == "interval":
        return _interval(values, unit, m_u)
    if level == "ordinal":
        midrank = np.cumsum(n_c) - n_c / 2
        return _interval(midrank[codes], unit, m_u)
    if level == "nominal":
        keys = unit.astype(np.int64) * v + codes
        cell, n_uc = np.unique(keys, return_counts=True)
        same = np.bincount(cell // v, weights=n_uc.astype(float) ** 2, minlength=len(m_u))  # Σ_c n_uc²
        observed = float(np.sum((m_u.astype(float) ** 2 - same) / (m_u - 1)))  # Σ_{c≠k} o_ck
        expected = float(n) ** 2 - float(np.dot(n_c, n_c))  # Σ_{c≠k} n_c n_k
        return 1.0 - (n - 1) * observed / expected
    uniq, o = coincidences(data)
    total = uniq[:, None] + uniq[None, :]
    delta2 = np.divide((uniq[:, None] - uniq[None, :]) ** 2, total ** 2, out=np.zeros((v, v)), where=total > 0)
    n_c = o.sum(axis=1)
    return 1.0 - (n - 1) * float((o * delta2).sum()) / float(n_c @ delta2 @ n_c)
