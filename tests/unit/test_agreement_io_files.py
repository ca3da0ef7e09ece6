"""Judge-vs-human agreement files as a user meets them (ragscale.report.agreement_io): MT-RAG's
human-evaluation layout read with its declared labels, only its human metrics and its malformed
evaluations counted as skipped; agreement.json and agreement.csv written whole, into a folder that may
already exist."""

import csv
import json

from ragscale.report import agreement_io as io
from ragscale.stats.agreement import STATS

LABELS = [{"value": "No", "numeric_value": 0}, {"value": "Partially", "numeric_value": 0.5},
          {"value": "Yes", "numeric_value": 1}, {"value": "Unsure"}]
MTRAG = {
    "metrics": [{"name": "faithful", "author": "human", "type": "categorical", "values": LABELS},
                {"name": "verdict", "author": "human", "type": "numerical"},
                {"name": "judge_score", "author": "algorithm", "type": "numerical"}],
    "evaluations": [
        "not an evaluation",
        {"task_id": "t0", "model_id": "m"},
        {"model_id": "m", "annotations": {}},
        {"task_id": "t1", "model_id": "", "annotations": {
            "faithful": {"a": {"value": "Partially"}, "b": "Partially", "c": {"value": "Yes"}, "d": "Unsure"},
            "verdict": "not one per annotator",
            "judge_score": {"gpt": {"value": 0.9}},
            "notes": "free text"}},
        {"task_id": "t2", "model_id": "m", "annotations": {"faithful": {"a": "No", "b": {"value": "Yes"}}}},
    ],
}


def test_mtrag_labels_are_read_by_their_declared_numbers_and_only_human_metrics_count(tmp_path):
    path = tmp_path / "human.json"
    path.write_text(json.dumps(MTRAG))
    h = io.read_human(str(path))
    assert (h.source, h.layout, h.skipped) == (str(path), "mtrag-human-evaluation", 3)
    assert h.values == {("task", "t1", None): {"faithful": 0.5}, ("task", "t2", "m"): {"faithful": 0.5}}
    assert h.annotators == {("task", "t1", None): {"faithful": 3}, ("task", "t2", "m"): {"faithful": 2}}
    assert h.scales == {"faithful": [0.0, 0.5, 1.0]}
    assert h.metrics() == ["faithful"]


RESULT = {"rows": [
    {"human": "quality", "metric": "RB_llm", "model": "ALL", "n": 3, "excluded_error": 1, "excluded_null": 0,
     "annotators_mean": 2.5,
     "spearman": {"value": 0.5, "ci": [0.1, 0.9], "ci_method": "BCa"},
     "kendall": {"value": None, "ci": None, "reason": "the metric is constant"}}],
    "bootstrap": {"confidence": 0.95, "replicates": 10, "text": "resampled by record: 3 records"}}


def test_the_tables_are_written_whole_into_an_existing_folder(tmp_path):
    paths = io.write_tables(RESULT, str(tmp_path))
    assert paths == {k: str(tmp_path / f"agreement.{k}") for k in ("json", "csv", "md", "png")}
    assert (tmp_path / "agreement.json").read_text() == json.dumps(RESULT, indent=2)
    with open(paths["csv"], newline="") as fh:
        rows = list(csv.reader(fh))
    blank = ["", "", ""] * (len(STATS) - 2)
    assert rows[1] == ["quality", "RB_llm", "ALL", "3", "1", "0", "2.5", "0.5", "0.1", "0.9", "", "", "", *blank]
    assert (tmp_path / "agreement.md").read_text() == io.to_markdown(RESULT) + "\n"
    assert io.write_tables(RESULT, str(tmp_path)) == paths
