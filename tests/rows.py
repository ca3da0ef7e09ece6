"""Pipeline rows for tests of the stages: a worker's row (ragscale.row) and its Arrow table."""

from __future__ import annotations

from typing import Iterable

import pyarrow as pa

from ragscale.pipeline.stage import to_rows, to_table
from ragscale.row import row_schema


def worker_row(**fields) -> dict:
    """A row as a worker sees it: every column of the row schema, stage columns empty."""
    row = {name: None for name in row_schema(()).names if name != "metric_keys"}
    row.update(metrics={}, details={}, judge_errors=[], warnings=[])
    row.update(fields)
    return row


def table(rows: list[dict], metrics: Iterable[str] = ()) -> pa.Table:
    """``rows`` as the Arrow batch a stage receives, its metrics struct holding the rows' metrics
    and ``metrics`` (what the stage under test may write)."""
    names = [*(m for r in rows for m in r["metrics"]), *metrics]
    return to_table([dict(r, metrics=dict(r["metrics"])) for r in rows], row_schema(names), "test")


def rows_of(batch: pa.Table) -> list[dict]:
    """A stage's output batch back as worker rows."""
    return to_rows(batch)
