"""ragscale.stats.ppi's rules on small inputs: the power-tuning weight clipped to [0, 1], the
cluster-robust variance by hand (and when there are too few clusters for one), a paired
difference's interval and p at the confidence asked for, and the humans-only test it falls back to."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from ragscale.stats import ppi

pytestmark = pytest.mark.usefixtures("needs_ppi")

Y = np.array([0.9, 0.2, 0.7, 0.4, 0.8, 0.1, 0.6, 0.3])
YU = np.array([0.5, 0.9, 0.1, 0.3, 0.7, 0.2, 0.8, 0.6, 0.4, 0.9])


@pytest.mark.parametrize("yhat, yu, want", [
    (1 - Y, 1 - YU, 0.0),  # a judge that disagrees with the humans is not used
    (Y / 10, YU / 10, 1.0),  # a judge on a compressed scale: cov / var far above 1
])
def test_power_lambda_is_clipped_to_zero_and_one(yhat, yu, want):
    assert ppi.power_lambda(Y, yhat, yu) == want
    assert ppi.estimate(Y, yhat, yu)["calibrated"]["lambda"] == pytest.approx(want, abs=1e-12)


def test_power_lambda_between_the_clips_by_hand():
    y, yhat, yu = np.array([1.0, 0.0]), np.array([1.0, 0.0]), np.array([1.0, 0.0])
    # cov_n = 0.25; var of [1, 0, 1, 0] (ddof=1) = 1/3; (1 + n/N) = 2: 0.25 / (2/3)
    assert ppi.power_lambda(y, yhat, yu) == pytest.approx(0.375, rel=1e-12)


def test_cluster_variance_with_two_clusters_on_each_side_by_hand():
    # lambda 0.5: r = y - yhat/2 = [0.5, 1, 0, 0], e_L = [0.1875, -0.1875]; v = yu/2 = [0.5, 0], e_U = [0.125, -0.125]
    # in the same 2 clusters: 2 * 2 * 0.1875**2 + 2 * 2 * 0.125**2 + 2 * 2 * 2 * 0.1875 * 0.125 = 25/64
    var = ppi.ppi_cluster_variance(np.array([1.0, 1.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0, 0.0]),
                                   np.array([1.0, 0.0]), 0.5, np.array([0, 0, 1, 1]), np.array([0, 1]))
    assert var == pytest.approx(25 / 64, rel=1e-12)


@pytest.mark.parametrize("cl, cu", [
    ([0, 0, 0, 0], [0, 1, 2]),  # the labelled records in one cluster
    ([0, 0, 1, 1], [2, 2, 2]),  # the unlabelled records in one cluster
])
def test_cluster_variance_needs_two_clusters_on_each_side(cl, cu):
    y, yhat, yu = np.array([1.0, 1.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.5])
    assert ppi.ppi_cluster_variance(y, yhat, yu, 0.5, np.array(cl), np.array(cu)) is None


def _pairs(seed, n=12, big=30):
    rng = np.random.default_rng(seed)
    d = rng.normal(0.1, 0.3, n + big)
    dhat = 0.8 * d + rng.normal(0, 0.1, n + big)
    return d[:n], dhat[:n], dhat[n:]


@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_a_difference_without_clusters_is_ppi_pythons_at_the_confidence_asked_for(confidence):
    import ppi_py

    d, dhat, du = _pairs(7)
    mean, ci, p = ppi.difference(d, dhat, du, confidence)
    lo, hi = (float(np.ravel(v)[0]) for v in ppi_py.ppi_mean_ci(d, dhat, du, alpha=1 - confidence))
    assert ci == [lo, hi] and lo < mean < hi
    assert p == float(np.ravel(ppi_py.ppi_mean_pval(d, dhat, du, null=0.0))[0])


def test_a_pass_fail_judge_of_differences_is_used():
    import ppi_py

    d = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    dhat = np.array([1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0])  # judged differences 0 or 1: a spread of exactly 1
    du = np.array([1.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    mean, ci, _ = ppi.difference(d, dhat, du, 0.95)
    assert mean == float(np.ravel(ppi_py.ppi_mean_pointestimate(d, dhat, du))[0]) != pytest.approx(d.mean())
    assert ci == [float(np.ravel(v)[0]) for v in ppi_py.ppi_mean_ci(d, dhat, du, alpha=0.05)]


def test_a_clustered_difference_interval_is_the_normal_one_of_the_cluster_variance():
    d, dhat, du = _pairs(8, n=20, big=40)
    c, cu = np.arange(20) // 2, np.arange(40) // 4 + 5  # pairs of labelled turns; unlabelled fours, some shared
    mean, (lo, hi), p = ppi.difference(d, dhat, du, 0.9, c, cu)
    var = ppi.ppi_cluster_variance(d, dhat, du, ppi.power_lambda(d, dhat, du), c, cu)
    assert var < 0.1
    assert (hi - lo) / 2 == pytest.approx(norm.ppf(0.95) * math.sqrt(var), rel=1e-12)
    assert p == pytest.approx(2 * norm.sf(abs(mean) / math.sqrt(var)), rel=1e-9)


def test_a_constant_judge_with_every_labelled_task_on_its_own_is_the_humans_clt_test():
    """The labelled tasks are each their own cluster (an unlabelled one shares a task's): the
    humans' own mean, ppi-python's CLT interval, and the normal p of mean / (sd / sqrt(n)) (sd with
    ddof 0, as the interval's)."""
    import ppi_py

    d = np.array([0.1, 0.3, 0.2, 0.4])  # mean 0.25, sd sqrt(0.0125): z = 0.25 / (sqrt(0.0125) / 2) = sqrt(20)
    mean, ci, p = ppi.difference(d, np.zeros(4), np.zeros(2), 0.95, np.array([0, 1, 2, 3]), np.array([0, 0]))
    assert mean == pytest.approx(0.25)
    assert ci == [float(v) for v in ppi_py.classical_mean_ci(d, alpha=0.05)]
    assert p == pytest.approx(2 * norm.sf(math.sqrt(20)), rel=1e-9)


@pytest.mark.parametrize("d", [[0.1, 0.3, 0.2, 0.4], [0.3, -0.2, 0.25, -0.1, 0.15], [0.05, -0.1, 0.2, 0.02, 0.08, -0.03]])
def test_the_humans_only_p_agrees_with_their_interval(d):
    d = np.array(d)
    mean, (lo, hi), p = ppi.difference(d, d, np.empty(0), 0.95)
    se = (hi - lo) / 2 / norm.ppf(0.975)
    assert p == pytest.approx(2 * norm.sf(abs(mean) / se), rel=1e-9)
