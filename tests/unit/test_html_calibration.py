"""The HTML report of a calibrated run (summary.json's ``calibration`` block, hand-written here):
the leaderboard ranks by the calibrated mean and shows it beside the judge's and the human-only
mean with their intervals and the number of labels; a model with too few labels shows the message
instead of a number; "significantly better than" comes from the calibrated comparisons (a pair
they could not test keeps the judge's result, marked); the calibration table and the calibrated
differences follow; a malformed block renders as far as it reads."""

from __future__ import annotations

import copy

import pytest

from ragscale.report import html as report
from test_html_report import EVIL, Tables

MODELS = ("acme-7b", "zeta-3b", "tiny-7b", EVIL)
TOO_FEW = "7 human labels; at least 20 are needed (calibration.min_labels)"


def _est(mean: float, lo: float, hi: float, **extra) -> dict:
    return {"mean": mean, "ci": [lo, hi], **extra}


def _cmp(a: str, b: str, p: float | None, significant: bool, better: str | None, **extra) -> dict:
    return {"a": a, "b": b, "n": 30, "mean_a": 0.6, "mean_b": 0.5, "diff": 0.1, "ci": [0.02, 0.18], "p": p,
            "p_adjusted": p, "significant": significant, "better": better, **extra}


CALIBRATION = {
    "method": "PPI++ (power-tuned prediction-powered inference, ppi-python)", "confidence": 0.95,
    "human": "/abs/path/labels.csv", "min_labels": 20, "ranked_by": "RL_F", "alpha": 0.05, "correction": "holm",
    "metrics": {"RL_F": {"human": "faithfulness", "mapping": "1..4 -> 0..1 (linear)", "models": {
        "acme-7b": {"n_labeled": 40, "n_records": 440, "naive": _est(0.71, 0.69, 0.73),
                    "human_only": _est(0.66, 0.60, 0.72), "calibrated": _est(0.65, 0.62, 0.69, **{"lambda": 0.83}),
                    "message": None},
        "tiny-7b": {"n_labeled": 7, "n_records": 300, "naive": _est(0.5, 0.45, 0.55), "human_only": None,
                    "calibrated": None, "message": TOO_FEW},
        "zeta-3b": {"n_labeled": 30, "n_records": 30, "naive": _est(0.75, 0.70, 0.80),
                    "human_only": _est(0.60, 0.55, 0.65), "calibrated": _est(0.60, 0.55, 0.65, **{"lambda": 1.0}),
                    "message": "every judged record is labelled: the calibrated estimate is the human mean"},
        EVIL: {"n_labeled": 25, "n_records": 50, "naive": _est(0.4, 0.3, 0.5), "human_only": _est(0.3, 0.2, 0.4),
               "calibrated": _est(0.3, 0.25, 0.35, **{"lambda": 0.5}), "message": None}}}},
    "comparisons": {"RL_F": [
        _cmp("acme-7b", "zeta-3b", 0.01, True, "acme-7b", method="PPI++ paired difference"),
        _cmp("acme-7b", "tiny-7b", None, False, None, note="3 task(s) labelled for both; at least 20 needed: "
                                                           "the judge-based comparison stands"),
        _cmp("zeta-3b", "tiny-7b", None, False, None, note="too few"),
        _cmp("zeta-3b", EVIL, 0.02, True, "zeta-3b")]},
}
# the judge's comparisons: zeta-3b > acme-7b (overruled by the calibrated one), acme-7b > tiny-7b (stands)
SIGNIFICANCE = {"method": "Paired bootstrap over tasks.", "confidence": 0.95, "alpha": 0.05, "correction": "holm",
                "metrics": {"RL_F": [_cmp("zeta-3b", "acme-7b", 0.001, True, "zeta-3b"),
                                     _cmp("acme-7b", "tiny-7b", 0.001, True, "acme-7b"),
                                     _cmp("zeta-3b", "tiny-7b", 0.3, False, None)]}}


def summary(calibration: dict | None = CALIBRATION, significance: dict | None = SIGNIFICANCE) -> dict:
    naive = {"acme-7b": 0.71, "zeta-3b": 0.75, "tiny-7b": 0.5, EVIL: 0.4}
    out = {"reduction": "test", "metrics": ["RL_F"], "overall": None,
           "models": {m: {"count": 10, "errors": 0, "metrics": {"RL_F": naive[m]}, "n": {"RL_F": 10}} for m in MODELS}}
    if calibration is not None:
        out["calibration"] = copy.deepcopy(calibration)
    if significance is not None:
        out["significance"] = copy.deepcopy(significance)
    return out


def render(tmp_path, s: dict) -> str:
    sink = report.HtmlSink(str(tmp_path), ["RL_F"])
    for model in MODELS:
        for i in range(10):
            sink.add({"model_id": model, "metrics": {"RL_F": 0.1 * i}, "error": None,
                      "ragscale": {"record_key": f"{model}-{i}"}})
    return open(sink.finish(s, None, str(tmp_path / "report.html")), encoding="utf-8").read()


def test_leaderboard_ranks_by_the_calibrated_mean(tmp_path):
    text = render(tmp_path, summary())
    assert "ranked by the calibrated mean of RL_F (higher is better)" in text
    assert "human labels (faithfulness, labels mapped 1..4 -&gt; 0..1 (linear))" in text
    (board,) = Tables(text).under("summary")
    assert board[0] == ["#", "model", "records", "errors", "RL_F calibrated [95%]", "judge [95%]",
                        "human only [95%]", "human labels", "significantly better than (calibrated)"]
    rows = {r[1]: r for r in board[1:]}
    assert [r[1] for r in board[1:]] == ["acme-7b", "zeta-3b", EVIL, "tiny-7b"]  # the judge ranks zeta-3b first
    assert rows["acme-7b"] == ["1", "acme-7b", "10", "0", "0.6500 [0.6200, 0.6900]", "0.7100 [0.6900, 0.7300]",
                               "0.6600 [0.6000, 0.7200]", "40", "zeta-3b, tiny-7b (judge)"]
    # a number and its note; no number and the message (unranked); the calibrated test overrules the judge's
    assert rows["zeta-3b"][4] == "0.6000 [0.5500, 0.6500] every judged record is labelled: the calibrated " \
                                 "estimate is the human mean"
    assert rows["zeta-3b"][8] == EVIL
    assert rows["tiny-7b"] == ["–", "tiny-7b", "10", "0", TOO_FEW, "0.5000 [0.4500, 0.5500]", "–", "7", "—"]
    assert f'<td class="name">{EVIL}</td>' not in text and "&lt;script&gt;alert(&#39;model&#39;)" in text


def test_calibration_table_and_calibrated_differences(tmp_path):
    text = render(tmp_path, summary())
    page = Tables(text)
    (table,) = page.under("calibration")
    assert table[0] == ["model", "labels", "records", "judge (naive)", "human only", "calibrated (PPI++)", "λ",
                        "note"]
    assert table[1] == ["acme-7b", "40", "440", "0.7100 [0.6900, 0.7300]", "0.6600 [0.6000, 0.7200]",
                        "0.6500 [0.6200, 0.6900]", "0.83", ""]
    assert table[2] == ["tiny-7b", "7", "300", "0.5000 [0.4500, 0.5500]", "–", "–", "–", TOO_FEW]
    assert "PPI++ (power-tuned prediction-powered inference, ppi-python); 95% intervals; at least 20 labels" in text
    (judged,) = page.under("significance")
    (calibrated,) = page.under("significance-calibrated")
    assert judged[1][1] == "zeta-3b > acme-7b" and calibrated[1][1] == "acme-7b > zeta-3b"
    assert "not distinguishable on these 30 tasks (3 task(s) labelled for both" in calibrated[2][0]
    ids = [text.index(f'id="{i}"') for i in ("summary", "means", "significance", "significance-calibrated",
                                             "calibration", "distributions")]
    assert ids == sorted(ids) and '<a href="#calibration">' in text


def test_judge_significance_when_the_calibration_compares_nothing(tmp_path):
    (board,) = Tables(render(tmp_path, summary({k: v for k, v in CALIBRATION.items() if k != "comparisons"}))) \
        .under("summary")
    assert board[0][-1] == "significantly better than"
    assert {r[1]: r[-1] for r in board[1:]} == {"acme-7b": "tiny-7b", "zeta-3b": "acme-7b", EVIL: "—", "tiny-7b": "—"}
    (board,) = Tables(render(tmp_path, summary(significance=None))).under("summary")
    assert board[1][-1] == "zeta-3b"  # calibrated comparisons only: the untested pairs have no result


@pytest.mark.parametrize("block", [
    {"ranked_by": "RL_F"},
    {"ranked_by": "RL_F", "metrics": "x", "comparisons": []},
    {"ranked_by": "RL_F", "confidence": "high", "metrics": {"RL_F": {"models": {
        "acme-7b": {"n_labeled": True, "naive": {"mean": 0.5, "ci": "bad"}, "calibrated": {"mean": "x"}},
        "zeta-3b": None, "tiny-7b": {"calibrated": {"mean": 0.4, "ci": [0.3]}, "message": 3}}}},
     "comparisons": {"RL_F": ["x", {"a": "acme-7b"}, None]}},
    {"ranked_by": None, "metrics": {"RL_F": []}, "comparisons": {"RL_F": "x"}},
])
def test_a_malformed_calibration_block_renders(tmp_path, block):
    text = render(tmp_path, summary(block))
    (board,) = Tables(text).under("summary")
    assert sorted(r[1] for r in board[1:]) == sorted(MODELS)
