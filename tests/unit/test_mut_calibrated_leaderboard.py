"""The calibrated leaderboard (ragscale.report.leaderboard with summary.json's ``calibration``
block, docs/calibration.md), output pinned exactly: leaderboard.md, leaderboard.csv's calibrated
columns, the end-of-run lines, the ranking and the calibrated comparisons' section."""

import copy

from ragscale.report import leaderboard as lb
from ragscale.report import ranking as rk

def calibrated_summary():
    """Three models: the judge ranks alpha first, the calibrated means beta; gamma has too few labels."""
    def blk(count, v):
        return {"count": count, "errors": 0, "metrics": {"RB_agg": v}, "n": {"RB_agg": count}}
    models = {"alpha": {"n_labeled": 25, "n_records": 40, "naive": {"mean": 0.8, "ci": [0.75, 0.85]},
                        "human_only": {"mean": 0.3, "ci": [0.1, 0.5]},
                        "calibrated": {"mean": 0.35, "ci": [0.2, 0.5], "lambda": 0.5}, "message": None},
              "beta": {"n_labeled": 30, "n_records": 40, "naive": {"mean": 0.5, "ci": [0.45, 0.55]},
                       "human_only": {"mean": 0.7, "ci": [0.55, 0.85]},
                       "calibrated": {"mean": 0.65, "ci": [0.55, 0.75], "lambda": 0.25}, "message": None},
              "gamma": {"n_labeled": 3, "n_records": 40, "naive": {"mean": 0.6, "ci": [0.55, 0.65]},
                        "human_only": None, "calibrated": None,
                        "message": "3 human labels with a judged value; at least 20 are needed (calibration.min_labels)"}}
    entry = {"a": "beta", "b": "alpha", "n": 22, "mean_a": 0.65, "mean_b": 0.35, "diff": 0.3, "ci": [0.1, 0.5],
             "p": 0.004, "p_adjusted": 0.008, "significant": True, "better": "beta", "method": "PPI++"}
    few = {"a": "beta", "b": "gamma", "n": 3, "mean_a": 0.65, "mean_b": None, "diff": None, "ci": None, "p": None,
           "p_adjusted": None, "significant": False, "better": None,
           "note": "3 task(s) labelled for both; at least 20 needed: the judge-based comparison stands"}
    cal = {"method": "PPI++ (power-tuned prediction-powered inference, ppi-python)", "confidence": 0.9,
           "min_labels": 20, "ranked_by": "RB_agg", "alpha": 0.05, "correction": "holm", "design": "all-pairs",
           "metrics": {"RB_agg": {"human": "quality", "mapping": "1..5:0..1 (linear)", "models": models}},
           "comparisons": {"RB_agg": [entry, few]}}
    return {"metrics": ["RB_agg"], "models": {"alpha": blk(40, 0.8), "beta": blk(40, 0.5), "gamma": blk(40, 0.6)},
            "calibration": cal}



EXPECTED_MD = "# Leaderboard\n\n3 model(s), 120 records, ranked by the **calibrated** mean of **RB_agg** (higher is better): human labels (quality) correct the metric's bias by prediction-powered inference (PPI++), 90% intervals; calibration/calibration.md has every calibrated metric. Other means are uncalibrated, leaving out records without a value.\n\n## Overall\n\n| # | model | n | errors | RB_agg calibrated | RB_agg uncalibrated | labels | RB_agg |\n|---:|---|---:|---:|---:|---:|---:|---:|\n| 1 | beta | 40 | 0 | 0.6500 [0.5500, 0.7500] | 0.5000 [0.4500, 0.5500] | 30 | 0.5000 |\n| 2 | alpha | 40 | 0 | 0.3500 [0.2000, 0.5000] | 0.8000 [0.7500, 0.8500] | 25 | 0.8000 |\n| – | gamma | 40 | 0 | 3 human labels with a judged value; at least 20 are needed (calibration.min_labels) | 0.6000 [0.5500, 0.6500] | 3 | 0.6000 |\n\n## Significance, calibrated\n\n### RB_agg\n\n- **beta > alpha**, difference 0.3000 [0.1000, 0.5000], adjusted p = 0.008\n- beta vs gamma: not distinguishable on these 3 tasks (difference –) — 3 task(s) labelled for both; at least 20 needed: the judge-based comparison stands\n\nMethod: PPI++ on the per-task paired difference. 90% confidence intervals; significance level α = 0.05; p-values adjusted for multiple comparisons (holm); every pair of models compared. The interval is not adjusted for multiple comparisons; `significant` uses the adjusted p. calibration/calibration.json has every number.\n"


def test_markdown_exactly():
    assert lb.format_markdown(calibrated_summary()) == EXPECTED_MD


def test_csv_rows_exactly():
    header, rows = lb.csv_rows(calibrated_summary())
    assert header == ['rank', 'model_id', 'breakdown', 'cell', 'count', 'errors', 'RB_agg', 'answerability_accuracy', 'n_RB_agg', 'answerability_n', 'calibrated_RB_agg', 'calibrated_RB_agg_ci_low', 'calibrated_RB_agg_ci_high', 'calibrated_RB_agg_labels']
    assert rows == [[1, 'beta', 'all', 'ALL', 40, 0, '0.5', '', 40, 0, 0.65, 0.55, 0.75, 30], [2, 'alpha', 'all', 'ALL', 40, 0, '0.8', '', 40, 0, 0.35, 0.2, 0.5, 25], ['', 'gamma', 'all', 'ALL', 40, 0, '0.6', '', 40, 0, '', '', '', 3]]


def test_model_lines_exactly():
    assert lb.model_lines(calibrated_summary()) == ['  1. beta   RB_agg calibrated 0.6500 [0.5500, 0.7500]  (uncalibrated 0.5000 [0.4500, 0.5500], 30 labels)', '  2. alpha  RB_agg calibrated 0.3500 [0.2000, 0.5000]  (uncalibrated 0.8000 [0.7500, 0.8500], 25 labels)', '  -. gamma  RB_agg calibrated 3 human labels with a judged value; at least 20 are needed (calibration.min_labels)  (uncalibrated 0.6000 [0.5500, 0.6500], 3 labels)']


def test_ranking_follows_the_calibrated_means():
    s = calibrated_summary()
    assert rk.ranking(s) == ("RB_agg", True)
    assert [(r, m) for r, m, _ in rk.standings(s)] == [(1, "beta"), (2, "alpha"), (None, "gamma")]
    assert [(r, m) for r, m, _ in rk.ranked(s, "RB_agg")] == [(1, "alpha"), (2, "gamma"), (3, "beta")]
    assert rk.calibrated_mean(s, "RB_agg", "alpha") == 0.35
    assert rk.calibrated_mean(s, "RB_agg", "gamma") is None
    assert rk.calibrated_mean(s, "other", "alpha") is None
    s["calibration"]["metrics"]["RB_agg"]["models"]["alpha"]["calibrated"]["mean"] = True  # not a number
    assert rk.calibrated_mean(s, "RB_agg", "alpha") is None
    assert rk.calibrated_mean({"calibration": None}, "RB_agg", "alpha") is None


def test_uncalibrated_summaries_rank_by_the_headline():
    s = calibrated_summary()
    for block in (None, {}, {"ranked_by": None}, {"ranked_by": ""}, "text"):
        t = copy.deepcopy(s)
        t["calibration"] = block
        assert rk.ranking(t) == ("RB_agg", False)
        assert [m for _, m, _ in rk.standings(t)] == ["alpha", "gamma", "beta"]
        assert lb.calibrated_comparisons(t) == {}
    del s["calibration"]
    assert rk.ranking(s) == ("RB_agg", False) and lb.calibrated_comparisons(s) == {}
    assert "calibrated" not in lb.format_markdown(s) and "calibrated_RB_agg" not in lb.csv_rows(s)[0]


def test_calibrated_comparisons_as_a_significance_block():
    got = lb.calibrated_comparisons(calibrated_summary())
    block = got["significance"]
    assert set(got) == {"significance"}
    assert {k: block[k] for k in ("confidence", "alpha", "correction", "design", "method")} == {
        "confidence": 0.9, "alpha": 0.05, "correction": "holm", "design": "all-pairs",
        "method": "PPI++ on the per-task paired difference"}
    assert [e["b"] for e in block["metrics"]["RB_agg"]] == ["alpha", "gamma"]


def test_models_without_calibration_breakdown_cells_and_both_significance_sections():
    s = calibrated_summary()
    s["models"]["delta"] = {"count": 5, "errors": 0, "metrics": {"RB_agg": 0.1}, "n": {"RB_agg": 5},
                            "by_answerability": {"ANSWERABLE": {"count": 5, "errors": 0, "metrics": {"RB_agg": 0.1},
                                                                "n": {"RB_agg": 5}}}}
    header, rows = lb.csv_rows(s)
    delta = [r for r in rows if r[1] == "delta"]
    assert [r[2:4] for r in delta] == [["all", "ALL"], ["answerability", "ANSWERABLE"]]
    assert delta[0][-4:] == ["", "", "", 0] and delta[1][-4:] == ["", "", "", ""]
    assert "  -. delta  RB_agg calibrated –  (uncalibrated –, 0 labels)" in lb.model_lines(s)
    s["significance"] = {"method": "paired bootstrap", "confidence": 0.95, "alpha": 0.05, "correction": "holm",
                         "design": "all-pairs", "metrics": {"RB_agg": [
                             {"a": "alpha", "b": "beta", "n": 40, "mean_a": 0.8, "mean_b": 0.5, "diff": 0.3,
                              "ci": [0.2, 0.4], "p": 0.001, "p_adjusted": 0.003, "significant": True,
                              "better": "alpha"}]}}
    md = lb.format_markdown(s)
    judged, calibrated = md.index("## Significance\n"), md.index("## Significance, calibrated\n")
    assert judged < calibrated and "significance.csv has every number.\n\n## Significance, calibrated" in md
    assert "**alpha > beta**" in md[judged:calibrated] and "**beta > alpha**" in md[calibrated:]


def test_non_dict_summaries_have_no_calibration():
    assert rk.calibrated_mean(None, "RB_agg", "alpha") is None
    assert lb.calibrated_comparisons(None) == {} and lb.calibrated_comparisons([]) == {}
