"""``ragscale metrics`` (ragscale.commands.metrics over ragscale.catalog, issue 37): the JSON lines
are the catalog's rows, the text table has one line per metric under its header with the cells as
documented (a range ``0..1``, a boolean yes/no, a missing value ``-``), a family narrows it, an
unknown family is one line, exit 2."""

from __future__ import annotations

import json

import pytest

from ragscale import catalog
from ragscale.commands import metrics as command
from ragscale.metrics.registry import catalog as specs


def test_json_lines_are_the_rows(capsys):
    assert command.main(["--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines == json.loads(json.dumps(catalog.rows())) and [r["name"] for r in lines] == list(specs())
    assert set(lines[0]) == set(catalog.COLUMNS)


def test_the_text_table(capsys):
    assert command.main(["--family", "custom"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = catalog.rows("custom")
    assert out[0].split() == ["name", "aliases", "family", "judge", "needs", "higher", "is", "better", "range"]
    assert set(out[1]) == {"-", " "} and len(out[1].split()) == 7
    body = out[2:2 + len(rows)]
    assert [line.split()[0] for line in body] == [r["name"] for r in rows]
    assert out[2 + len(rows)] == "" and out[-1].startswith(f"{len(rows)} metrics. Choose them by name: ragscale run")
    assert all(len(line) <= 7 * 50 for line in out)


def test_cells():
    assert catalog._cell((0.0, 1.0)) == "0..1" and catalog._cell([-1, 2.5]) == "-1..2.5"
    assert catalog._cell(["answer", "contexts"]) == "answer, contexts" and catalog._cell([]) == ""
    assert catalog._cell(None) == "-" and catalog._cell(True) == "yes" and catalog._cell(False) == "no"
    assert catalog._cell("x") == "x" and catalog._cell(3) == "3"
    table = catalog.format_rows([{"name": "n" * 60, "aliases": [], "family": "f", "judge": False, "needs": ["answer"],
                                  "higher_is_better": True, "range": None}]).splitlines()
    assert table[2].startswith("n" * 48 + "  ") and len(table[1].split()[0]) == 48  # a column is at most 48 wide
    assert all(line == line.rstrip() for line in table) and table[2].endswith("  -")  # no trailing blanks


def test_families_and_aliases():
    rows = catalog.rows()
    by = {r["name"]: r for r in rows}
    assert by["RL_F"]["aliases"] and "faithfulness" in by["RL_F"]["aliases"]
    assert all(r["judge"] is (r["stage"] == "judge") for r in rows)
    # "needs" says the answer exactly where the catalog's metric reads it (MetricSpec.reads_answer)
    assert all((r["needs"][:1] == ["answer"]) is specs()[r["name"]].reads_answer for r in rows)
    assert by["umbrela_mean"]["needs"] == list(specs()["umbrela_mean"].needs)
    assert by["RougeL_stemFalse"]["needs"][0] == "answer"
    # aliases in case-insensitive order, as a reader scans them
    assert all(r["aliases"] == sorted(r["aliases"], key=str.casefold) for r in rows)
    assert any(r["aliases"] != sorted(r["aliases"]) for r in rows)  # where that order is not the plain one
    assert {r["family"] for r in catalog.rows("algorithmic")} == {"algorithmic"}
    assert list(catalog.metrics_table("custom").columns) == list(catalog.COLUMNS)


def test_an_unknown_family_is_one_line(capsys):
    assert command.main(["--family", "algoritmic"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ragscale metrics: error: unknown family 'algoritmic'") and "algorithmic" in err
    assert "\n" not in err
    from ragscale.metrics.registry import STEPS

    assert err.endswith(f"; families are {', '.join(STEPS)}")
    with pytest.raises(Exception, match="unknown family"):
        catalog.rows("nope")
