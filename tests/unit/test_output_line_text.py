"""The records.jsonl line as text (ragscale.io.output_line, issue 37): what a person or a tool greps
for is written as it is, not as \\u escapes (model ids, file names, metric names, warnings, judges'
errors and details); several judges' errors and details make one valid JSON object; a judge whose
details are missing is null, a non-finite number in them null too."""

from __future__ import annotations

import json

from rows import worker_row

from ragscale.io.output_line import output_line


def row(**fields) -> dict:
    base = dict(key="données.jsonl:1", source_file="/data/données.jsonl", source_line=1, model_id="modèle-é",
                input_json='{"task_id": "t1"}', input_has_model_id=False, task_id="t1",
                metrics={"exact_match": [1.0]}, warnings=["réponse vide"])
    return worker_row(**{**base, **fields})


def test_text_is_written_as_it_is():
    line = output_line(row(judge_errors=[json.dumps({"judge": "idk", "reason": "sortie illisible"},
                                                    ensure_ascii=False)],
                           details={"idk": json.dumps({"label": "oui"}, ensure_ascii=False)}))
    for text in ("modèle-é", "/data/données.jsonl", "données.jsonl:1", "réponse vide", "sortie illisible", "oui"):
        assert text in line, text
    assert "\\u" not in line
    out = json.loads(line)
    assert out["model_id"] == "modèle-é" and out["ragscale"]["warnings"] == ["réponse vide"]


def test_metric_names_and_detail_keys_as_they_are():
    line = output_line(row(metrics={"précision": [0.5]}, details={"juge-é": '{"a": 1}'}))
    assert '"précision": [0.5]' in line and '"juge-é": {"a": 1}' in line


def test_several_judges_errors_and_details_are_one_object():
    errors = [json.dumps({"judge": j, "reason": "r"}) for j in ("idk", "radbench", "umbrela")]
    out = json.loads(output_line(row(judge_errors=errors, details={"idk": '{"label": "no"}', "radbench": None,
                                                                   "umbrela": '{"grades": [NaN, 2]}'})))
    assert [e["judge"] for e in out["ragscale"]["judge_errors"]] == ["idk", "radbench", "umbrela"]
    assert out["ragscale"]["details"] == {"idk": {"label": "no"}, "radbench": None, "umbrela": {"grades": [None, 2]}}


def test_the_record_entry_keeps_its_text():
    line = output_line(row(query="Où est la gare ?", prediction="À gauche.", passage_ids=["doc-é"]))
    assert '"query": "Où est la gare ?"' in line and '"answer": "À gauche."' in line and '"doc-é"' in line
