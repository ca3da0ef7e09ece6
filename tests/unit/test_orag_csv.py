"""open-rag-eval CSV input (ragscale.io.orag_csv), its results-CSV export
(ragscale.report.orag_export) and the bundled TREC sample."""

from __future__ import annotations

import csv
import io
import json
import os
import re

import pytest

from ragscale.errors import UserError
from ragscale.io.orag_csv import REQUIRED, check_header, derived_query_id, read_records
from ragscale.metrics.trec import parse_generated_answer
from ragscale.report.orag_export import RUN_FIELDS, columns, export_orag_csv, export_orag_csv_by_model

from conftest import SHARED

ORAG = os.path.join(SHARED, "data", "open-rag-eval")
SAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "ragscale", "data", "trec_sample.csv")
HEADER = "query_id,query,query_run,passage_id,passage,generated_answer\n"


def orag_file(name: str) -> str:
    path = os.path.join(ORAG, name)
    if not os.path.exists(path):
        pytest.skip(f"needs ../shared/data/open-rag-eval/{name} (not present in a user's clone)")
    return path


def write(tmp_path, text: str | bytes, name: str = "in.csv") -> str:
    path = tmp_path / name
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8", newline="")
    else:
        path.write_bytes(text)
    return str(path)


def recs(tmp_path, body: str, header: str = HEADER) -> list[dict]:
    return list(read_records(write(tmp_path, header + body)))


# ---------------------------------------------------------------- the shared examples


@pytest.mark.parametrize("name", ["csv_results.csv", "test_csv_connector.csv"])
def test_shared_examples(name):
    path = orag_file(name)
    check_header(path)
    out = list(read_records(path))
    # what open-rag-eval's own loader test expects of this file (6 queries, query_6 twice)
    assert [(r["query_id"], r["query_run"]) for r in out] == [
        ("query_1", 1), ("query_2", 1), ("query_3", 1), ("query_4", 1), ("query_5", 1), ("query_6", 1), ("query_6", 2),
    ]
    assert all(r["input_error"] is None and r["answer_status"] == "ok" and r["warnings"] == [] for r in out)
    by = {(r["query_id"], r["query_run"]): r for r in out}
    q1 = by[("query_1", 1)]
    assert q1["query"] == "What is a blackhole?" and q1["task_id"] == "query_1"
    assert q1["passages"] == [
        {"id": "[1]", "text": "Blackholes are big."},
        {"id": "[2]", "text": "Blackholes are dense."},
        {"id": "[3]", "text": "The earth is round."},
    ]
    assert [p["id"] for p in by[("query_3", 1)]["passages"]] == ["[2]", "[3]"]
    q4 = by[("query_4", 1)]
    assert q4["generated_answer"].startswith("Based on the provided sources")
    assert "\n\nNo other information about the DFA" in q4["generated_answer"]
    assert q4["generated_answer"].endswith("Sources: [1], [2]")
    assert q4["csv_lines"] == [8, 13]  # the answer spans lines 8-12
    assert len(by[("query_5", 1)]["passages"]) == 5
    assert by[("query_6", 1)]["csv_lines"] == [19]
    assert by[("query_6", 2)]["csv_lines"] == [20, 21]
    assert by[("query_6", 2)]["generated_answer"] == "There are seven planets with moon [1]"
    assert parse_generated_answer(q1["generated_answer"])[1] == {
        "text": "They are also big and round", "citations": ["[2]", "[3]"]}


def test_shared_bom_file_reads_like_the_plain_one():
    with open(orag_file("test_csv_connector.csv"), "rb") as fh:
        assert fh.read(3) == b"\xef\xbb\xbf"
    assert list(read_records(orag_file("test_csv_connector.csv"))) == list(read_records(orag_file("csv_results.csv")))


# ---------------------------------------------------------------- the bundled sample


def test_bundled_sample():
    out = list(read_records(SAMPLE))
    assert all(r["input_error"] is None and r["warnings"] == [] for r in out), [r for r in out if r["input_error"]]
    ids = list(dict.fromkeys(r["query_id"] for r in out))
    assert len(ids) == 8
    runs = {}
    for r in out:
        runs.setdefault(r["query_id"], []).append(r["query_run"])
        assert 3 <= len(r["passages"]) <= 4
        assert all(len(p["text"]) < 260 for p in r["passages"])
        assert [p["id"] for p in r["passages"]] == [f"[{i}]" for i in range(1, len(r["passages"]) + 1)]
    assert sorted(len(v) for v in runs.values()) == [1, 1, 1, 1, 1, 1, 2, 3]
    assert runs["sky"] == [1, 2, 3] and runs["plants-food"] == [1, 2]
    assert len({r["generated_answer"] for r in out if r["query_id"] == "sky"}) == 3  # runs differ slightly
    assert [r["query_id"] for r in out if r["answer_status"] == "NO_ANSWER"] == ["sistine"]
    answers = {r["query_id"] + str(r["query_run"]): r["generated_answer"] for r in out if r["answer_status"] == "ok"}
    text = "\n".join(answers.values())
    for form in (r"\w \[\d\][.,]", r"\[\d, \d\]", r"\[\d\]\[\d\]", r"\[\d\], \[\d\]"):  # [1] [1, 2] [1][2] [1], [2]
        assert re.search(form, text), form
    assert "do not say" in answers["everest-boil1"] and not re.search(r"\[\d", answers["everest-boil1"])
    assert "\n\n" in answers["bones1"] and "\n\n" in answers["berlin-wall1"]
    for r in out:  # every citation names a passage of its record
        if r["answer_status"] == "ok":
            ids_ = {p["id"] for p in r["passages"]}
            for part in parse_generated_answer(r["generated_answer"]):
                assert set(part["citations"]) <= ids_


# ---------------------------------------------------------------- reading


def test_bom_and_crlf(tmp_path):
    data = ("\ufeff" + HEADER + 'q1,Q?,1,[1],"p, one",a [1]\nq1,Q?,1,[2],p two,\n').replace("\n", "\r\n")
    path = write(tmp_path, data.encode("utf-8"))
    check_header(path)
    (r,) = read_records(path)
    assert r["query_id"] == "q1" and r["passages"] == [{"id": "[1]", "text": "p, one"}, {"id": "[2]", "text": "p two"}]
    assert r["generated_answer"] == "a [1]" and r["csv_lines"] == [2, 3]


def test_multiline_fields_keep_physical_line_numbers(tmp_path):
    body = 'q1,Q?,1,[1],"line a\nline b","ans\n\nmore [1]"\nq1,Q?,1,[2],"x\r\ny",\nq2,R?,1,[1],z,b [1]\n'
    a, b = recs(tmp_path, body)
    assert a["csv_lines"] == [2, 6] and b["csv_lines"] == [8]
    assert a["passages"][0]["text"] == "line a\nline b" and a["generated_answer"] == "ans\n\nmore [1]"
    assert a["passages"][1]["text"] == "x\r\ny"


def test_old_mac_line_endings(tmp_path):
    (r,) = list(read_records(write(tmp_path, (HEADER + "q1,Q?,1,[1],p,a\nq1,Q?,1,[2],p2,\n").replace("\n", "\r"))))
    assert r["csv_lines"] == [2, 3] and len(r["passages"]) == 2


def test_grouping_keeps_order_of_first_appearance_and_non_contiguous_rows(tmp_path):
    body = "b,B?,1,[1],pb1,ans b\na,A?,1,[1],pa1,ans a\nb,B?,1,[2],pb2,\n\n,,,,,\nc,C?,2,[1],pc,ans c2\nc,C?,1,[1],pc,ans c1\n"
    out = recs(tmp_path, body)
    assert [(r["query_id"], r["query_run"], r["csv_lines"]) for r in out] == [
        ("b", 1, [2, 4]), ("a", 1, [3]), ("c", 2, [7]), ("c", 1, [8])]
    assert [p["text"] for p in out[0]["passages"]] == ["pb1", "pb2"]
    assert all(r["input_error"] is None and r["warnings"] == [] for r in out)


def test_skipped_rows_of_open_rag_eval_are_kept(tmp_path):
    body = ("m,M?,1,[1],p,\nm,M?,1,[2],p2,\nn,N?,1,[1],p,NO_ANSWER\ne,E?,1,[1],p, API_ERROR \n"
            "w,W?,1,[1],p,   \nw,W?,1,[2],p2,real [2]\n")
    m, n, e, w = recs(tmp_path, body)
    assert (m["answer_status"], m["generated_answer"], m["input_error"]) == ("missing", None, None)
    assert (n["answer_status"], n["generated_answer"]) == ("NO_ANSWER", "NO_ANSWER")
    assert (e["answer_status"], e["generated_answer"]) == ("API_ERROR", "API_ERROR")
    assert (w["answer_status"], w["generated_answer"]) == ("ok", "real [2]")  # first non-empty answer


def test_first_answer_wins_with_warning(tmp_path):
    r1, r2 = recs(tmp_path, "a,A?,1,[1],p,first\na,A?,1,[2],q,second\nb,B?,1,[1],p,same\nb,B?,1,[2],q,same\n")
    assert r1["generated_answer"] == "first" and r1["input_error"] is None
    assert r1["warnings"] == ["line 3: another generated_answer than line 2's; the first is used (as open-rag-eval)"]
    assert r2["warnings"] == []


def test_missing_query_id_is_derived_from_the_query(tmp_path):
    header = "query,passage_id,passage,generated_answer\n"
    out = recs(tmp_path, "What?,[1],p,ans\nWhat?,[2],p2,\nOther?,[1],p,b\n", header=header)
    assert [r["query_id"] for r in out] == [derived_query_id("What?"), derived_query_id("Other?")]
    assert out[0]["query_id"] == derived_query_id("  What? ") and out[0]["query_id"].startswith("q_")
    assert out[0]["task_id"] == out[0]["query_id"] and out[0]["query_run"] == 1 and len(out[0]["passages"]) == 2
    assert out[0]["warnings"] == [f"line 2: no query_id column; query_id {out[0]['query_id']} derived from the query text"]
    again = recs(tmp_path, "What?,[1],p,ans\n", header=header)
    assert again[0]["query_id"] == out[0]["query_id"]  # stable across reads
    (r,) = recs(tmp_path, ",What?,,[1],p,ans\n,What?,,[2],p2,\n")
    assert r["query_id"] == derived_query_id("What?") and r["query_run"] == 1 and r["input_error"] is None
    assert r["warnings"] == [
        f"line 2: empty query_id; query_id {r['query_id']} derived from the query text", "line 2: empty query_run taken as 1"]


def test_query_run_forms(tmp_path):
    out = recs(tmp_path, "a,A?,2.0,[1],p,x\na,A?, 3 ,[1],p,y\n")
    assert [r["query_run"] for r in out] == [2, 3] and all(r["input_error"] is None for r in out)


def test_extra_columns_are_ignored_and_column_order_is_free(tmp_path):
    header = "generated_answer,passage,passage_id,query,extra\n"
    (r,) = recs(tmp_path, "ans [1],text,[1],Q?,whatever\n,t2,[2],Q?,\n", header=header)
    assert r["passages"] == [{"id": "[1]", "text": "text"}, {"id": "[2]", "text": "t2"}] and r["generated_answer"] == "ans [1]"


def test_answer_only_row_and_query_without_passages(tmp_path):
    a, b = recs(tmp_path, "a,A?,1,,,ans\na,A?,1,[1],p,\nb,B?,1,,,NO_ANSWER\n")
    assert a["passages"] == [{"id": "[1]", "text": "p"}] and a["input_error"] is None and a["warnings"] == []
    assert b["passages"] == [] and b["warnings"] == ["no passages (no row with a passage_id and passage)"]


def test_passage_id_not_citable_and_duplicate_same_text_warn(tmp_path):
    (r,) = recs(tmp_path, "a,A?,1,doc-7,p,ans\na,A?,1,doc-7,p,\n")
    assert r["input_error"] is None and r["passages"] == [{"id": "doc-7", "text": "p"}]
    assert r["warnings"] == [
        "line 2: passage_id 'doc-7' is not of the form [N]; bracket citations cannot refer to it",
        "line 3: passage_id 'doc-7' repeats line 2 with the same text; kept once",
    ]


def test_query_differing_across_runs_warns(tmp_path):
    _, r2 = recs(tmp_path, "a,A?,1,[1],p,x\na,Other?,2,[1],p,y\n")
    assert r2["input_error"] is None and r2["warnings"] == ["line 3: query differs from line 2's, another run of query_id 'a'"]


GOOD = "ok,Fine?,1,[1],fine passage,fine [1]\n"


@pytest.mark.parametrize(
    "body, where, message",
    [  # GOOD is line 2, the body starts on line 3
        # wrong number of fields: attached to the group its cells name
        ("a,A?,1,[1],p,x\na,A?,1,[2],p, two,\n", ("a", 1), "line 4: 7 fields, the header has 6 (an unquoted comma?)"),
        ("a,A?,1,[1],p,x\na,A?,1,[2]\n", ("a", 1), "line 4: 4 fields, the header has 6"),
        ("a,A?,1,[2],p\na,A?,1,[1],p,x\n", ("a", 1), "line 3: 5 fields, the header has 6"),
        ("a,A?,1,[1],p,x\na,A?,1,,orphan text,\n", ("a", 1), "line 4: empty passage_id"),
        ("a,A?,1,[1],p,x\na,A?,1,[2],  ,\n", ("a", 1), "line 4: passage '[2]' has empty text"),
        ("a,A?,1,[1],p,x\na,B?,1,[2],p2,\n", ("a", 1), "line 4: query 'B?' differs from line 3's 'A?'"),
        ("a,A?,1,[1],p,x\na,A?,1,[1],other,\n", ("a", 1), "line 4: passage_id '[1]' repeats line 3 with other text"),
        ("a,,1,[1],p,x\n", ("a", 1), "line 3: empty query"),
        # strict quoting: the row is parsed leniently to find its group
        ('a,A?,1,[1],p,x\na,A?,1,[2],"p"x,\n', ("a", 1), "line 4: malformed CSV row (',' expected after '\"')"),
        ('a,A?,1,[1],p,x\na,A?,1,[2],"never\nclosed,\n', ("a", 1), "lines 4-5: malformed CSV row (unexpected end of data)"),
        # rows that name no usable group: a record of their own
        ("a,A?,x1,[1],p,x\n", ("a", None), "line 3: query_run 'x1' is not an integer"),
        ("a,A?,1.5,[1],p,x\n", ("a", None), "line 3: query_run '1.5' is not an integer"),
        (",,1,[1],p,x\n", ("line-3", None), "line 3: empty query_id and query"),
        ("zz,Z?,1\n", ("line-3", None), "line 3: 3 fields, the header has 6"),
        ("just one field\n", ("line-3", None), "line 3: 1 fields, the header has 6"),
    ],
)
def test_malformed_rows_become_input_errors(tmp_path, body, where, message):
    out = recs(tmp_path, GOOD + body)
    assert out[0]["query_id"] == "ok" and out[0]["input_error"] is None  # the rest of the file is unaffected
    bad = [r for r in out if r["input_error"]]
    assert len(bad) == 1, out
    (r,) = bad
    assert (r["query_id"], r["query_run"]) == where
    assert r["input_error"] == message
    assert int(re.match(r"lines? (\d+)", message).group(1)) in r["csv_lines"]
    assert r["format"] == "open-rag-eval-csv" and r["task_id"] == r["query_id"]


def test_malformed_messages_exact(tmp_path):
    out = recs(tmp_path, 'a,A?,1,[1],p,x\na,A?,1,[2],p, two,\na,A?,1,[3],,\na,A?,zz,[1],p,\n')
    assert out[0]["input_error"] == (
        "line 3: 7 fields, the header has 6 (an unquoted comma?); line 4: passage '[3]' has empty text")
    assert out[0]["csv_lines"] == [2, 3, 4]
    assert out[1] == {
        "format": "open-rag-eval-csv", "query_id": "a", "query": "A?", "query_run": None, "task_id": "a", "passages": [],
        "generated_answer": None, "answer_status": "missing", "csv_lines": [5],
        "input_error": "line 5: query_run 'zz' is not an integer", "warnings": [],
    }


def test_invalid_utf8_line_is_an_input_error(tmp_path):
    data = (HEADER + GOOD).encode() + b"a,A?,1,[1],caf\xe9,x\n"
    out = list(read_records(write(tmp_path, data)))
    assert out[0]["input_error"] is None
    assert out[1]["query_id"] == "a"
    assert out[1]["input_error"] == "line 3: malformed CSV row (not valid UTF-8 (save the file as UTF-8))"


def test_record_shape(tmp_path):
    (r,) = recs(tmp_path, GOOD)
    assert r == {
        "format": "open-rag-eval-csv", "query_id": "ok", "query": "Fine?", "query_run": 1, "task_id": "ok",
        "passages": [{"id": "[1]", "text": "fine passage"}], "generated_answer": "fine [1]", "answer_status": "ok",
        "csv_lines": [2], "input_error": None, "warnings": [],
    }


@pytest.mark.parametrize(
    "data, expect",
    [
        ("query,passage,generated_answer\nq,p,a\n", "missing column(s) passage_id"),
        ('{"task_id": "x", "predictions": []}\n', "missing column(s) query, passage_id, passage, generated_answer"),
        ("query;passage_id;passage;generated_answer\n", "(the file must be comma-separated)"),
        ("query,passage_id,passage,generated_answer,query\n", "column(s) query appear twice"),
        ("", "is empty (no header row)"),
        ("\n\n", "is empty (no header row)"),
        (b"query,passage_id,passage,generated_answer\x00\n",
         "missing column(s) generated_answer (header: query, passage_id, passage, 'generated_answer\\x00')"),
        (b"qu\xe9ry,passage_id,passage,generated_answer\n", "not valid UTF-8"),
    ],
)
def test_header_errors_are_one_line_user_errors(tmp_path, data, expect):
    path = write(tmp_path, data, name="bad.csv")
    for call in (lambda: check_header(path), lambda: list(read_records(path))):
        with pytest.raises(UserError) as e:
            call()
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(path) and expect in msg, msg


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="cannot read the open-rag-eval CSV"):
        check_header(str(tmp_path / "nope.csv"))
    assert REQUIRED == ("query", "passage_id", "passage", "generated_answer")


# ---------------------------------------------------------------- export

# What open-rag-eval's readers use (trec_evaluator.py plot_metrics, viz/visualize.py).
PLOTTED = [
    "retrieval_score_mean_umbrela_score",
    "generation_score_vital_nuggetizer_score",
    "generation_score_hallucination_score",
    "generation_score_citation_f1_score",
]
CONSOLIDATED = [  # TRECEvaluator.get_consolidated_columns, per run
    "retrieved_passages", "generated_answer", "retrieval_score_umbrela_scores", "retrieval_score_precision_metrics",
    "retrieval_score_mean_umbrela_score", "generation_score_autonugget_scores",
    "generation_score_mean_nugget_assignment_score", "generation_score_vital_nuggetizer_score",
    "generation_score_hallucination_score", "generation_score_citation_scores", "generation_score_citation_f1_score",
    "generation_score_no_answer_score",
]


def scored(rec: dict, seed: int, model: str = "m1", **extra) -> dict:
    """A ragscale output record with every TREC metric and judge details."""
    n = len(rec["passages"])
    umbrela = [(seed + i) % 4 for i in range(n)]
    parts = parse_generated_answer(rec["generated_answer"] or "")
    pairs = [{"part": i, "citation": c, "label": ["full_support", "partial_support", "no_support"][(seed + i) % 3]}
             for i, p in enumerate(parts, start=1) for c in p["citations"]]
    out = dict(rec)
    out["model_id"] = model
    out["metrics"] = {
        "umbrela_scores": umbrela, "umbrela_mean": sum(umbrela) / n, "P@1": float(umbrela[0] >= 2), "P@3": 1 / 3,
        "AP@1": 1.0, "AP@3": 0.5, "MRR": 1.0 / (1 + seed % 3), "nuggets_all": 0.25 + seed / 100, "nuggets_vital": 0.5,
        "nuggets_weighted": 0.4, "nuggets_strict_all": 0.2, "nuggets_strict_vital": 0.3, "nuggets_strict_weighted": 0.1,
        "nuggets_assignment_mean": 0.35, "nuggets_count": 3, "citation_precision": 0.75, "citation_recall": 0.5,
        "citation_f1": 0.6, "hhem": 0.123456789 + seed,
        # as the no-answer judge gives it: a run with no answer (NO_ANSWER) is not answered, without asking
        "answered": 0.0 if rec["query_id"] == "everest-boil" or rec["answer_status"] != "ok" else 1.0,
    }
    out["error"] = None
    out["ragscale"] = {
        "record_key": f"sample:{rec['csv_lines'][0]}", "source_file": "trec_sample.csv", "source_line": rec["csv_lines"][0],
        "warnings": [], "judge_errors": [],
        "details": {
            "nuggets": {"nuggets": ["n one", "n two", "n three"], "labels": ["vital", "vital", "okay"],
                        "assignments": ["support", "partial_support", "not_support"]},
            "citation": {"pairs": pairs},
        },
    }
    out.update(extra)
    return out


def sample_records() -> list[dict]:
    return [scored(r, i) for i, r in enumerate(read_records(SAMPLE))]


def read_csv_rows(path: str) -> tuple[list[str], list[dict]]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


def by_id(rows: list[dict], query_id: str) -> dict:
    return next(r for r in rows if r["query_id"] == query_id)


def answered_percentage(rows: list[dict]) -> float:
    """open-rag-eval's get_answered_percentage (trec_evaluator.py), on csv rows (''=NaN)."""
    answered = total = 0
    for row in rows:
        value = row.get("generation_score_no_answer_score") or row.get("run_1_generation_score_no_answer_score")
        if not value:
            continue
        total += 1
        if json.loads(value).get("query_answered", "") == "yes":
            answered += 1
    return answered / total * 100 if total else 0


def test_export_columns_and_run_layout(tmp_path):
    records = sample_records()
    out = str(tmp_path / "res.csv")
    # 8 queries: sistine's NO_ANSWER run is written too, so that open-rag-eval's plots count it (issue 36)
    assert export_orag_csv(records, out) == 8
    header, rows = read_csv_rows(out)
    assert header == ["query_id", "query"] + [f"run_{i}_{f}" for i in (1, 2, 3) for f in CONSOLIDATED]
    assert header == columns(3) and list(RUN_FIELDS) == CONSOLIDATED
    assert [r["query_id"] for r in rows] == ["sky", "berlin-wall", "soft-egg", "canberra", "plants-food", "sistine",
                                             "everest-boil", "bones"]
    assert json.loads(by_id(rows, "sistine")["run_1_generated_answer"]) == [{"text": "NO_ANSWER", "citations": []}]
    assert json.loads(by_id(rows, "sistine")["run_1_generation_score_no_answer_score"]) == {"query_answered": "no"}
    by = {r["query_id"]: r for r in rows}
    sky = [r for r in records if r["query_id"] == "sky"]
    for i, rec in enumerate(sky, start=1):
        assert json.loads(by["sky"][f"run_{i}_generated_answer"]) == parse_generated_answer(rec["generated_answer"])
        assert json.loads(by["sky"][f"run_{i}_generation_score_hallucination_score"]) == rec["metrics"]["hhem"]
    assert by["plants-food"]["run_2_retrieved_passages"] and not by["plants-food"]["run_3_retrieved_passages"]
    assert all(by["canberra"][f"run_2_{f}"] == "" for f in CONSOLIDATED)
    # the viewer's run detection (viz/visualize.py extract_runs)
    runs: dict[str, dict] = {}
    for col, val in by["sky"].items():
        m = re.match(r"run_(\d+)_(.+)", col)
        if m:
            runs.setdefault(m.group(1), {})[m.group(2)] = val
    assert sorted(runs, key=int) == ["1", "2", "3"] and set(runs["1"]) == set(CONSOLIDATED)


def test_export_single_run_file_and_plot_reader(tmp_path):
    records = [r for r in sample_records() if r["query_run"] == 1]
    out = str(tmp_path / "one.csv")
    export_orag_csv(records, out)
    header, rows = read_csv_rows(out)
    assert header == ["query_id", "query"] + [f"run_1_{f}" for f in CONSOLIDATED]
    for metric in PLOTTED:  # plot_metrics: `metric in df.columns or f"run_1_{metric}" in df.columns`
        assert metric in header or f"run_1_{metric}" in header
        values = [float(r[f"run_1_{metric}"]) for r in rows if r[f"run_1_{metric}"]]
        assert len(values) == 8
    # open-rag-eval's share of questions answered is ragscale's mean of `answered` over the same runs
    assert answered_percentage(rows) == pytest.approx(6 / 8 * 100)
    assert sum(r["metrics"]["answered"] for r in records) / len(records) == pytest.approx(6 / 8)


def test_export_reads_back_with_pandas_like_open_rag_eval(tmp_path):
    pd = pytest.importorskip("pandas")
    out = str(tmp_path / "res.csv")
    records = sample_records()
    export_orag_csv(records, out)
    df = pd.read_csv(out)
    for metric in PLOTTED:  # plot_metrics' column pick
        values = df[metric].dropna().values if metric in df.columns else df[f"run_1_{metric}"].dropna().values
        assert len(values) == 8 and values.dtype.kind == "f"
    answered = total = 0
    for _, row in df.iterrows():
        value = row.get("generation_score_no_answer_score", None) or row.get("run_1_generation_score_no_answer_score", None)
        if pd.isna(value):
            continue
        total += 1
        answered += json.loads(value).get("query_answered", "") == "yes"
    assert (answered, total) == (6, 8)
    # partial rows: canberra has no run 2 -> NaN cells, which open-rag-eval's readers skip
    assert df.loc[df["query_id"] == "canberra", "run_2_generation_score_no_answer_score"].isna().all()


def test_export_round_trips_values(tmp_path):
    records = sample_records()
    out = str(tmp_path / "res.csv")
    export_orag_csv(records, out)
    _, rows = read_csv_rows(out)
    egg_rec = next(r for r in records if r["query_id"] == "soft-egg")
    egg = next(r for r in rows if r["query_id"] == "soft-egg")
    m = egg_rec["metrics"]
    cell = lambda f: json.loads(egg[f"run_1_{f}"])  # noqa: E731
    assert egg["query"] == egg_rec["query"]
    assert cell("retrieved_passages") == {p["id"]: p["text"] for p in egg_rec["passages"]}
    assert cell("retrieval_score_umbrela_scores") == dict(zip(["[1]", "[2]", "[3]"], m["umbrela_scores"]))
    assert cell("retrieval_score_precision_metrics") == {
        "precision@": {"1": m["P@1"], "3": m["P@3"]}, "AP@": {"1": m["AP@1"], "3": m["AP@3"]}, "MRR": m["MRR"]}
    assert list(cell("retrieval_score_precision_metrics")) == ["precision@", "AP@", "MRR"]
    assert cell("retrieval_score_mean_umbrela_score") == m["umbrela_mean"]
    nug = cell("generation_score_autonugget_scores")
    assert nug == {
        "nuggetizer_scores": {"All": m["nuggets_all"], "All Strict": m["nuggets_strict_all"], "Vital": m["nuggets_vital"],
                              "Vital Strict": m["nuggets_strict_vital"], "Weighted": m["nuggets_weighted"],
                              "Weighted Strict": m["nuggets_strict_weighted"]},
        "nuggets": ["n one", "n two", "n three"], "labels": ["vital", "vital", "okay"],
        "assignments": ["support", "partial_support", "not_support"], "assignment_scores": [1.0, 0.5, 0.0],
    }
    assert cell("generation_score_mean_nugget_assignment_score") == m["nuggets_assignment_mean"]
    assert cell("generation_score_vital_nuggetizer_score") == m["nuggets_vital"]
    assert cell("generation_score_hallucination_score") == m["hhem"]  # exact float round trip
    # two parts: "... [1]" (seed 2, part 1 -> no_support) and "... [3]" (part 2 -> full_support)
    assert cell("generation_score_citation_scores") == {
        "citation_score_[1]": 0.0, "citation_score_[3]": 1.0, "part_score_1": 0.0, "part_score_2": 1.0,
        "weighted_precision": 0.75, "weighted_recall": 0.5, "f1": 0.6}
    assert cell("generation_score_citation_f1_score") == m["citation_f1"]
    assert cell("generation_score_no_answer_score") == {"query_answered": "yes"}
    declined = next(r for r in rows if r["query_id"] == "everest-boil")
    assert json.loads(declined["run_1_generation_score_no_answer_score"]) == {"query_answered": "no"}
    assert json.loads(declined["run_1_generation_score_citation_scores"])["part_score_1"] == 0.0  # uncited part


def test_export_citation_and_nugget_detail_variants(tmp_path):
    (base,) = recs(tmp_path, GOOD)
    native = {"citation_score_[1]": 0.5, "part_score_1": 0.5, "weighted_precision": 9}
    a = scored(base, 0)
    a["ragscale"]["details"] = {"citation": native, "nuggets": {"nuggets": [
        {"text": "x", "importance": "vital", "assignment": "support"}]}}
    b = scored(dict(base, query_id="nodetail"), 1)
    b["ragscale"]["details"] = {}
    del b["metrics"]["MRR"]
    for k in ("P@1", "P@3", "AP@1", "AP@3"):
        b["metrics"][k] = None
    out = str(tmp_path / "res.csv")
    export_orag_csv([a, b], out)
    _, (ra, rb) = read_csv_rows(out)
    assert json.loads(ra["run_1_generation_score_citation_scores"]) == {
        "citation_score_[1]": 0.5, "part_score_1": 0.5, "weighted_precision": 0.75, "weighted_recall": 0.5, "f1": 0.6}
    assert json.loads(ra["run_1_generation_score_autonugget_scores"])["assignment_scores"] == [1.0]
    partial = {"weighted_precision": 0.75, "weighted_recall": 0.5, "f1": 0.6}
    assert json.loads(rb["run_1_generation_score_citation_scores"]) == partial
    assert set(json.loads(rb["run_1_generation_score_autonugget_scores"])) == {"nuggetizer_scores"}
    assert rb["run_1_retrieval_score_precision_metrics"] == ""


def test_export_skips_input_errors_and_keeps_runs_without_an_answer(tmp_path):
    body = "a,A?,1,[1],p,x [1]\na,A?,2,[1],p,NO_ANSWER\na,A?,3,[1],p,z [1]\nb,B?,1,[1],p,y [1]\nc,C?,1,[1],,w\nd,D?,1,[1],p,\n"
    rs = [scored(r, i) if r["passages"] else dict(r, metrics={}, error={"stage": "input", "message": r["input_error"]})
          for i, r in enumerate(recs(tmp_path, body))]
    rs[3]["error"] = {"stage": "judge", "message": "umbrela failed"}
    out = str(tmp_path / "res.csv")
    assert export_orag_csv(rs, out) == 3  # c: input_error -> no row; d: no answer, a run of its own
    header, (ra, rb, rd) = read_csv_rows(out)
    # a's run 2 (NO_ANSWER) is written between runs 1 and 3, with its marker as the answer (issue 36)
    assert json.loads(ra["run_2_generated_answer"]) == [{"text": "NO_ANSWER", "citations": []}]
    assert json.loads(ra["run_2_generation_score_no_answer_score"]) == {"query_answered": "no"}
    assert json.loads(ra["run_3_generated_answer"]) == [{"text": "z", "citations": ["[1]"]}]
    assert rd["query_id"] == "d" and json.loads(rd["run_1_generated_answer"]) == parse_generated_answer("")
    # an errored run: passages and answer only, like open-rag-eval's evaluate() exception path
    assert rb["run_1_retrieved_passages"] and rb["run_1_generated_answer"]
    assert all(rb[f"run_1_{f}"] == "" for f in CONSOLIDATED[2:])


def test_export_empty_and_by_model(tmp_path):
    out = str(tmp_path / "empty.csv")
    assert export_orag_csv([], out) == 0
    assert open(out).read() == "query_id,query\n"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    records = sample_records()
    with open(run_dir / "records.jsonl", "w") as fh:
        for r in records + [dict(r, model_id="org/Model v2") for r in records[:3]]:
            fh.write(json.dumps(r) + "\n")
    paths = export_orag_csv_by_model(str(run_dir))
    # issue 33: a name that is not the id itself has the id's hash (it was org_Model_v2.csv): names stay short
    # and no two ids share one, whatever the order the models come in
    assert [os.path.relpath(p, run_dir) for p in paths] == [os.path.join("open-rag-eval", "m1.csv"),
                                                           os.path.join("open-rag-eval", "org_Model_v2-941e9391.csv")]
    assert [r["query_id"] for r in read_csv_rows(paths[1])[1]] == ["sky"]
    assert len(read_csv_rows(paths[0])[1]) == 8


def test_export_mtrag_record(tmp_path):
    rec = {"task_id": "t1", "input": [{"speaker": "user", "text": "Q?"}], "contexts": [{"text": "c1"}, {"text": "c2"}],
           "predictions": [{"text": "ans [2]"}], "model_id": "m", "metrics": {"hhem": 0.5}, "error": None,
           "ragscale": {"record_key": "k", "source_file": "f", "source_line": 1, "details": {}}}
    out = str(tmp_path / "res.csv")
    assert export_orag_csv([rec], out) == 1
    header, (row,) = read_csv_rows(out)
    assert header == ["query_id", "query", "run_1_retrieved_passages", "run_1_generated_answer",
                      "run_1_generation_score_hallucination_score"]
    assert row["query_id"] == "t1" and row["query"] == "Q?"
    assert json.loads(row["run_1_retrieved_passages"]) == {"[1]": "c1", "[2]": "c2"}


def test_csv_quoting_matches_pandas_to_csv(tmp_path):
    pd = pytest.importorskip("pandas")
    out = str(tmp_path / "res.csv")
    export_orag_csv(sample_records(), out)
    df = pd.read_csv(out, dtype=str, keep_default_na=False)
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    assert buf.getvalue() == open(out, encoding="utf-8").read()
