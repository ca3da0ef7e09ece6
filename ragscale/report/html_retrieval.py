"""The HTML report's section of retrieval against qrels (rendering): retrieval.json's figures per
model, per collection and weighted by tasks, the tasks without qrels, and UMBRELA's agreement
with the human qrels when it filled their holes. ragscale.report.qrels_sink writes retrieval.json
(before report.html: it finishes first) and its markdown (ragscale.report.qrels_text)."""

from __future__ import annotations

import os
from typing import Any

from ragscale.report.qrels_text import fill_lines
from ragscale.report.runs import read_json


def retrieval_context(run_dir: str) -> dict | None:
    """``{"models": [...]}``: a table per model of the run's retrieval.json, None without one."""
    data = read_json(os.path.join(run_dir, "retrieval.json")) or {}
    models = []
    for model, block in data.items():
        if not _readable(block):
            continue
        entry = {"model": model, "table": _table(block), "without_ids": block.get("without_ids") or 0,
                 "unfilled": "filled" in block and block["filled"] is None, "filled": None}
        if _readable(block.get("filled")):
            entry["filled"] = {"table": _table(block["filled"]), "lines": [x for x in fill_lines(block["filled"]) if x]}
        models.append(entry)
    return {"models": models} if models else None


def _readable(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("collections"), dict) and isinstance(block.get("all"), dict) \
        and isinstance(block.get("measures"), list)


def _table(block: dict) -> dict:
    """The head (figures), a row per collection and the weighted row, and the tasks without qrels."""
    figures = [str(f) for f in block["measures"]]

    def row(name: str, r: dict) -> dict:
        return {"name": name, "count": r.get("count"), "scored": r.get("scored"),
                "cells": [r.get(f) if isinstance(r.get(f), (int, float)) else None for f in figures]}

    colls = {str(c): r for c, r in block["collections"].items() if isinstance(r, dict)}
    return {"figures": figures, "rows": [row(c, r) for c, r in colls.items()],
            "all": row("all (weighted by tasks)", block["all"]),
            "without_qrels": [str(q) for r in colls.values() for q in (r.get("without_qrels") or [])],
            "no_qrels": [c for c, r in colls.items() if r.get("qrels") is False]}
