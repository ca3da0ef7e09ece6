"""Why an agreement statistic is undefined (ragscale.stats.agreement.statistics_for): the reason names
the side that is constant, and neither side when neither is (a statistic's own degenerate case)."""

import numpy as np
import pytest

from ragscale.stats.agreement import _why_undefined, statistics_for


@pytest.mark.parametrize("human,metric,reason", [
    ([2, 2, 2, 2], [1, 2, 1, 2], "the human ratings are constant"),
    ([1, 2, 1, 2], [3, 3, 3, 3], "the metric is constant"),
    ([2, 2, 2, 2], [3, 3, 3, 3], "both sides are constant"),
])
def test_the_reason_names_the_constant_side(human, metric, reason):
    out = statistics_for(human, metric, n_boot=0)
    assert out["spearman"] == {"value": None, "ci": None, "reason": reason}


def test_a_statistic_undefined_with_neither_side_constant_blames_neither():
    assert _why_undefined(np.array([1.0, 2.0, 1.0]), np.array([3.0, 4.0, 4.0])) == "undefined"
