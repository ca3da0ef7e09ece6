"""The record's normalized fields in the output line (``ragscale.record``, written by
ragscale.io.output_line from the row's typed columns) and the one accessor the report sinks read
them through (ragscale.record_fields): the entry per input layout (MT-RAG, open-rag-eval with and
without an answer, RAGAS, the user's own columns, unreadable and refused lines), the accessor
giving from the entry what the old derivation from the input layout gives, and the sinks reading
a mapped record as the reader read it. Everything is built in memory."""

from __future__ import annotations

import ast
import json
import os

import pyarrow.parquet as pq
import pytest

from ragscale.io.orag_csv import read_records
from ragscale.record import output_line, read_record
from ragscale.record_fields import RecordFields, derived_fields, record_fields, record_texts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MTRAG = {"task_id": "c1::2", "input": [{"speaker": "user", "text": "first?"}, {"speaker": "agent", "text": "a0"},
                                       {"speaker": "user", "text": "q é?", "enrichments": {"answerability": ["PARTIAL"]}}],
         "contexts": [{"text": "p1"}, {"text": "p2"}], "targets": [{"text": "ref"}], "predictions": [{"text": "ans [1]"}]}
RAGAS = {"user_input": "q?", "response": "a", "retrieved_contexts": ["c1", "c2", "c3"], "reference": "r",
         "answerability": "ANSWERABLE"}
MAP = {"question": "query", "answer": "generated", "reference": "gold", "contexts": "docs", "model_id": "model",
       "task_id": "qid"}
OWN = {"qid": 7, "model": "m1", "query": "Capital of France?", "generated": "Paris", "gold": "Paris",
       "docs": "['Paris is the capital of France.', 'Lyon is a city.']", "answer": "not the answer"}
ORAG_CSV = ("query_id,query,query_run,passage_id,passage,generated_answer\n"
            "sky,Why blue?,1,[1],Scattering.,Blue is scattered [1].\n"
            "sky,Why blue?,1,[2],Sunsets.,\n"
            "sky,Why blue?,2,[1],Scattering.,NO_ANSWER\n"
            "sky,Why blue?,3,[1],Scattering.,API_ERROR\n"
            "sky,Why blue?,4,[1],Scattering.,\n")


def line(raw, *, columns=None, need_targets=False, task_id=None) -> dict:
    """The output record of one input line (read_record, then output_line)."""
    if not isinstance(raw, str):
        raw = json.dumps(raw, ensure_ascii=False)
    row = read_record(raw, key="k:1", model_id="m", task_id=task_id, source_file="f", source_line=3,
                      need_targets=need_targets, columns=columns).to_row()
    return json.loads(output_line(row))


def entry(**kw) -> dict:
    out = dict.fromkeys(("task_id", "query", "answer", "answerability", "answer_status", "passage_ids"))
    out.update(kw)
    return out


@pytest.fixture(scope="module")
def orag(tmp_path_factory):
    """open-rag-eval records (ragscale.io.orag_csv) by query_run: 1 answered, 2 NO_ANSWER, 3 API_ERROR,
    4 without an answer."""
    path = tmp_path_factory.mktemp("orag") / "runs.csv"
    path.write_text(ORAG_CSV, encoding="utf-8")
    return {r["query_run"]: r for r in read_records(str(path))}


# --- the entry output_line writes -----------------------------------------------------------------


def test_mtrag_entry():
    rec = line(MTRAG)
    assert rec["ragscale"]["record"] == entry(task_id="c1::2", query="q é?", answer="ans [1]", answerability="PARTIAL",
                                              passage_ids=["[1]", "[2]"])
    assert list(rec["ragscale"])[:4] == ["record_key", "source_file", "source_line", "record"]
    assert '"query": "q é?"' in output_line(read_record(json.dumps(MTRAG), key="k", model_id="m", task_id=None,
                                                         source_file="f", source_line=1, need_targets=True).to_row())


def test_open_rag_eval_entries(orag):
    """An answered run: its answer and passage ids; a run without an answer: open-rag-eval's marker
    (what its generated_answer holds and the sinks always showed) with its status; none at all: null."""
    common = {"task_id": "sky", "query": "Why blue?", "answerability": None}
    assert line(orag[1])["ragscale"]["record"] == entry(**common, answer="Blue is scattered [1].", answer_status="ok",
                                                        passage_ids=["[1]", "[2]"])
    assert line(orag[2])["ragscale"]["record"] == entry(**common, answer="NO_ANSWER", answer_status="NO_ANSWER",
                                                        passage_ids=["[1]"])
    assert line(orag[3])["ragscale"]["record"]["answer"] == "API_ERROR"
    assert line(orag[4])["ragscale"]["record"] == entry(**common, answer=None, answer_status="missing",
                                                        passage_ids=["[1]"])


def test_ragas_entry_keeps_no_texts():
    rec = line(RAGAS)
    assert rec["ragscale"]["record"] == entry(query="q?", answer="a", answerability="ANSWERABLE",
                                              passage_ids=["[1]", "[2]", "[3]"])
    assert "c1" not in json.dumps(rec["ragscale"]) and '"r"' not in json.dumps(rec["ragscale"])


def test_mapped_columns_entry_is_what_the_reader_read():
    """The user's own columns: the entry holds the mapped question and answer, where the input layout
    (which the output keeps under the user's names) reads another column as the answer."""
    rec = line(OWN, columns=MAP)
    assert rec["ragscale"]["record"] == entry(task_id="7", query="Capital of France?", answer="Paris",
                                              passage_ids=["[1]", "[2]"])
    assert record_fields(rec).answer == "Paris" and derived_fields(rec).answer == "not the answer"


def test_unreadable_and_refused_lines_get_the_entry():
    """An unreadable line: nulls (its task id when the scan gave one); a refused record: what the reader
    read before it stopped (ids, question), and no answer, answerability or passage ids."""
    assert line("not json")["ragscale"]["record"] == entry()
    assert line("[1]", task_id="t9")["ragscale"]["record"] == entry(task_id="t9")
    refused = line({k: v for k, v in MTRAG.items() if k != "targets"}, need_targets=True)
    assert refused["error"]["stage"] == "input"
    assert refused["ragscale"]["record"] == entry(task_id="c1::2", query="q é?")


def test_a_later_error_keeps_the_fields():
    row = read_record(json.dumps(MTRAG), key="k", model_id="m", task_id=None, source_file="f", source_line=1,
                      need_targets=True).to_row()
    row["error"] = json.dumps({"stage": "judge", "message": "boom"})
    assert json.loads(output_line(row))["ragscale"]["record"]["answer"] == "ans [1]"


# --- the accessor -----------------------------------------------------------------------------------


def _layouts(orag) -> dict[str, dict]:
    refused = {k: v for k, v in MTRAG.items() if k != "targets"}
    return {"mtrag": line(MTRAG), "ragas": line(RAGAS), "legacy ragas": line({"question": "q", "answer": "a"}),
            **{f"orag run {n}": line(orag[n]) for n in (1, 2, 3, 4)},
            "unreadable": line("not json"), "refused": line(refused, need_targets=True),
            "blank answer": line({"user_input": "q", "response": " ", "answerability": ["UNANSWERABLE"]})}


def test_the_entry_gives_what_the_old_derivation_gives(orag):
    """On every layout record_fields reads from the entry what the sinks derived from the input layout
    before it existed, refused records included (their answer and answerability from the layout)."""
    for name, rec in _layouts(orag).items():
        assert rec["ragscale"]["record"] is not None
        old = {**rec, "ragscale": {k: v for k, v in rec["ragscale"].items() if k != "record"}}
        assert record_fields(rec) == derived_fields(old) == record_fields(old), name
    assert record_fields(_layouts(orag)["refused"]).answer == "ans [1]"
    assert record_fields(_layouts(orag)["blank answer"]) == RecordFields(query="q", answer=" ",
                                                                        answerability="UNANSWERABLE")


def test_record_fields_of_odd_records():
    assert record_fields("not a record") == RecordFields() == derived_fields(None)
    rec = {**line(RAGAS)}
    rec["ragscale"] = {**rec["ragscale"], "record": "not an object"}
    assert record_fields(rec) == derived_fields(rec)
    bad = {"ragscale": {"record": {"query": 5, "answer": ["x"], "passage_ids": "[1]", "task_id": "t"}}}
    assert record_fields(bad) == RecordFields(task_id="t")
    assert record_fields({**line(RAGAS), "ragscale": "not an object"}) == derived_fields(line(RAGAS))


def test_record_texts_pairs_passages_with_the_fields_ids(orag):
    texts = record_texts(line(orag[1]))
    assert texts.passages == [("[1]", "Scattering."), ("[2]", "Sunsets.")] and texts.references is None
    texts = record_texts(line(MTRAG))
    assert (texts.contexts, texts.references) == (["p1", "p2"], ["ref"])
    assert record_texts(line("not json")) == record_texts({"x": 1})
    assert record_texts({"x": 1}).contexts is None and record_texts({"x": 1}).passages == []
    fields = RecordFields(passage_ids=("a", "b"))  # ids that name as many passages win
    assert record_texts(line(MTRAG), fields).passages == [("a", "p1"), ("b", "p2")]
    assert record_texts(line(MTRAG), RecordFields(passage_ids=("a",))).passages == [("[1]", "p1"), ("[2]", "p2")]
    own = line(MTRAG)  # without fields given: the ids of the record's own entry
    own["ragscale"]["record"]["passage_ids"] = ["d7", "d9"]
    assert record_texts(own).passages == [("d7", "p1"), ("d9", "p2")]
    bare = {k: v for k, v in line(MTRAG).items() if k != "targets"}  # no reference: still its passages
    assert (record_texts(bare).contexts, record_texts(bare).references) == (["p1", "p2"], None)


# --- the sinks --------------------------------------------------------------------------------------

SINKS = ("ragscale/report/summary.py", "ragscale/report/html_records.py", "ragscale/report/orag_export.py",
         "ragscale/report/significance.py", "ragscale/metrics/consistency.py")
DERIVATIONS = {"answer_of", "query_of", "answerability_of", "passage_ids_of", "extract_fields"}


@pytest.mark.parametrize("path", SINKS)
def test_sinks_read_the_fields_only_through_the_accessor(path):
    tree = ast.parse(open(os.path.join(ROOT, path), encoding="utf-8").read())
    used = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "ragscale.record"
            for a in n.names}
    assert not used & DERIVATIONS, path


def test_the_sinks_show_a_mapped_record_as_the_reader_read_it(tmp_path):
    """records.parquet, the HTML report's card, the open-rag-eval export and the consistency groups
    read the user's mapped question and answer (the layout would read the column named ``answer``)."""
    from ragscale.metrics.consistency import GroupCollector
    from ragscale.report.html_records import record_info
    from ragscale.report.orag_export import export_orag_csv
    from ragscale.report.summary import SummarySink

    rec = line(OWN, columns=MAP)
    sink = SummarySink(str(tmp_path), [])
    sink.add(rec)
    sink.finish()
    row = pq.read_table(tmp_path / "records.parquet").to_pylist()[0]
    assert (row["question"], row["prediction"], row["task_id"]) == ("Capital of France?", "Paris", "7")
    assert json.loads(row["record_json"])["ragscale"]["record"]["answer"] == "Paris"
    info = record_info(rec, 0, "m1", "k:1", {})
    assert (info["query"], info["answer"]) == ("Capital of France?", "Paris")
    export_orag_csv([rec], str(tmp_path / "out.csv"))
    text = (tmp_path / "out.csv").read_text(encoding="utf-8")
    assert "Capital of France?" in text and "Paris" in text and "not the answer" not in text
    groups = GroupCollector([], lambda name, value: value)
    for run in (1, 2, 3):
        groups.add({**rec, "query_id": "q", "query_run": run})
    assert groups.result()[0]["answers"] == ["Paris"] * 3


@pytest.mark.parametrize("err, kind", [
    ({"judge": "idk", "undefined": True, "reason": "engine error: but no value by definition"}, "undefined"),
    ({"judge": "idk", "reason": "engine error: timed out after 3 retries"}, "engine"),
    ({"judge": "idk", "reason": "output is not JSON"}, "parse"),
    ({"judge": "idk", "reason": "the engine error was not at the start"}, "parse"),
    ({"judge": "idk"}, "parse"),
])
def test_a_judge_errors_kind(err, kind):
    """How the summary and the report count a record's judge errors (docs/exit-codes.md: an engine
    error fails the record, a parse failure or an undefined value does not)."""
    from ragscale.record import judge_error_kind

    assert judge_error_kind(err) == kind
