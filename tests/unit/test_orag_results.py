"""open-rag-eval's results CSV read back as records (ragscale/io/orag_results.py; issue 36): every
score the export writes comes back under its ragscale name, ``ragscale compare`` and ``ragscale
plot`` take a results CSV where they take a run directory, and what is not one is refused in one
line."""

from __future__ import annotations

import json

import pytest

from ragscale.errors import UserError
from ragscale.io.orag_results import is_results_csv, results_records, run_metrics
from ragscale.report.compare import compare_runs
from ragscale.report.orag_export import export_orag_csv
from ragscale.report.runs import load_runs, records_source
from test_orag_csv import sample_records

EXPORTED = ("umbrela_scores", "umbrela_mean", "P@1", "P@3", "AP@1", "AP@3", "MRR", "nuggets_all", "nuggets_vital",
            "nuggets_weighted", "nuggets_strict_all", "nuggets_strict_vital", "nuggets_strict_weighted",
            "nuggets_assignment_mean", "hhem", "citation_precision", "citation_recall", "citation_f1", "answered")


def test_every_exported_score_comes_back_under_its_name(tmp_path):
    records = sample_records()
    out = str(tmp_path / "m1.csv")
    export_orag_csv(records, out)
    assert is_results_csv(out)
    back = {(r["query_id"], r["query_run"]): r for r in results_records(out)}
    assert len(back) == len(records)
    for rec in records:
        got = back[(rec["query_id"], rec["query_run"])]
        assert got["model_id"] == "m1" and got["task_id"] == rec["query_id"] and got["error"] is None
        assert {k: got["metrics"].get(k) for k in EXPORTED} == {k: rec["metrics"][k] for k in EXPORTED}
        assert got["ragscale"]["record"]["query"] == rec["query"]


def test_run_1_columns_without_their_prefix_and_empty_runs():
    cells = {"generation_score_no_answer_score": {"query_answered": "no"},
             "generation_score_autonugget_scores": {"nuggetizer_scores": {"Vital": 0.5, "All": None}},
             "retrieval_score_precision_metrics": {"precision@": {"5": 0.4}, "MRR": True}}
    assert run_metrics(cells) == {"answered": 0.0, "nuggets_vital": 0.5, "P@5": 0.4}
    assert run_metrics({}) == {}


def test_a_plain_results_file_and_bad_cells(tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_text('query_id,query,generation_score_hallucination_score,run_2_generation_score_hallucination_score\n'
                     'q1,Q?,0.25,\nq2,R?,,0.75\n')
    got = [(r["query_id"], r["query_run"], r["metrics"]) for r in results_records(str(plain))]
    assert got == [("q1", 1, {"hhem": 0.25}), ("q2", 2, {"hhem": 0.75})]
    bad = tmp_path / "bad.csv"
    bad.write_text("query_id,query,run_1_generation_score_no_answer_score\nq1,Q?,{yes\n")
    with pytest.raises(UserError, match=r"bad.csv:2 \(run_1_generation_score_no_answer_score\): not a JSON value"):
        list(results_records(str(bad)))
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    assert not is_results_csv(str(other)) and not is_results_csv(str(tmp_path))
    with pytest.raises(UserError, match="neither a ragscale output_dir nor an open-rag-eval results CSV"):
        records_source(str(other))


def test_compare_and_plot_take_results_files(tmp_path):
    records = [r for r in sample_records() if r["query_run"] == 1]
    worse = [json.loads(json.dumps(r)) for r in records]
    for r in worse:
        r["metrics"]["hhem"] -= 0.1
    a, b = str(tmp_path / "a.csv"), str(tmp_path / "b.csv")
    export_orag_csv(records, a)
    export_orag_csv(worse, b)
    block = compare_runs(a, b, metrics=["hhem"], cluster_by=None)
    (entry,) = block["metrics"]["hhem"]
    assert entry["n"] == len(records) and entry["diff"] == pytest.approx(0.1)
    data = load_runs([a, b], wanted=["umbrela_mean", "hhem"])
    assert [g.label for g in data.groups] == ["a.csv", "b.csv"]
    assert list(data.groups[0].values["hhem"]) == pytest.approx([r["metrics"]["hhem"] for r in records])


def test_what_is_not_a_results_file(tmp_path):
    header = "query_id,query,run_1_generation_score_hallucination_score\n"
    (tmp_path / "r.txt").write_text(header)
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "binary.csv").write_bytes(b"\xff\xfe\x00query_id")
    (tmp_path / "nothing_scored.csv").write_text("query_id,query,notes\nq,Q?,x\n")
    (tmp_path / "no_query.csv").write_text("id,text,run_1_generation_score_hallucination_score\n")
    for name in ("r.txt", "empty.csv", "binary.csv", "nothing_scored.csv", "no_query.csv"):
        assert not is_results_csv(str(tmp_path / name)), name
    assert list(results_records(str(tmp_path / "empty.csv"))) == []
    (tmp_path / "one_score.csv").write_text(header)  # the score column right after query
    assert is_results_csv(str(tmp_path / "one_score.csv"))


def test_a_runs_fields_as_the_readers_read_them(tmp_path):
    from ragscale.record_fields import record_fields

    path = tmp_path / "sys.csv"
    path.write_text("query_id,query,run_1_retrieved_passages,run_1_generated_answer\n"
                    'q1,Why?,"{""[1]"": ""p one"", ""[2]"": ""p two""}",'
                    '"[{""text"": ""Because"", ""citations"": [""[1]""]}, {""text"": ""so."", ""citations"": []}]"\n')
    (rec,) = results_records(str(path))
    fields = record_fields(rec)
    assert (fields.task_id, fields.query, fields.answer, fields.passage_ids) == ("q1", "Why?", "Because so.",
                                                                                  ("[1]", "[2]"))
    assert rec["ragscale"]["source_file"] == str(path) and rec["ragscale"]["source_line"] == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("query_id,query,run_1_generation_score_no_answer_score\nq1,Q?," + "x" * 80 + "\n")
    with pytest.raises(UserError) as e:
        list(results_records(str(bad)))
    assert str(e.value) == f"{bad}:2 (run_1_generation_score_no_answer_score): not a JSON value ('{'x' * 60}')"


def test_cells_of_the_wrong_shape_and_numbers_that_are_not():
    from ragscale.io.orag_results import number

    assert [number(v) for v in (float("nan"), float("inf"), float("-inf"), True, "1", 2)] == [None] * 5 + [2.0]
    assert run_metrics({"retrieval_score_umbrela_scores": [3, 2], "generation_score_autonugget_scores": ["x"],
                        "generation_score_citation_scores": [0.5]}) == {}


def test_a_query_keeps_its_line_breaks_and_a_part_without_text_is_empty(tmp_path):
    from ragscale.record_fields import record_fields

    path = tmp_path / "sys.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        fh.write('query_id,query,run_1_generated_answer\r\n'
                 'q1,"first line\r\nsecond",'
                 '"[{""citations"": [""[1]""]}, {""text"": ""Paris."", ""citations"": []}]"\r\n')
    (rec,) = results_records(str(path))
    fields = record_fields(rec)
    assert fields.query == "first line\r\nsecond" and fields.answer == " Paris."
