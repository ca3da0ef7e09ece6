"""Metric math: pure Python/numpy, no Ray or torch import (see tests/unit/test_imports.py).

The package is also callable: ``ragscale.metrics()`` returns the metric catalog as a pandas
DataFrame (ragscale.catalog.metrics_table), so that the catalog is one call away in a notebook
while ``ragscale.metrics.<family>`` stays the home of the metric code.
"""

import sys
import types
from typing import Any


class _CatalogModule(types.ModuleType):
    def __call__(self, family: str | None = None) -> Any:
        """The metric catalog as a DataFrame: name, aliases, family, stage, judge, needs, direction, range, reference."""
        from ragscale.catalog import metrics_table

        return metrics_table(family)


sys.modules[__name__].__class__ = _CatalogModule
