"""Read a run's derived outputs back and check them against records.jsonl and summary.json:
summary.csv, records.parquet (metric struct, error and warning columns) and report.html's
summary table. Used by the integration tests on real runs."""

from __future__ import annotations

import csv
import json
import math
import os
from html.parser import HTMLParser

import pytest

from ragscale.report.text import metric_value as _fmt  # the catalog's decimals, as the report shows means


def _close(got: float | None, want: float | None, rel: float) -> bool:
    if got is None or want is None:
        return got is None and want is None
    return math.isclose(got, want, rel_tol=rel, abs_tol=1e-12)


def check_summary_csv(out_dir) -> int:
    """Every row of summary.csv equals summary.json's block for its model and answerability class
    (6 significant digits); every model and class of summary.json has its row. Returns the rows."""
    summary = json.load(open(os.path.join(str(out_dir), "summary.json")))
    metrics = summary["metrics"]
    rows = list(csv.DictReader(open(os.path.join(str(out_dir), "summary.csv"), newline="")))
    assert list(rows[0]) == ["model_id", "answerability", "count", "errors", *metrics, "answerability_accuracy"]
    seen = set()
    for row in rows:
        model, cls = row["model_id"], row["answerability"]
        block = summary["models"][model]
        d = block if cls == "ALL" else block["by_answerability"][cls]
        assert int(row["count"]) == d["count"] and int(row["errors"]) == d["errors"], (model, cls)
        for m in metrics:
            got = float(row[m]) if row[m] != "" else None
            assert _close(got, d["metrics"][m], 1e-5), (model, cls, m, row[m], d["metrics"][m])
        acc = float(row["answerability_accuracy"]) if row["answerability_accuracy"] else None
        assert _close(acc, d["answerability_accuracy"], 1e-5)
        seen.add((model, cls))
    want = {(m, c) for m, b in summary["models"].items() for c in ["ALL", *b["by_answerability"]]}
    assert seen == want
    return len(rows)


def check_records_parquet(out_dir) -> list[dict]:
    """records.parquet holds every record of records.jsonl once, with the same metrics (in its
    typed struct), error stage and message, warnings and the full record as JSON."""
    pq = pytest.importorskip("pyarrow.parquet")
    summary = json.load(open(os.path.join(str(out_dir), "summary.json")))
    with open(os.path.join(str(out_dir), "records.jsonl")) as fh:
        recs = {r["ragscale"]["record_key"]: r for r in map(json.loads, fh)}
    table = pq.read_table(os.path.join(str(out_dir), "records.parquet"))
    assert table.schema.field("metrics").type.num_fields == len(summary["metrics"])
    rows = table.to_pylist()
    assert sorted(r["record_key"] for r in rows) == sorted(recs)  # each record exactly once
    for row in rows:
        rec = recs[row["record_key"]]
        assert json.loads(row["record_json"]) == rec
        assert row["model_id"] == rec.get("model_id")
        err = rec.get("error") or {}
        assert (row["error_stage"], row["error_message"]) == (err.get("stage"), err.get("message"))
        assert row["warnings"] == (rec["ragscale"].get("warnings") or [])
        got, want = row["metrics"], rec.get("metrics") or {}
        assert list(got) == summary["metrics"]
        for m in summary["metrics"]:
            assert got[m] == want.get(m), (row["record_key"], m, got[m], want.get(m))
    return rows


class _Tables(HTMLParser):
    """The tables of an HTML page as lists of rows of cell texts, each with the id of the
    nearest heading before it."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str | None, list[list[str]]]] = []
        self._heading: str | None = None
        self._cell: list[str] | None = None
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("h2", "h3") and a.get("id"):
            self._heading = a["id"]
        elif tag == "table":
            self.tables.append((self._heading, []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "span" and self._cell is not None:
            self._skip += 1  # a cell's note (e.g. "(n=12)") is not its value

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "span" and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if self._cell is not None and not self._skip:
            self._cell.append(data)


def check_report_summary(out_dir) -> list[str]:
    """report.html shows summary.json's numbers: the leaderboard (heading id "summary") lists every
    model with its records and errors, and the tables of means (heading id "means", metrics grouped
    by family under a header row of families) every model's and all models' mean of each metric in
    the catalog's decimals (rates in %). Returns the metric columns compared."""
    summary = json.load(open(os.path.join(str(out_dir), "summary.json")))
    page = _Tables()
    page.feed(open(os.path.join(str(out_dir), "report.html"), encoding="utf-8").read())
    (head, *rows), = [rows for heading, rows in page.tables if heading == "summary"][:1]
    assert head[:4] == ["#", "model", "records", "errors"]
    assert sorted(r[1] for r in rows) == sorted(summary["models"])
    for row in rows:
        d = summary["models"][row[1]]
        assert row[2:4] == [str(d["count"]), str(d["errors"])], row[:4]
    blocks = dict(summary["models"])
    if len(blocks) > 1 and summary.get("overall"):
        blocks["ALL models"] = summary["overall"]
    names: list[str] = []
    compared = 0
    for table in [rows for heading, rows in page.tables if heading == "means"]:
        at = next(i for i, r in enumerate(table) if r[:1] == ["model"])  # after the row of families
        head, rows = table[at], table[at + 1:]
        assert sorted(r[0] for r in rows) == sorted(blocks)
        for row in rows:
            d = blocks[row[0]]
            for name, text in zip(head[1:], row[1:]):
                if name == "answerability accuracy":
                    want = _fmt(name, d["answerability_accuracy"])
                elif name.startswith("% "):
                    v = d["metrics"][name[2:]]
                    want = "—" if v is None else f"{100 * v:.1f}%"
                else:
                    want = _fmt(name, d["metrics"][name])
                assert text == want, (row[0], name, text, want)
                compared += 1
        names += [h[2:] if h.startswith("% ") else h for h in head[1:]]
    assert compared == len(blocks) * len(names) > 0 and len(set(names)) == len(names)
    return names
