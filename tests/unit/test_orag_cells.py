"""The cells of the open-rag-eval export (ragscale.report.orag_export, issue 37), from ragscale's own
details, computed by hand as open-rag-eval's citation_metric.py and nuggetizer would write them:
per citation the mean of its judged scores in order of first use, per answer part the mean (an
uncited part 0), the totals; the nugget lists in either details layout with the assignment scores;
the precision cell's keys by cut-off; and which records are not exported."""

from __future__ import annotations

import json

from ragscale.report import orag_export as ox

ANSWER = "Paris is the capital [1]. It is big [2][1]. No cite here."


def test_citation_cell_from_the_citation_judges_details():
    details = {"citation": {"parts": [
        {"citations": [{"id": "[1]", "support": "full_support"}]},
        {"citations": [{"id": "[2]", "support": "partial_support"}, {"id": "[1]", "support": "no_support"}]},
        {"citations": []}, "not a part"]}}
    m = {"citation_precision": 0.5, "citation_recall": 0.4, "citation_f1": float("nan")}
    cell = ox._citation_cell(m, details, ANSWER)
    assert json.dumps(cell) == json.dumps({"citation_score_[1]": 0.5, "citation_score_[2]": 0.5, "part_score_1": 1.0,
                                           "part_score_2": 0.25, "part_score_3": 0.0, "weighted_precision": 0.5,
                                           "weighted_recall": 0.4})


def test_citation_cell_from_pairs_and_native_keys():
    pairs = [{"part": 2, "citation": "[2]", "score": 1.0}, {"part": 1, "citation": "[1]", "label": "partial_support"},
             {"part": "1", "citation": "[1]", "score": 1.0}, {"part": 1, "citation": "[3]", "label": "unknown"}, "x"]
    cell = ox._citation_cell({}, {"citation": {"pairs": pairs}}, ANSWER)
    assert json.dumps(cell) == json.dumps({"citation_score_[1]": 0.5, "citation_score_[2]": 1.0, "part_score_1": 0.5,
                                           "part_score_2": 1.0, "part_score_3": 0.0})
    labels = ox._citation_cell({}, {"citation": {"labels": pairs[:2]}}, ANSWER)
    assert labels == cell
    native = {"part_score_1": 0.2, "citation_score_[1]": 0.3, "other": 1}
    assert list(ox._citation_cell({"citation_f1": 0.9}, {"citation": native}, ANSWER)) == [
        "citation_score_[1]", "part_score_1", "f1"]
    assert ox._citation_cell({}, {}, ANSWER) is None
    assert ox._citation_cell({"citation_f1": 1}, {"citation": "not a dict"}, ANSWER) == {"f1": 1}


def test_nugget_cell_in_both_layouts():
    m = {"nuggets_all": 0.5, "nuggets_strict_all": 0.25, "nuggets_vital": 1.0, "nuggets_strict_vital": None,
         "nuggets_weighted": 0.6, "nuggets_strict_weighted": 0.3}
    items = [{"text": "n1", "label": "vital", "assignment": "support"},
             {"nugget": "n2", "importance": "okay", "assignment": "partial_support"},
             {"text": "n3", "label": "okay", "assignment": "not_support"}]
    cell = ox._nugget_cell(m, {"nuggets": {"nuggets": items}})
    assert cell == {"nuggetizer_scores": {"All": 0.5, "All Strict": 0.25, "Vital": 1.0, "Weighted": 0.6,
                                          "Weighted Strict": 0.3},
                    "nuggets": ["n1", "n2", "n3"], "labels": ["vital", "okay", "okay"],
                    "assignments": ["support", "partial_support", "not_support"], "assignment_scores": [1.0, 0.5, 0.0]}
    lists = ox._nugget_cell({}, {"nuggets": {"nuggets": ["a", "b"], "labels": ["vital", "okay"],
                                             "assignments": ["support", "other"], "assignment_scores": [0.9, 0.1]}})
    assert lists == {"nuggetizer_scores": {}, "nuggets": ["a", "b"], "labels": ["vital", "okay"],
                     "assignments": ["support", "other"], "assignment_scores": [0.9, 0.1]}
    bare = ox._nugget_cell({}, {"nuggets": {"nuggets": ["a"], "labels": [None], "assignments": [None]}})
    assert bare == {"nuggetizer_scores": {}, "nuggets": ["a"]}
    unknown = ox._nugget_cell({}, {"nuggets": {"nuggets": ["a"], "assignments": ["maybe"]}})
    assert unknown["assignment_scores"] == [0.0]
    assert ox._nugget_cell({"nuggets_all": 0.5}, {"nuggets": {"failed": "x"}}) == {}
    assert ox._nugget_cell({}, {}) is None and ox._nugget_cell({"nuggets_all": True}, {}) is None
    assert ox._nugget_cell({"nuggets_all": 0.5}, {"nuggets": "x"}) == {"nuggetizer_scores": {"All": 0.5}}


def test_precision_cell_and_numbers():
    m = {"P@10": 0.1, "P@2": 0.5, "AP@2": 0.25, "P@5": None, "AP@x": 1, "MRR": 0.5, "Pre@1": 1}
    cell = ox._precision_cell(m)
    assert json.dumps(cell) == json.dumps({"precision@": {"2": 0.5, "10": 0.1}, "AP@": {"2": 0.25}, "MRR": 0.5})
    assert ox._precision_cell({"MRR": None}) is None
    assert [ox._num(v) for v in (1, 0.5, True, "1", float("inf"), float("-inf"), float("nan"), None)] == [
        1, 0.5, None, None, None, None, None, None]


def test_which_records_are_exported():
    ok = {"answer": "Paris [1]."}
    assert not ox._skipped(ok)
    for skipped in ({"answer": "x", "input_error": "bad"}, {"answer": "x", "error": {"stage": "input", "message": "m"}}):
        assert ox._skipped(skipped), skipped
    # a run with no answer is written (issue 36: open-rag-eval's plots then count it as not answered)
    for kept in ({"answer": "  "}, {"answer": "x", "answer_status": "missing"}, {"answer_status": "NO_ANSWER"}):
        assert not ox._skipped(kept), kept
    assert not ox._skipped({"answer": "x", "error": {"stage": "judge", "message": "m"}})  # exported, without scores
    assert not ox._skipped({"answer": "x", "answer_status": "ok"})


def test_passages_and_order():
    assert ox._passages({"passages": [{"id": 7, "text": "t"}, {"id": "b"}]}) == [("7", "t"), ("b", "")]
    assert ox._passages({"contexts": [{"text": "c1"}, "c2"]}) == [("[1]", "c1"), ("[2]", "c2")]
    assert ox._passages({"passages": ["not dicts"], "contexts": None}) == []
    prov = {"ragscale": {"source_file": "a.jsonl", "source_line": 4}}
    assert ox._order(prov, 9) == ("a.jsonl", 4, 9)
    assert ox._order({"csv_lines": [12, 13], **prov}, 9) == ("a.jsonl", 12, 9)
    assert ox._order({}, 9) == ("", 9, 9) and ox._order({"ragscale": {"source_line": "4"}}, 2) == ("", 2, 2)
