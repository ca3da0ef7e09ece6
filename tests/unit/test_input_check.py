"""Inputs checked against the chosen metrics before Ray starts (ragscale.io.check): a file in
which no record has an answer, or none has what a chosen metric needs, is refused in one line
naming its columns and the column_map that would read it; a field only some records lack is left
to those records."""

from __future__ import annotations

import json

import pytest

from ragscale.errors import UserError
from ragscale.io.check import check_fields
from ragscale.io.inputs import resolve_inputs
from ragscale.metrics.registry import field_needs

OWN = [{"query": f"q{i}", "generated": f"a{i}", "gold": f"r{i}", "docs": [f"p{i}"]} for i in range(3)]


def _jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _refusal(files, metrics) -> str:
    with pytest.raises(UserError) as e:
        check_fields(files, field_needs(metrics))
    return str(e.value)


def test_no_answer_anywhere_is_refused_with_the_mapping_that_reads_it(tmp_path):
    p = _jsonl(tmp_path / "own.jsonl", OWN)
    msg = _refusal(resolve_inputs(p), ["exact_match"])
    assert msg == (f"{p}: no record has an answer (3 checked); its columns: query, generated, gold, docs; name your "
                   "columns with column_map={'answer': 'generated', 'contexts': 'docs', 'reference': 'gold'} in "
                   "Python, columns.answer=generated columns.contexts=docs columns.reference=gold on the command line")
    # (the question is read already: `query` is open-rag-eval's name for it)


def test_the_mapping_makes_it_pass(tmp_path):
    p = _jsonl(tmp_path / "own.jsonl", OWN)
    columns = {"question": "query", "answer": "generated", "reference": "gold", "contexts": "docs"}
    check_fields(resolve_inputs(p, columns), field_needs(["exact_match", "RL_F", "context_recall"]))


def test_a_field_a_metric_needs_and_no_record_has(tmp_path):
    p = _jsonl(tmp_path / "noref.jsonl", [{"user_input": "q", "response": "a", "retrieved_contexts": ["p"]}])
    msg = _refusal(resolve_inputs(p), ["RougeL_stemFalse", "RL_F"])
    assert msg.startswith(f"{p}: RougeL needs a reference answer, and no record has one (1 checked)")
    assert "its columns: user_input, response, retrieved_contexts" in msg
    assert "column_map={'reference': NAME} in Python, columns.reference=NAME on the command line" in msg


def test_metrics_that_need_nothing_more_pass_on_answers_alone(tmp_path):
    p = _jsonl(tmp_path / "answers.jsonl", [{"response": "a"}])
    check_fields(resolve_inputs(p), field_needs(["source_citation", "idk_eval"]))


def test_a_field_some_records_lack_is_left_to_them(tmp_path):
    p = _jsonl(tmp_path / "mixed.jsonl", [{"response": "a"}, {"response": "b", "reference": "r"}])
    check_fields(resolve_inputs(p), field_needs(["exact_match"]))


def test_a_table_csv_is_checked_like_jsonl(tmp_path):
    p = tmp_path / "own.csv"
    p.write_text("query,generated,gold\nq1,a1,r1\n")
    (f,) = resolve_inputs(str(p))
    assert f.fmt == "table"
    assert "column_map={'answer': 'generated', 'reference': 'gold'}" in _refusal([f], ["exact_match"])
    check_fields(resolve_inputs(str(p), {"answer": "generated", "reference": "gold"}), field_needs(["exact_match"]))


def test_empty_files_and_unreadable_lines_are_left_to_the_run(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    check_fields(resolve_inputs(str(empty)), field_needs(["exact_match"]))
    p = tmp_path / "broken.jsonl"
    p.write_text('not json\n{"response": "a", "reference": "r"}\n')
    check_fields(resolve_inputs(str(p)), field_needs(["exact_match"]))


def test_a_field_one_file_of_several_lacks_is_left_to_its_records(tmp_path):
    """A sweep file without references beside one with them: its records get null reference-based
    metrics with the reason, the run goes on; a file without a single answer is refused."""
    a = _jsonl(tmp_path / "a.jsonl", [{"response": "a", "reference": "r"}])
    b = _jsonl(tmp_path / "b.jsonl", [{"response": "b"}])
    check_fields(resolve_inputs([a, b]), field_needs(["exact_match"]))
    c = _jsonl(tmp_path / "c.jsonl", OWN)
    assert _refusal(resolve_inputs([a, c]), ["exact_match"]).startswith(f"{c}: no record has an answer")


def test_the_suggestion_names_the_model_and_task_columns_too(tmp_path):
    """Mapping only the answer of a file with a `model` column would merge its models into one."""
    p = _jsonl(tmp_path / "own.jsonl", [{"question_id": "q1", "model": "m1", "query": "q", "generated": "a"}])
    msg = _refusal(resolve_inputs(p), ["exact_match"])
    assert "column_map={'model_id': 'model', 'task_id': 'question_id', 'answer': 'generated'}" in msg, msg
    assert "columns.model_id=model columns.task_id=question_id columns.answer=generated on the command line" in msg


ORAG_CSV = ("query_id,query,query_run,passage_id,passage,generated_answer\n"
            "q1,Who wrote it?,1,[1],Ada wrote it.,Ada wrote it [1]\n")


def test_open_rag_eval_csv_has_no_reference_answer(tmp_path):
    """open-rag-eval's CSV layout holds a question, passages and an answer, never a reference: a
    metric that needs one is refused before Ray (it ran, said "ok" and left every value null)."""
    p = tmp_path / "results.csv"
    p.write_text(ORAG_CSV)
    [f] = resolve_inputs(str(p))
    assert f.fmt == "csv"
    msg = _refusal([f], ["exact_match"])
    assert msg.startswith(f"{p}: exact_match needs a reference answer, and open-rag-eval's CSV layout has none")
    assert "a CSV of one record per row or a JSONL" in msg and "docs/inputs.md" in msg
    check_fields([f], field_needs(["hhem", "citation_f1", "umbrela_mean"]))  # what the layout holds is enough
