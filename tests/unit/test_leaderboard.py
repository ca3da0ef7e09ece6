"""The per-model leaderboard: turn buckets in the summary pass, ranking, markdown and CSV layout."""

import csv
import json
import os

import pytest

from ragscale.report import headline as hd
from ragscale.report import leaderboard as lb
from ragscale.report import ranking as rk
from ragscale.report.summary import finalize, turn_bucket

MTRAG = ["Recall", "RB_agg", "RB_agg_zero_denominator", "idk_eval", "RL_F", "RB_llm", "RB_agg_idk", "RB_llm_idk",
         "RL_F_idk", "HMean", "HMean_idk", "Length"]


def rec(model, turn, ans, **metrics):
    r = {"task_id": f"c::{turn}", "model_id": model, "metrics": {k: [v] for k, v in metrics.items()},
         "error": None, "ragscale": {"record_key": f"{model}:{turn}:{ans}", "warnings": [], "judge_errors": []},
         "predictions": [{"text": "an answer"}]}
    if turn is not None:
        r["turn"] = turn
    if ans is not None:
        r["answerability"] = [ans]
    return r


def run_dir(tmp_path, records, metrics=MTRAG):
    with open(tmp_path / "records.jsonl", "w") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    summary = finalize(str(tmp_path), metrics)
    return summary, lb.write_leaderboard(summary, str(tmp_path))


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("turn, bucket", [(1, "1"), ("1", "1"), (2, ">1"), ("7", ">1"), (3.0, ">1"), (0, None),
                                          (None, None), ("x", None), (True, None), (-1, None)])
def test_turn_bucket(turn, bucket):
    assert turn_bucket({"turn": turn}) == bucket


def test_turn_breakdown_in_summary_and_cells_with_counts(tmp_path):
    records = [
        rec("alpha", 1, "ANSWERABLE", HMean_idk=0.9, HMean=0.5, idk_eval=0.0),
        rec("alpha", "2", "ANSWERABLE", HMean_idk=0.5, HMean=0.5, idk_eval=0.0),
        rec("alpha", 3, "UNANSWERABLE", HMean_idk=0.1, HMean=0.5, idk_eval=0.0),
        rec("alpha", None, "PARTIAL", HMean_idk=0.3, HMean=0.5, idk_eval=1.0),  # no turn: in no turn cell
        rec("beta", 1, "ANSWERABLE", HMean_idk=0.2, HMean=0.1, idk_eval=0.0),
        rec("beta", 2, "UNANSWERABLE", HMean_idk=1.0, HMean=0.1, idk_eval=1.0),
    ]
    summary, paths = run_dir(tmp_path, records)
    a = summary["models"]["alpha"]
    assert set(a["by_turn"]) == {"1", ">1"}
    assert a["by_turn"]["1"]["count"] == 1 and a["by_turn"]["1"]["metrics"]["HMean_idk"] == pytest.approx(0.9)
    assert a["by_turn"][">1"]["count"] == 2 and a["by_turn"][">1"]["metrics"]["HMean_idk"] == pytest.approx(0.3)
    assert summary["overall"]["by_turn"][">1"]["count"] == 3

    md = open(paths["markdown"]).read()
    # ranked by HMean_idk (beta 0.6 > alpha 0.45), not by HMean (alpha 0.5 > beta 0.1)
    lines = [ln for ln in md.splitlines() if ln.startswith("| ")]
    header = lines[0]
    assert header.startswith("| # | model | n | errors | HMean_idk |")
    assert lines[1].startswith("| 1 | beta | 2 | 0 | 0.6000 |")
    assert lines[2].startswith("| 2 | alpha | 4 | 0 | 0.4500 |")
    assert "ranked by mean **HMean_idk**" in md
    table = md.split("### HMean_idk")[1].split("###")[0]
    assert "| # | model | All | ANSWERABLE | PARTIAL | UNANSWERABLE | Turn 1 | Turn >1 |" in table
    assert "| 2 | alpha | 0.4500 (4) | 0.7000 (2) | 0.3000 (1) | 0.1000 (1) | 0.9000 (1) | 0.3000 (2) |" in table
    assert "| 1 | beta | 0.6000 (2) | 0.2000 (1) | – (0) | 1.0000 (1) | 0.2000 (1) | 1.0000 (1) |" in table
    # the H-Mean's components and the answerability accuracy get their own breakdown tables
    assert [ln[4:] for ln in md.splitlines() if ln.startswith("### ")] == ["HMean_idk", "RL_F_idk", "RB_llm_idk",
                                                                          "RB_agg_idk", "AnsAcc"]
    acc = md.split("### AnsAcc")[1]
    assert "| 2 | alpha | 0.5000 (4) | 1.0000 (2) | 0.0000 (1) | 0.0000 (1) | 1.0000 (1) | 0.5000 (2) |" in acc

    rows = read_csv(paths["csv"])
    assert [(r["rank"], r["model_id"], r["breakdown"], r["cell"]) for r in rows if r["model_id"] == "alpha"] == [
        ("2", "alpha", "all", "ALL"), ("2", "alpha", "answerability", "ANSWERABLE"),
        ("2", "alpha", "answerability", "PARTIAL"), ("2", "alpha", "answerability", "UNANSWERABLE"),
        ("2", "alpha", "turn", "1"), ("2", "alpha", "turn", ">1")]
    later = next(r for r in rows if r["model_id"] == "alpha" and r["cell"] == ">1")
    assert later["count"] == "2" and float(later["HMean_idk"]) == pytest.approx(0.3) and later["n_HMean_idk"] == "2"
    assert later["Recall"] == "" and later["n_Recall"] == "0"
    assert "RB_agg_zero_denominator" not in rows[0]
    assert rows[0]["model_id"] == "beta"  # best first


def test_headline_falls_back_to_hmean_then_first_metric():
    def summ(metrics, values):
        return {"metrics": metrics, "models": {m: {"metrics": v} for m, v in values.items()}}

    assert hd.headline(summ(["RB_agg", "HMean"], {})) == "HMean"
    assert hd.headline(summ(["Recall", "RB_agg", "RB_agg_idk", "RL_F"], {})) == "RB_agg_idk"
    assert hd.headline(summ(["Recall", "RB_agg", "RL_F"], {})) == "RB_agg"
    assert hd.headline(summ(["Length", "RB_agg_zero_denominator", "umbrela_scores", "umbrela_mean", "MRR"], {})) \
        == "umbrela_mean"
    assert hd.headline(summ(["Length"], {})) == "Length"
    assert hd.headline(summ([], {})) is None


def test_ranking_ties_missing_values_and_lower_is_better():
    s = {"metrics": ["exact_match"], "models": {
        "a": {"metrics": {"exact_match": 0.5}}, "b": {"metrics": {"exact_match": None}},
        "c": {"metrics": {"exact_match": 0.9}}, "d": {"metrics": {"exact_match": 0.5}}}}
    assert [(r, m) for r, m, _ in rk.ranked(s, "exact_match")] == [(1, "c"), (2, "a"), (2, "d"), (None, "b")]
    s["models"]["a"]["metrics"]["UnsafeContentRate"] = 0.4
    s["models"]["c"]["metrics"]["UnsafeContentRate"] = 0.1
    assert [m for _, m, _ in rk.ranked(s, "UnsafeContentRate")][:2] == ["c", "a"]


def test_no_turn_and_no_answerability_omit_those_columns(tmp_path):
    """A TREC-like run: records have neither a turn nor an answerability class."""
    records = []
    for model, v in (("sys-1", 0.2), ("sys-2", 0.7)):
        for q in range(3):
            r = {"query_id": f"q{q}", "model_id": model, "error": None,
                 "metrics": {"umbrela_scores": [1, 2], "umbrela_mean": v, "citation_f1": v / 2},
                 "ragscale": {"record_key": f"{model}:{q}", "warnings": [], "judge_errors": []}}
            records.append(r)
    summary, paths = run_dir(tmp_path, records, ["umbrela_scores", "umbrela_mean", "citation_f1"])
    assert "by_turn" not in summary["models"]["sys-1"] and "turns" not in summary
    md = open(paths["markdown"]).read()
    assert "ranked by mean **UMBRELA**" in md
    assert "| 1 | sys-2 | 3 | 0 | 0.7000 | 0.3500 |" in md
    assert "## By" not in md and "umbrela_scores" not in md  # nothing to break down; vectors not averaged
    rows = read_csv(paths["csv"])
    assert [(r["model_id"], r["breakdown"], r["cell"]) for r in rows] == [("sys-2", "all", "ALL"),
                                                                          ("sys-1", "all", "ALL")]


def test_turns_without_answerability(tmp_path):
    records = [rec("m", 1, None, Recall=1.0), rec("m", 2, None, Recall=0.0), rec("m", 3, None, Recall=0.5)]
    _, paths = run_dir(tmp_path, records, ["Recall"])
    md = open(paths["markdown"]).read()
    assert "## By turn" in md and "UNKNOWN" not in md
    assert "| 1 | m | 0.5000 (3) | 1.0000 (1) | 0.2500 (2) |" in md


def test_errored_records_count_but_have_no_values(tmp_path):
    bad = rec("m", 2, "ANSWERABLE", Recall=0.3)
    bad["error"] = {"stage": "load", "message": "boom"}
    _, paths = run_dir(tmp_path, [rec("m", 1, "ANSWERABLE", Recall=1.0), bad], ["Recall"])
    rows = {(r["breakdown"], r["cell"]): r for r in read_csv(paths["csv"])}
    assert rows[("turn", ">1")]["count"] == "1" and rows[("turn", ">1")]["errors"] == "1"
    assert rows[("turn", ">1")]["Recall"] == "" and rows[("all", "ALL")]["n_Recall"] == "1"


def test_leaderboard_needs_only_the_summary(tmp_path):
    """Written from finalize's accumulators: records.jsonl is not read again."""
    summary, _ = run_dir(tmp_path, [rec("m", 1, "ANSWERABLE", Recall=1.0)], ["Recall"])
    os.remove(tmp_path / "records.jsonl")
    other = tmp_path / "again"
    other.mkdir()
    paths = lb.write_leaderboard(json.loads(json.dumps(summary)), str(other))  # as read back from summary.json
    assert os.path.getsize(paths["markdown"]) > 0 and len(read_csv(paths["csv"])) == 3
