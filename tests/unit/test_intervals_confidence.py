"""Student-t intervals at the confidence asked for, and the catalog bounds of a metric's mean."""

import math

import pytest

from ragscale.stats.intervals import mean_interval, t_interval

T95_DF2 = 2.9199855803537242  # t quantile 0.95 on 2 degrees of freedom (a 90% interval)
T975_DF2 = 4.302652729749462  # t quantile 0.975 on 2 degrees of freedom (a 95% interval)


@pytest.mark.parametrize("confidence, t", [(0.90, T95_DF2), (0.95, T975_DF2)])
def test_t_interval_of_one_two_three_at_the_confidence_asked_for(confidence, t):
    half = t * 1.0 / math.sqrt(3)  # mean 2, sample sd 1
    assert t_interval([1.0, 2.0, 3.0], confidence) == pytest.approx((2 - half, 2 + half), rel=1e-12)


@pytest.mark.parametrize("confidence, t", [(0.90, T95_DF2), (0.95, T975_DF2)])
def test_mean_interval_of_an_unbounded_metric_is_the_t_interval_at_its_confidence(confidence, t):
    assert mean_interval("no_such_metric", 3, 2.0, 1.0, confidence=confidence) == pytest.approx(
        (2 - t / math.sqrt(3), 2 + t / math.sqrt(3)), rel=1e-12)


def test_mean_interval_of_a_unit_metric_is_cut_at_one():
    half = T975_DF2 * 0.3 / math.sqrt(3)
    assert mean_interval("Recall", 3, 0.9, 0.3) == pytest.approx((0.9 - half, 1.0), rel=1e-12)
    assert mean_interval("Recall", 3, 0.1, 0.3) == pytest.approx((0.0, 0.1 + half), rel=1e-12)


def test_mean_interval_is_widened_to_values_observed_outside_the_bounds():
    half = T975_DF2 * 0.3 / math.sqrt(3)
    assert mean_interval("Recall", 3, 0.9, 0.3, observed=(0.5, 1.2)) == pytest.approx((0.9 - half, 1.2), rel=1e-12)


def test_mean_interval_needs_two_values():
    assert mean_interval("Recall", 1, 0.5, 0.0) is None
