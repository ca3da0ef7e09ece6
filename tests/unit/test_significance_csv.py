"""significance.csv's rows (ragscale.report.significance.csv_rows, issue 37): one per metric and
pair, in the block's order, numbers with 6 significant digits and empty where there is none, the
correction, the verdict, the better model and the note."""

from __future__ import annotations

from ragscale.report.significance import CSV_HEADER, csv_rows


def test_rows_exactly():
    block = {"correction": "holm", "metrics": {
        "RB_agg": [{"a": "m1", "b": "m2", "n": 30, "mean_a": 0.123456789, "mean_b": 0.1, "diff": 0.023456789,
                    "ci": [0.0011, 0.04], "p": 0.0012345, "p_adjusted": 0.003, "significant": True, "better": "m1"},
                   {"a": "m1", "b": "m3", "n": 1, "mean_a": 0.5, "mean_b": None, "diff": None, "ci": None,
                    "p": None, "p_adjusted": None, "significant": False, "note": "fewer than 2 paired tasks"}],
        "Length": [{"a": "m2", "b": "m3", "n": 5, "mean_a": 12345678.0, "mean_b": 1e-7, "diff": -2.0,
                    "ci": [-3, -1], "p": 1.0, "p_adjusted": 1.0, "significant": False, "better": None}]}}
    rows = csv_rows(block)
    assert rows == [
        ["RB_agg", "m1", "m2", 30, "0.123457", "0.1", "0.0234568", "0.0011", "0.04", "0.0012345", "0.003", "holm", True,
         "m1", "", "task", 30, ""],
        ["RB_agg", "m1", "m3", 1, "0.5", "", "", "", "", "", "", "holm", False, "", "fewer than 2 paired tasks",
         "task", "", ""],
        ["Length", "m2", "m3", 5, "1.23457e+07", "1e-07", "-2", "-3", "-1", "1", "1", "holm", False, "", "", "task", 5,
         ""],
    ]
    assert all(len(r) == len(CSV_HEADER) for r in rows)
    # resampled by conversation: the unit, the number of conversations and the design effect
    block["unit"] = {"name": "conversation"}
    block["metrics"]["RB_agg"][0].update(units=7, design_effect=2.25)
    assert csv_rows(block)[0][-3:] == ["conversation", 7, "2.25"]
