"""What the report and the console show of the scores (issue 32): intervals of a bounded metric stay
inside its catalog range everywhere they are computed (report leaderboard and distributions, the
SVG chart, ``ragscale plot``, calibration), "Lowest records" never lists a record at the score's
best value and shows each record once with every score it is low on, its question, reference and
passages; the wording follows the catalog; a headline undefined for a model is explained and the
ranking falls back; the console prints the significant pairs after the ranking."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from ragscale.report.calibration import _within
from ragscale.report.html import HtmlSink
from ragscale.report.html_svg import dist_chart
from ragscale.report.headline import headline
from ragscale.report.leaderboard import fallback_lines, format_markdown, model_lines
from ragscale.report.plots import box_stats, mean_ci
from ragscale.report.significance import significant_lines
from ragscale.stats.intervals import mean_interval
from ragscale.report.summary import finalize
from ragscale.report.wording import own_values
from ragscale.driver import _print_end

N3 = [0.0, 0.0, 1.0]  # mean 0.3333; the t-interval is [-1.1009, 1.7676]


# ---------------------------------------------------------------- bounded intervals


def sd(values: list[float]) -> float:
    m = sum(values) / len(values)
    return (sum((v - m) ** 2 for v in values) / (len(values) - 1)) ** 0.5


def test_the_interval_of_a_0_1_mean_of_three_records_stays_in_0_1():
    raw = mean_ci(3, 1 / 3, sd(N3))
    assert raw == pytest.approx((-1.1009, 1.7676), abs=1e-4)  # what the report showed before
    assert mean_interval("RL_F", 3, 1 / 3, sd(N3), (0.0, 1.0)) == (0.0, 1.0)
    assert mean_interval("umbrela_mean", 3, 1.0, sd([0.0, 0.0, 3.0]), (0.0, 3.0))[0] == 0.0  # grades 0..3
    assert mean_interval("BertscoreP", 3, 1 / 3, sd(N3)) == raw  # unbounded (rescaled BERTScore): as is
    assert box_stats("m", N3, "RL_F").ci == (0.0, 1.0)  # ragscale plot
    # a value outside the stated range (a hand-made input) widens the clip instead of hiding it
    assert mean_interval("hhem", 3, -1 / 3, sd([-1.0, 0.0, 0.0]), (-1.0, 0.0))[0] == -1.0


def test_the_calibrations_intervals_stay_in_range():
    row = {"naive": {"mean": 0.9, "ci": [0.7, 1.1]}, "human_only": {"mean": 0.1, "ci": [-0.2, 0.4]},
           "calibrated": None}
    assert _within(row, "RL_F") == {"naive": {"mean": 0.9, "ci": [0.7, 1.0]},
                                    "human_only": {"mean": 0.1, "ci": [0.0, 0.4]}, "calibrated": None}


def n3_report(tmp_path) -> str:
    sink = HtmlSink(str(tmp_path), ["RL_F"])
    for i, v in enumerate(N3):
        sink.add({"task_id": f"t{i}", "model_id": "m1", "metrics": {"RL_F": [v]}, "error": None,
                  "ragscale": {"record_key": f"m1:{i}"}})
    return open(sink.finish(None, None, str(tmp_path / "r.html"))).read()


def test_no_interval_of_the_report_leaves_the_range(tmp_path):
    html = n3_report(tmp_path)
    intervals = [tuple(map(float, m)) for m in re.findall(r"\[(-?\d+\.\d+), (-?\d+\.\d+)\]", html)]
    assert intervals and all(0.0 <= lo <= hi <= 1.0 for lo, hi in intervals), intervals
    assert "0.3333 <span class=\"ci\">[0.0000, 1.0000]</span>" in html  # the leaderboard
    assert "RL_F [95%, unadjusted]" in html  # the interval says it is not adjusted, as the pairs' p are


def test_the_svg_interval_stays_on_the_axis():
    from ragscale.report.html_scan import Dist

    d = Dist(seed=0)
    for v in N3:
        d.add(v)
    row = dist_chart("RL_F", [("m1", "#000", d)])["rows"][0]
    assert row["ci"] == pytest.approx((190.0, 830.0))  # x(0) .. x(1): the whole axis, not past it


# ---------------------------------------------------------------- lowest records


def low_report(tmp_path, recs: list[dict], metrics: list[str], worst_n: int = 5) -> str:
    sink = HtmlSink(str(tmp_path), metrics, worst_n)
    for r in recs:
        sink.add(r)
    return open(sink.finish(None, None, str(tmp_path / "r.html"))).read()


def mtrag(i: int, metrics: dict) -> dict:
    return {"task_id": f"t{i}", "model_id": "m1", "input": [{"speaker": "user", "text": f"When does flight {i} go?"}],
            "targets": [{"text": f"Flight {i} leaves at nine."}],
            "contexts": [{"text": f"Timetable: flight {i} at 09:00."}, {"text": "Gate B"}],
            "predictions": [{"text": f"At noon ({i})."}], "metrics": metrics, "error": None,
            "ragscale": {"record_key": f"m1:{i}", "warnings": [], "judge_errors": [], "details": {}}}


def cards(html: str) -> list[str]:
    return re.findall(r'<div class="card" id="low-\d+">(.*?)\n</div>\n', html, re.S)


def test_lowest_records_never_list_a_record_at_the_best_value(tmp_path):
    recs = [mtrag(i, {"RL_F": [1.0], "UnsupportedClaimRate": 0.0}) for i in range(6)]  # all perfect
    recs.append(mtrag(6, {"RL_F": [0.5], "UnsupportedClaimRate": 1.0}))
    html = low_report(tmp_path, recs, ["RL_F", "UnsupportedClaimRate"])
    (card,) = cards(html)  # only the one imperfect record, once, with both of its low scores
    assert "m1:6" in card and "RL_F 0.5000" in card and "UnsupportedClaimRate 1.0000" in card
    assert not any(f"m1:{i}<" in html for i in range(6))


def test_each_low_record_once_with_its_question_reference_and_passages(tmp_path):
    recs = [mtrag(i, {"RL_F": [0.1 * i], "RB_agg": [0.2 * i]}) for i in range(4)]
    html = low_report(tmp_path, recs, ["RL_F", "RB_agg"], worst_n=2)
    found = cards(html)
    assert len(found) == 2  # records 0 and 1 are the 2 lowest of both scores: two cards, not four
    first = found[0]
    assert "RL_F 0.0000" in first and "RB_agg 0.0000" in first
    for text in ("When does flight 0 go?", "Flight 0 leaves at nine.", "Timetable: flight 0 at 09:00.", "Gate B",
                 "<b>[1]</b>", "At noon (0)."):
        assert text in first, text
    assert first.count('class="hl"') == 2  # both low scores highlighted among the metrics


def test_a_lower_is_better_score_lists_its_highest_values(tmp_path):
    recs = [mtrag(i, {"ContradictionRate": v}) for i, v in enumerate([0.0, 1.0, 0.0, 0.5])]
    html = low_report(tmp_path, recs, ["ContradictionRate"], worst_n=5)
    values = re.findall(r'<span class="score"[^>]*>Contradiction\w* ([\d.]+)</span>', html)
    assert values == ["1.0000", "0.5000"]


# ---------------------------------------------------------------- wording follows the catalog


def test_judge_wording_only_for_judge_metrics(tmp_path):
    assert own_values("RL_F") == "judge" and own_values("RB_agg") == "uncalibrated"
    summary = {"metrics": ["RB_agg"], "overall": None, "models": {
        m: {"count": 3, "errors": 0, "metrics": {"RB_agg": v}, "n": {"RB_agg": 3}} for m, v in (("a", 0.6), ("b", 0.3))},
        "significance": {"method": "paired", "confidence": 0.95, "alpha": 0.05, "correction": "holm", "metrics": {
            "RB_agg": [{"a": "a", "b": "b", "n": 3, "diff": 0.3, "ci": [0.1, 0.5], "p": 0.01, "p_adjusted": 0.01,
                        "significant": True, "better": "a"}]}}}
    sink = HtmlSink(str(tmp_path), ["RB_agg"])
    html = open(sink.finish(summary, None, str(tmp_path / "r.html"))).read()
    assert "judge-based" not in html and "paired comparisons of RB_agg" in html


# ---------------------------------------------------------------- an undefined headline


def judged_summary(tmp_path) -> dict:
    """A judged limit=3 run: RL_F undefined on every record (the judge extracted no statements), so
    HMean_idk too; RB_agg_idk has values."""
    metrics = ["RB_agg", "RL_F", "RB_llm", "idk_eval", "RB_agg_idk", "RL_F_idk", "RB_llm_idk", "HMean_idk"]
    recs = []
    for i, (model, v) in enumerate([("m1", 0.8), ("m2", 0.4), ("m1", 0.6), ("m2", 0.2), ("m1", 0.7), ("m2", 0.3)]):
        m = {k: [v] for k in metrics}
        m.update(RL_F=[None], RL_F_idk=[None], HMean_idk=[None])
        recs.append({"task_id": f"t{i // 2}", "model_id": model, "metrics": m, "error": None,
                     "ragscale": {"record_key": f"{model}:{i}", "judge_errors": [
                         {"judge": "ragas_faithfulness", "undefined": True,
                          "reason": "no statements could be extracted from the response"}]}})
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return finalize(str(tmp_path), metrics)


def test_an_undefined_headline_is_explained_and_the_ranking_falls_back(tmp_path):
    summary = judged_summary(tmp_path)
    assert headline(summary) == "RB_agg_idk"
    why = "RL_F undefined on 3/3 records: no statements could be extracted from the response"
    assert fallback_lines(summary) == [f"HMean_idk undefined for m1: {why}", f"HMean_idk undefined for m2: {why}",
                                       "ranked by RB_agg_idk instead: the next headline metric"]
    assert [line.split()[1] for line in model_lines(summary)] == ["m1", "m2"]
    assert all("RB_agg_idk" in line and "(n=3)" in line for line in model_lines(summary))
    assert f"- HMean_idk undefined for m1: {why}" in format_markdown(summary)
    lines: list[str] = []
    info = {"records": {"in": 6, "out": 6, "errored": 0, "missing": 0}, "timings_s": {"total": 1.0},
            "failure": None, "outputs": {}}
    _print_end(SimpleNamespace(print_summary=False), "/r", summary, info, lines.append)
    at = lines.index("[ragscale] 2 model(s), ranked by RB_agg_idk:")
    assert lines[at - 3:at] == [f"[ragscale] HMean_idk undefined for m1: {why}",
                                f"[ragscale] HMean_idk undefined for m2: {why}",
                                "[ragscale] ranked by RB_agg_idk instead: the next headline metric"]
    assert "– (n=0)" not in "\n".join(lines)


def test_the_report_says_why_the_headline_is_undefined(tmp_path):
    summary = judged_summary(tmp_path)
    html = open(HtmlSink(str(tmp_path), summary["metrics"]).finish(summary, None, str(tmp_path / "r.html"))).read()
    assert "ranked by the mean of RB_agg_idk" in html
    assert "<li>HMean_idk undefined for m1: RL_F undefined on 3/3 records: no statements could be extracted" in html


# ---------------------------------------------------------------- significant pairs on the console


SIGNIFICANT = {"metrics": ["RB_agg"], "overall": None,
               "models": {m: {"count": 30, "errors": 0, "metrics": {"RB_agg": v}, "n": {"RB_agg": 30}}
                          for m, v in (("m1", 0.5), ("m2", 0.46), ("m3", 0.45))},
               "significance": {"method": "paired bootstrap", "confidence": 0.95, "alpha": 0.05, "correction": "holm",
                                "metrics": {"RB_agg": [
                                    {"a": "m1", "b": "m2", "n": 30, "mean_a": 0.5, "mean_b": 0.458, "diff": 0.042,
                                     "ci": [0.011, 0.073], "p": 0.0015, "p_adjusted": 0.003, "significant": True,
                                     "better": "m1"},
                                    {"a": "m2", "b": "m3", "n": 30, "mean_a": 0.46, "mean_b": 0.45, "diff": 0.01,
                                     "ci": [-0.02, 0.04], "p": 0.4, "p_adjusted": 0.4, "significant": False,
                                     "better": None}]}}}


def test_the_console_prints_the_significant_pairs_after_the_ranking():
    assert significant_lines(SIGNIFICANT) == [
        "m1 > m2 on RB_agg: difference 0.0420 [0.0110, 0.0730], adjusted p = 0.003 (holm)"]
    lines: list[str] = []
    info = {"records": {"in": 90, "out": 90, "errored": 0, "missing": 0}, "timings_s": {"total": 1.0},
            "failure": None, "outputs": {}}
    _print_end(SimpleNamespace(print_summary=False), "/r", SIGNIFICANT, info, lines.append)
    ranked = max(i for i, line in enumerate(lines) if "(n=30)" in line)
    assert lines[ranked + 2] == "[ragscale]  m1 > m2 on RB_agg: difference 0.0420 [0.0110, 0.0730], adjusted p = 0.003 (holm)"
    assert not any("m3" in line and ">" in line for line in lines)


def test_the_ranking_names_the_headline_as_the_tables_do(tmp_path):
    """Ranked by ROUGE-L: the console's ranking line, leaderboard.md and the report say "RougeL",
    the label of the tables and of the model lines, not the record key RougeL_stemFalse."""
    recs = [{"task_id": f"t{i}", "model_id": m, "metrics": {"RougeL_stemFalse": [v]}, "error": None,
             "ragscale": {"record_key": f"{m}:{i}"}} for i, (m, v) in enumerate([("a", 0.5), ("b", 0.25)])]
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    summary = finalize(str(tmp_path), ["RougeL_stemFalse"])
    lines: list[str] = []
    info = {"records": {"in": 2, "out": 2, "errored": 0, "missing": 0}, "timings_s": {"total": 1.0},
            "failure": None, "outputs": {}}
    _print_end(SimpleNamespace(print_summary=False), "/r", summary, info, lines.append)
    assert "[ragscale] 2 model(s), ranked by RougeL:" in lines, lines
    assert "ranked by mean **RougeL** (higher is better)" in format_markdown(summary)
    html = open(HtmlSink(str(tmp_path), summary["metrics"]).finish(summary, None, str(tmp_path / "r.html"))).read()
    assert "ranked by the mean of RougeL (higher is better)" in html
    assert "RougeL_stemFalse" not in "\n".join(lines)


def test_the_console_lines_of_pairs_without_a_p_and_past_the_limit():
    import copy

    s = copy.deepcopy(SIGNIFICANT)
    s["significance"]["metrics"]["RB_agg"].append(
        {"a": "m1", "b": "m3", "n": 30, "mean_a": 0.5, "mean_b": 0.45, "diff": 0.05, "ci": [0.02, 0.08], "p": None,
         "p_adjusted": None, "significant": True, "better": "m1"})
    first = "m1 > m2 on RB_agg: difference 0.0420 [0.0110, 0.0730], adjusted p = 0.003 (holm)"
    assert significant_lines(s) == [first, "m1 > m3 on RB_agg: difference 0.0500 [0.0200, 0.0800]"]
    assert significant_lines(s, limit=1) == [first, "... and 1 more significant difference(s) in leaderboard.md"]
    assert len(significant_lines(s, limit=2)) == 2
    s["significance"]["correction"] = None
    assert significant_lines(s)[0] == "m1 > m2 on RB_agg: difference 0.0420 [0.0110, 0.0730], adjusted p = 0.003"


@pytest.mark.parametrize("block, why", [
    # the judge's own reasons, one alone
    ({"judge_undefined_reasons": {"ragas_faithfulness": {"no statements": 3}}}, "RL_F undefined on 3/3 records: "
     "no statements"),
    # several: most frequent first, parse failures and engine errors among them
    ({"judge_undefined_reasons": {"ragas_faithfulness": {"no statements": 1}},
      "judge_parse_failures": {"ragas_faithfulness": 2}},
     "RL_F undefined on 3/3 records: the judge's output could not be parsed (2), no statements (1)"),
    ({"judge_engine_errors": {"ragas_faithfulness": 3}}, "RL_F undefined on 3/3 records: the judge engine failed"),
    ({"judge_parse_failures": {"radbench": 3}}, "RL_F undefined on 3/3 records"),  # another judge's: not RL_F's
    ({}, "RL_F undefined on 3/3 records"),
])
def test_why_a_headline_metric_has_no_value(block, why):
    """Down the requirement tree to the metric whose inputs have values (HMean_idk -> RL_F_idk -> RL_F),
    with the reasons its judge gave; errored records are not counted as scored."""
    from ragscale.report.headline import undefined_reason

    d = {"count": 4, "errors": 1, "n": {"HMean_idk": 0, "RL_F_idk": 0, "RL_F": 0, "RB_llm_idk": 3, "RB_agg_idk": 3,
                                        "RB_llm": 3, "idk_eval": 3}, **block}
    assert undefined_reason(d, "HMean_idk") == why
    both = undefined_reason({**d, "n": {**d["n"], "RB_llm_idk": 0, "RB_llm": 0}}, "HMean_idk")
    assert both.startswith("RL_F undefined on 3/3 records") and "; RB_llm undefined on 3/3 records" in both
