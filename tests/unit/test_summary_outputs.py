"""What a run's summary pass writes (ragscale.report.summary; docs/outputs.md): summary.json (the
per-model, per-answerability and per-turn aggregates, the judge error counts), summary.csv and
records.parquet (one typed row per record, read back with pyarrow), from a handful of records built
in memory."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragscale.io.identity import REPEAT
from ragscale.report.summary import DUPLICATES, INPUT_ERRORS, SummarySink, finalize

METRICS = ["exact_match", "idk_eval", "my_score"]  # my_score: a name outside the catalog
REDUCTION = "per-target metrics: first target; per-passage metrics: max over passages; nulls left out"
TURNS = "by_turn: '1' = first turn, '>1' = later turns (MT-RAG's split)"


def mtrag(model, key, question, answer, answerability, metrics, **extra):
    rec = {"model_id": model,
           "input": [{"speaker": "user", "text": question, "enrichments": {"answerability": [answerability]}}],
           "contexts": [{"text": "p1"}, {"text": "p2 ü"}], "targets": [{"text": "ref"}],
           "predictions": [{"text": answer}], "metrics": metrics, "error": None,
           "ragscale": {"record_key": key}}
    rec.update(extra)
    return rec


def judge_errors(rec, *errors):
    rec["ragscale"]["judge_errors"] = list(errors)
    return rec


ENGINE = "engine error: openai engine: HTTP 500 (3 attempts)"
RECORDS = [
    judge_errors(mtrag("m1", "k1", "Où est Paris ?", "En France.", "ANSWERABLE",
                       {"exact_match": 1.0, "idk_eval": [0.0], "my_score": [0.5]},
                       task_id=7, conversation_id=12, turn=1),
                 {"judge": "idk", "tag": "t1", "reason": "label 'maybe'"}),
    judge_errors(mtrag("m1", "k2", "Why?", "I don't know.", "UNANSWERABLE",
                       {"exact_match": 0.0, "idk_eval": [1.0], "my_score": [0.25, 0.9]},
                       task_id="t2", turn=3),
                 {"judge": "idk", "reason": "label 'maybe'"}, {"judge": "idk", "reason": ENGINE}),
    judge_errors({"model_id": "m1", "error": {"stage": "generate", "message": "boom"},
                  "ragscale": {"record_key": "k3", "warnings": ["slow"]}},
                 {"judge": "idk", "reason": "no output"}, {"judge": "rel", "undefined": True},
                 {"judge": "idk", "reason": ENGINE}),
    mtrag("m2", "k4", "Who?", "Bob", "ANSWERABLE", {"exact_match": 1.0, "idk_eval": None, "my_score": None},
          task_id="t4", conversation_id="c4"),
    {"model_id": "m2", "task_id": "t4", "error": {"stage": "input", "message": f"task t4 {REPEAT}"},
     "ragscale": {"record_key": "k5"}},
    {"model_id": "m2", "input_line": "not json", "error": {"stage": "input", "message": "not a JSON object"},
     "ragscale": {"record_key": "k6"}},
    {"model_id": "bad", "input_line": "[1]", "error": {"stage": "input", "message": "not a JSON object"},
     "ragscale": {"record_key": "k7"}},
]


def run(tmp_path, records=RECORDS, **kw):
    sink = SummarySink(str(tmp_path), METRICS, **kw)
    for rec in records:
        sink.add(json.loads(json.dumps(rec)))
    return sink.finish()


def test_records_parquet_has_a_typed_row_per_record(tmp_path):
    run(tmp_path, rows_per_group=3)
    f = pq.ParquetFile(tmp_path / "records.parquet")
    assert [f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)] == [3, 3, 1]
    table = f.read()
    text, texts = pa.string(), pa.list_(pa.string())
    assert table.schema == pa.schema([
        ("record_key", text), ("model_id", text), ("task_id", text), ("conversation_id", text), ("turn", text),
        ("question", text), ("contexts", texts), ("reference", texts), ("answerability", text), ("prediction", text),
        ("metrics", pa.struct([("exact_match", pa.float64()), ("idk_eval", pa.list_(pa.float64())),
                               ("my_score", pa.list_(pa.float64()))])),
        ("error_stage", text), ("error_message", text), ("warnings", texts), ("record_json", text)])
    rows = table.to_pylist()
    assert [r.pop("record_json") for r in rows] == [json.dumps(r, ensure_ascii=False) for r in RECORDS]
    cols = ("record_key", "model_id", "task_id", "conversation_id", "turn", "question", "contexts", "reference",
            "answerability", "prediction", "metrics", "error_stage", "error_message", "warnings")
    ctx, ref, none = ["p1", "p2 ü"], ["ref"], dict.fromkeys(METRICS)
    expected = [
        ("k1", "m1", "7", "12", "1", "Où est Paris ?", ctx, ref, "ANSWERABLE", "En France.",
         {"exact_match": 1.0, "idk_eval": [0.0], "my_score": [0.5]}, None, None, []),
        ("k2", "m1", "t2", None, "3", "Why?", ctx, ref, "UNANSWERABLE", "I don't know.",
         {"exact_match": 0.0, "idk_eval": [1.0], "my_score": [0.25, 0.9]}, None, None, []),
        ("k3", "m1", None, None, None, None, None, None, "UNKNOWN", None, none, "generate", "boom", ["slow"]),
        ("k4", "m2", "t4", "c4", None, "Who?", ctx, ref, "ANSWERABLE", "Bob",
         {"exact_match": 1.0, "idk_eval": None, "my_score": None}, None, None, []),
        ("k5", "m2", "t4", None, None, None, None, None, "UNKNOWN", None, none, "input", f"task t4 {REPEAT}", []),
        ("k6", "m2", None, None, None, None, None, None, "UNKNOWN", None, none, "input", "not a JSON object", []),
        ("k7", "bad", None, None, None, None, None, None, "UNKNOWN", None, none, "input", "not a JSON object", []),
    ]
    assert rows == [dict(zip(cols, r)) for r in expected]


def cell(count, errors, judge_failed, means, ns, parse=None, engine=None, undefined=None, reasons=None,
         accuracy=None, accuracy_n=0):
    return {"count": count, "errors": errors, "judge_failed": judge_failed,
            "metrics": dict(zip(METRICS, means)), "n": dict(zip(METRICS, ns)),
            "judge_parse_failures": parse or {}, "judge_engine_errors": engine or {},
            "judge_undefined": undefined or {}, "judge_undefined_reasons": reasons or {},
            "answerability_accuracy": accuracy, "answerability_n": accuracy_n}


def test_summary_json_aggregates_per_model_answerability_class_and_turn(tmp_path):
    """Means leave nulls out and read a per-target metric's first target; judge errors are counted per
    judge (``judge@tag`` for a panel member), an errored record's too; an unreadable line of a model
    with readable records is its failed record, of no model's an input error; a repeat is a duplicate;
    a model without turns has an empty ``by_turn`` in a run whose records have some."""
    summary = run(tmp_path)
    answerable = cell(1, 0, 0, (1.0, 0.0, 0.5), (1, 1, 1), parse={"idk@t1": 1}, accuracy=1.0, accuracy_n=1)
    unanswerable = cell(1, 0, 1, (0.0, 1.0, 0.25), (1, 1, 1), parse={"idk": 1}, engine={"idk": 1},
                        accuracy=1.0, accuracy_n=1)
    undefined = {"undefined": {"rel": 1}, "reasons": {"rel": {"no reason given": 1}}}
    failed = dict(parse={"idk": 1}, engine={"idk": 1}, **undefined)
    nothing = (None, None, None)
    turns = {"1": answerable, ">1": unanswerable}
    assert summary == {
        "reduction": REDUCTION,
        "metrics": METRICS,
        "models": {
            "m1": {**cell(3, 1, 1, (0.5, 0.5, 0.375), (2, 2, 2), parse={"idk@t1": 1, "idk": 2}, engine={"idk": 2},
                          accuracy=1.0, accuracy_n=2, **undefined),
                   "by_answerability": {"ANSWERABLE": answerable, "UNANSWERABLE": unanswerable,
                                        "UNKNOWN": cell(1, 1, 0, nothing, (0, 0, 0), **failed)},
                   "by_turn": turns},
            "m2": {**cell(3, 2, 0, (1.0, None, None), (1, 0, 0)),
                   "by_answerability": {"ANSWERABLE": cell(1, 0, 0, (1.0, None, None), (1, 0, 0)),
                                        "UNKNOWN": cell(2, 2, 0, nothing, (0, 0, 0))},
                   "by_turn": {}},
        },
        "overall": {**cell(7, 4, 1, (2 / 3, 0.5, 0.375), (3, 2, 2), parse={"idk@t1": 1, "idk": 2},
                           engine={"idk": 2}, accuracy=1.0, accuracy_n=2, **undefined),
                    "by_answerability": {
                        "ANSWERABLE": cell(2, 0, 0, (1.0, 0.0, 0.5), (2, 1, 1), parse={"idk@t1": 1},
                                           accuracy=1.0, accuracy_n=1),
                        "UNANSWERABLE": unanswerable,
                        "UNKNOWN": cell(4, 4, 0, nothing, (0, 0, 0), **failed)},
                    "by_turn": turns},
        "input_errors": {"records": 1, "reason": INPUT_ERRORS},
        "duplicates": {"records": 1, "reason": DUPLICATES},
        "turns": TURNS,
    }
    assert (tmp_path / "summary.json").read_text() == json.dumps(summary, indent=2)
    assert (tmp_path / "summary.csv").read_bytes().decode().split("\r\n") == [
        "model_id,answerability,count,errors,exact_match,idk_eval,my_score,answerability_accuracy",
        "m1,ALL,3,1,0.5,0.5,0.375,1",
        "m1,ANSWERABLE,1,0,1,0,0.5,1",
        "m1,UNANSWERABLE,1,0,0,1,0.25,1",
        "m1,UNKNOWN,1,1,,,,",
        "m2,ALL,3,2,1,,,",
        "m2,ANSWERABLE,1,0,1,,,",
        "m2,UNKNOWN,2,2,,,,",
        "",
    ]


def test_an_empty_run_has_no_overall_block_and_a_header_only_csv(tmp_path):
    assert run(tmp_path, records=[]) == {"reduction": REDUCTION, "metrics": METRICS, "models": {}, "overall": None}
    assert (tmp_path / "summary.csv").read_bytes() == \
        b"model_id,answerability,count,errors,exact_match,idk_eval,my_score,answerability_accuracy\r\n"
    assert pq.read_table(tmp_path / "records.parquet").num_rows == 0


def test_the_summary_keeps_the_three_most_common_of_twenty_undefined_reasons_per_judge(tmp_path):
    """Each judge counts at most 20 distinct reasons (a reason seen first after them is not counted,
    the ones already counted still are); summary.json keeps the 3 most common."""
    reasons = [f"r{i}" for i in range(1, 21)] + ["r21"] * 5 + ["r1"] * 3 + ["r2"]
    records = [{"model_id": "m", "metrics": {}, "error": None,
                "ragscale": {"record_key": f"k{i}", "judge_errors": [{"judge": "rel", "undefined": True, "reason": r}]}}
               for i, r in enumerate(reasons)]
    block = run(tmp_path, records=records)["models"]["m"]
    assert (block["judge_undefined"], block["judge_undefined_reasons"]) == \
        ({"rel": len(reasons)}, {"rel": {"r1": 4, "r2": 2, "r3": 1}})


def test_finalize_reads_records_jsonl_and_passes_the_consistency_block_through(tmp_path):
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS[:2]))
    summary = finalize(str(tmp_path), METRICS, rows_per_group=1, consistency={"groups": 0})
    assert summary["consistency"] == {"groups": 0}
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    assert summary["models"]["m1"]["count"] == 2
    assert pq.ParquetFile(tmp_path / "records.parquet").num_row_groups == 2


@pytest.mark.parametrize("via_finalize", [False, True])
def test_records_parquet_row_groups_hold_2000_records_by_default(tmp_path, via_finalize):
    records = [{"model_id": "m", "metrics": {}, "error": None, "ragscale": {"record_key": str(i)}} for i in range(2001)]
    if via_finalize:
        (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        finalize(str(tmp_path), [])
    else:
        sink = SummarySink(str(tmp_path), [])
        for rec in records:
            sink.add(rec)
        sink.finish()
    f = pq.ParquetFile(tmp_path / "records.parquet")
    assert [f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)] == [2000, 1]
