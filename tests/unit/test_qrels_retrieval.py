"""Retrieval against human qrels (ragscale/io/qrels.py, ragscale/metrics/qrels_retrieval.py;
docs/metrics.md, "Retrieval against qrels"): the qrels readers and their messages, the measures by
hand, MT-RAG's rules (identical ids dropped, queries without qrels not scored, collections weighted
by their task count), and conformance with MT-RAG's own scripts/evaluation/run_retrieval_eval.py
executed from the reference copy on constructed records: every per-query, per-collection and
weighted figure equal to 1e-9."""

from __future__ import annotations

import json
import math

import pytest

from conftest import MTRAG_COLLECTIONS, reference_source, run_mtrag_retrieval_eval
from ragscale.errors import UserError
from ragscale.io.qrels import query_key, read_collection_qrels, read_qrels
from ragscale.metrics.qrels_retrieval import evaluate, names, qrels_of_collection, run_of, score_collections

pytest.importorskip("pytrec_eval")

BEIR = "query-id\tcorpus-id\tscore\n"


def write(path, text):
    path.write_text(text)
    return str(path)


def test_beir_and_trec_qrels(tmp_path):
    beir = write(tmp_path / "dev.tsv", BEIR + "c1<::>2\tdoc-a-0-10\t1\nc1<::>2\tdoc-b-0-5\t2\nc2<::>1\tdoc-c\t0\n")
    assert read_qrels(beir) == {"c1::2": {"doc-a-0-10": 1, "doc-b-0-5": 2}, "c2::1": {"doc-c": 0}}
    trec = write(tmp_path / "q.txt", "q1 0 d1 1\nq1 0 d2 0\n\nq2 Q0 d3 3\nq1 0 d1 2\n")
    assert read_qrels(trec) == {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 3}}  # judged twice: the last grade
    assert read_collection_qrels(beir) == {None: read_qrels(beir)}
    assert set(read_collection_qrels({"clapnq": beir, "fiqa": trec})) == {"clapnq", "fiqa"}
    assert query_key("a<::>3") == "a::3" == query_key("a::3")


@pytest.mark.parametrize("text, message", [
    (BEIR + "q1\td1\n", r"x.tsv:2: expected 3 tab-separated columns \(query-id, corpus-id, score\), got 2"),
    ("q1 0 d1\n", r"x.tsv:1: expected 4 columns"),
    (BEIR + "q1\td1\tyes\n", r"x.tsv:2: relevance 'yes' is not a number"),
    (BEIR + "q1\td1\t0.5\n", r"not a whole number"),
    (BEIR, r"holds no judgment"),
])
def test_malformed_qrels_are_refused_with_file_and_line(tmp_path, text, message):
    with pytest.raises(UserError, match=message):
        read_qrels(write(tmp_path / "x.tsv", text))
    with pytest.raises(UserError, match="does not exist"):
        read_qrels(str(tmp_path / "missing.tsv"))
    with pytest.raises(UserError, match="a mapping of collection to file"):
        read_collection_qrels({})


def test_measures_by_hand():
    qrels = {"q": {"d1": 1, "d2": 2, "d3": 1}}
    run = {"q": {"d9": 0.9, "d2": 0.8, "d1": 0.7, "q": 5.0}}  # "q" is the query's own id: dropped
    got = evaluate(qrels, run, k_values=(1, 3), measures=("Recall", "nDCG", "P", "MAP", "MRR"))["q"]
    assert got["Recall@1"] == 0 and got["Recall@3"] == pytest.approx(2 / 3)
    dcg3 = 2 / math.log2(3) + 1 / math.log2(4)  # trec_eval's gains are the grades
    ideal3 = 2 + 1 / math.log2(3) + 1 / math.log2(4)
    assert got["nDCG@1"] == 0 and got["nDCG@3"] == pytest.approx(dcg3 / ideal3)
    assert got["P@3"] == pytest.approx(2 / 3) and got["MRR"] == pytest.approx(1 / 2)
    assert got["MAP@3"] == pytest.approx((1 / 2 + 2 / 3) / 3)
    kept = evaluate(qrels, run, k_values=(1,), ignore_identical_ids=False)["q"]
    assert kept["Recall@1"] == 0 and names((1, 3), ("nDCG", "MRR")) == ["nDCG@1", "nDCG@3", "MRR"]
    with pytest.raises(UserError, match="unknown retrieval measure"):
        names((1,), ("MRR@3",))
    with pytest.raises(UserError, match="positive integers"):
        evaluate(qrels, run, k_values=(0,))


def test_queries_without_qrels_are_named_and_collections_weighted_by_their_tasks():
    records = [
        {"task_id": "a::1", "Collection": "mt-rag-clapnq-x", "contexts": [{"document_id": "d1", "score": 2.0}]},
        {"task_id": "a::2", "Collection": "mt-rag-clapnq-x", "contexts": []},  # qrels, nothing retrieved: 0
        {"task_id": "a::3", "Collection": "mt-rag-clapnq-x", "contexts": [{"document_id": "d1", "score": 1.0}]},
        {"task_id": "b::1", "Collection": "mt-rag-fiqa-x", "contexts": [{"document_id": "f1", "score": 1.0},
                                                                        {"document_id": "f2", "score": 3.0}]},
    ]
    run, coll = run_of(records)
    by = {"clapnq": {"a::1": {"d1": 1}, "a::2": {"d2": 1}}, "fiqa": {"b::1": {"f1": 1}}}
    out = score_collections(by, run, coll, k_values=(1,), measures=("Recall",))
    clap, fiqa = out["collections"]["mt-rag-clapnq-x"], out["collections"]["mt-rag-fiqa-x"]
    assert clap == {"count": 3, "scored": 2, "qrels": True, "without_qrels": ["a::3"], "Recall@1": 0.5}
    assert fiqa["Recall@1"] == 0.0 and fiqa["count"] == 1
    # weighted by the task count, the unscored a::3 included (MT-RAG's `count`)
    assert out["all"] == {"count": 4, "scored": 3, "Recall@1": pytest.approx((0.5 * 3 + 0.0 * 1) / 4)}
    assert qrels_of_collection(by, "unknown") is None and qrels_of_collection({None: {}}, "x") == {}
    with pytest.raises(UserError, match="matches several qrels keys"):
        qrels_of_collection({"cloud": {}, "ibmcloud": {}}, "mt-rag-ibmcloud-elser")


def constructed(rng_seed=3):
    """Retrieval records and qrels over the four collections: graded and binary judgments, ties,
    passages with offsets, a passage id equal to its query id, queries without qrels and with no
    passage, collections of different sizes."""
    import random

    rnd = random.Random(rng_seed)
    records, qrels = [], {c: {} for c in MTRAG_COLLECTIONS}
    for c, full in MTRAG_COLLECTIONS.items():
        for conv in range(rnd.randint(3, 6)):
            for turn in range(1, rnd.randint(2, 5)):
                tid = f"{c}{conv:02d}::{turn}"
                docs = [f"{c}_{d}-{d * 7}-0-{d * 3}" for d in rnd.sample(range(40), 8)]
                ctx = [{"document_id": d, "score": round(rnd.uniform(0, 30), 2 if i % 3 else 1)} for i, d in enumerate(docs)]
                if rnd.random() < 0.1:
                    ctx.append({"document_id": tid, "score": 99.0})  # identical to its query: dropped
                if rnd.random() < 0.15:
                    ctx = []
                records.append({"task_id": tid, "Collection": full, "contexts": ctx})
                if rnd.random() < 0.85:  # some queries have no qrels
                    rel = rnd.sample(docs[:5], rnd.randint(1, 3)) + [f"{c}_unretrieved-{conv}-{turn}"]
                    qrels[c][tid] = {d: rnd.choice([1, 1, 2]) for d in rel}
    return records, qrels


def test_conformance_with_mtrags_run_retrieval_eval(tmp_path):
    records, qrels = constructed()
    texts = {c: BEIR + "".join(f"{q}\t{d}\t{g}\n" for q, docs in judged.items() for d, g in docs.items())
             for c, judged in qrels.items()}
    theirs, rows = run_mtrag_retrieval_eval(tmp_path, records, texts)
    by = read_collection_qrels({c: str(tmp_path / "human" / "retrieval_tasks_convid" / c / "qrels" / "dev.tsv")
                                for c in MTRAG_COLLECTIONS})
    run, coll = run_of(records)
    ours = score_collections(by, run, coll, k_values=(1, 3, 5), measures=("Recall", "nDCG"), digits=5)
    # per query: the script's retriever_scores (pytrec_eval's keys)
    for q, figures in ours["queries"].items():
        for k in (1, 3, 5):
            assert figures[f"Recall@{k}"] == pytest.approx(theirs[q][f"recall_{k}"], abs=1e-9)
            assert figures[f"nDCG@{k}"] == pytest.approx(theirs[q][f"ndcg_cut_{k}"], abs=1e-9)
    assert {q for q, s in theirs.items() if s} == set(ours["queries"])
    # per collection and weighted ("all")
    assert set(rows) == {*MTRAG_COLLECTIONS.values(), "all"}
    for name, row in rows.items():
        mine = ours["all"] if name == "all" else ours["collections"][name]
        assert int(row["count"]) == mine["count"]
        for label, figure in (("Recall", "Recall"), ("nDCG", "nDCG")):
            want = json.loads(row[label])
            assert [mine[f"{figure}@{k}"] for k in (1, 3, 5)] == pytest.approx(want, abs=1e-9)


def test_conformance_on_mtrags_own_qrels(tmp_path):
    """The benchmark's human qrels as shipped (query ids written ``<::>``; the script is given them
    with its task ids' ``::``, as its retrieval_tasks_convid copies have them) and runs drawn from
    their passages and from other queries' (the generation tasks' passages are not in the local copy)."""
    import random

    rnd = random.Random(5)
    texts = {c: reference_source("mt-rag-benchmark", f"mtrag-human/retrieval_tasks/{c}/qrels/dev.tsv")
             for c in MTRAG_COLLECTIONS}
    records = []
    for c, text in texts.items():
        judged: dict[str, list[str]] = {}
        for line in text.splitlines()[1:]:
            q, d, _ = line.split("\t")
            judged.setdefault(q, []).append(d)
        pool = [d for docs in judged.values() for d in docs]
        for q, docs in judged.items():
            picked = rnd.sample(docs, rnd.randint(0, len(docs))) + rnd.sample(pool, 5)
            records.append({"task_id": q.replace("<::>", "::"), "Collection": MTRAG_COLLECTIONS[c],
                            "contexts": [{"document_id": d, "score": rnd.uniform(0, 30)} for d in picked]})
    theirs, rows = run_mtrag_retrieval_eval(tmp_path, records, {c: t.replace("<::>", "::") for c, t in texts.items()})
    mine_dir = tmp_path / "ours"
    mine_dir.mkdir()
    by = read_collection_qrels({c: write(mine_dir / f"{c}.tsv", t) for c, t in texts.items()})
    run, coll = run_of(records)
    ours = score_collections(by, run, coll, k_values=(1, 3, 5), measures=("Recall", "nDCG"), digits=5)
    assert len(ours["queries"]) > 500 and {q for q, s in theirs.items() if s} == set(ours["queries"])
    for q, figures in ours["queries"].items():
        assert figures["nDCG@5"] == pytest.approx(theirs[q]["ndcg_cut_5"], abs=1e-9)
        assert figures["Recall@5"] == pytest.approx(theirs[q]["recall_5"], abs=1e-9)
    for name, row in rows.items():
        mine = ours["all"] if name == "all" else ours["collections"][name]
        assert int(row["count"]) == mine["count"]
        assert [mine[f"Recall@{k}"] for k in (1, 3, 5)] == pytest.approx(json.loads(row["Recall"]), abs=1e-9)
        assert [mine[f"nDCG@{k}"] for k in (1, 3, 5)] == pytest.approx(json.loads(row["nDCG"]), abs=1e-9)


def test_the_command_prints_the_collections_and_names_the_tasks_without_qrels(tmp_path, capsys):
    from ragscale.commands.retrieval import main

    results = write(tmp_path / "r.jsonl", "".join(json.dumps(r) + "\n" for r in [
        {"task_id": "a<::>1", "Collection": "mt-rag-clapnq-x", "contexts": [{"document_id": "d1", "score": None},
                                                                            {"document_id": "d2", "score": None}]},
        {"task_id": "a::2", "Collection": "mt-rag-clapnq-x", "contexts": []},
        {"task_id": "b::1", "Collection": "other", "contexts": [{"document_id": "x", "score": 1}]}]))
    qrels = write(tmp_path / "q.tsv", BEIR + "a<::>1\td2\t1\n")
    assert main([results, "--qrels", f"clapnq={qrels}", "--k", "1,2"]) == 0
    out = capsys.readouterr().out
    # ranked in list order without scores: d1 first, so Recall@1 = 0 and Recall@2 = 1
    assert "| mt-rag-clapnq-x | 2 | 1 | 0.0000 | 1.0000 | 0.0000 | 0.6309 |" in out
    assert "| other | 1 | 0 | – | – | – | – |" in out and "| all (weighted by tasks) | 3 | 1 | 0.0000 | 1.0000 |" in out
    assert "2 task(s) without qrels, not scored: a::2, b::1" in out and "no qrels for collection(s) other" in out
    assert main([results, "--qrels", qrels, "--json", "--measures", "MRR"]) == 0
    block = json.loads(capsys.readouterr().out)[results]
    assert block["queries"] == {"a::1": {"MRR": 0.5}} and block["all"]["MRR"] == pytest.approx(0.5)


@pytest.mark.parametrize("args, lines, message", [
    (["--k", "1,x"], None, "--k must be comma-separated integers"),
    (["--measures", "Recall,ERR"], None, "unknown retrieval measure"),
    ([], ['{"Collection": "c"}'], "r.jsonl:1: a retrieval record needs a task_id"),
    ([], ['{"task_id": "t", "contexts": [{"score": 1}]}'], "contexts must be a list of objects with a document_id"),
    ([], ['{"task_id": "t", "contexts": [{"document_id": "d", "score": "high"}]}'], "a passage score must be a number"),
    ([], ["not json"], "r.jsonl:1: not a JSON object"),
    ([], [], "holds no record"),
])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys, args, lines, message):
    from ragscale.commands.retrieval import main

    results = write(tmp_path / "r.jsonl", "".join(line + "\n" for line in (lines if lines is not None else
                                                                          ['{"task_id": "t", "contexts": []}'])))
    qrels = write(tmp_path / "q.tsv", BEIR + "t\td\t1\n")
    assert main([results, "--qrels", qrels, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragscale retrieval: error: ") and message in err and err.count("\n") == 1


def test_without_pytrec_eval_the_command_names_the_extra(tmp_path, capsys, monkeypatch):
    from ragscale import extras
    from ragscale.commands.retrieval import main

    monkeypatch.setattr(extras, "_found", lambda module: module != "pytrec_eval")
    assert main([write(tmp_path / "r.jsonl", "{}\n"), "--qrels", "q.tsv"]) == 2
    assert 'needs pytrec_eval: pip install "ragscale[retrieval]"' in capsys.readouterr().err
    assert main([write(tmp_path / "r.jsonl", "{}\n"), "--qrels", "a=x", "--qrels", "b"]) == 2


def test_a_beir_id_with_a_space_is_one_id_and_messages_in_full(tmp_path):
    assert read_qrels(write(tmp_path / "s.tsv", BEIR + "q 1\tdoc a-0-5\t1\n")) == {"q 1": {"doc a-0-5": 1}}
    with pytest.raises(UserError) as e:
        read_qrels(write(tmp_path / "t.txt", "q1 0 d1\n"))
    assert str(e.value).endswith("t.txt:1: expected 4 columns (query-id, iteration, doc-id, relevance), or BEIR's "
                                 "header line query-id\\tcorpus-id\\tscore, got 3")
    with pytest.raises(UserError) as e:
        read_collection_qrels({})
    assert str(e.value) == "qrels: give a file, or a mapping of collection to file"
    with pytest.raises(UserError) as e:
        names((1,), ("Recall", "ERR", "nDCG@3"))
    assert str(e.value) == "unknown retrieval measure(s) 'ERR', 'nDCG@3'; known: Recall, nDCG, MAP, P, MRR"
    with pytest.raises(UserError, match="positive integers"):
        names((True,), ("Recall",))  # a bool is not a cut-off
    with pytest.raises(UserError) as e:
        qrels_of_collection({"cloud": {}, "ibmcloud": {}}, "mt-rag-ibmcloud-elser")
    assert str(e.value) == ("collection 'mt-rag-ibmcloud-elser' matches several qrels keys (cloud, ibmcloud); "
                            "name it exactly")


def test_collections_in_name_order_with_the_unnamed_last_and_identical_ids_on_request():
    run = {"a::1": {"a::1": 5.0, "d": 1.0}, "b::1": {"x": 1.0}, "c::1": {"y": 1.0}}
    coll = {"a::1": "zeta", "b::1": None, "c::1": "alpha"}
    qrels = {None: {"a::1": {"d": 1}, "b::1": {"x": 1}, "c::1": {"y": 1}}}
    out = score_collections(qrels, run, coll, k_values=(1,), measures=("Recall",))
    assert list(out["collections"]) == ["alpha", "zeta", "None"]
    assert out["collections"]["zeta"]["Recall@1"] == 1.0  # its own id dropped: d ranks first
    kept = score_collections(qrels, run, coll, k_values=(1,), measures=("Recall",), ignore_identical_ids=False)
    assert kept["collections"]["zeta"]["Recall@1"] == 0.0  # kept, its own id ranks first and is not relevant
    assert run_of([{"task_id": "t", "contexts": []}])[1] == {"t": None}  # no Collection: None, not "None"


def test_a_beir_header_is_tab_separated(tmp_path):
    with pytest.raises(UserError, match=r"s.tsv:1: expected 4 columns .* got 3"):  # read as TREC qrels
        read_qrels(write(tmp_path / "s.tsv", "query-id corpus-id score\nq1 d1 1\n"))


def test_cut_offs_that_are_not_integers_and_a_run_with_nothing_scored():
    for bad in (("3",), (0.5,), (0,), ()):
        with pytest.raises(UserError, match="positive integers"):
            names(bad, ("Recall",))
    out = score_collections({"c": {"x": {"d": 1}}}, {"q": {"d": 1.0}}, {"q": "c"}, k_values=(1,), measures=("Recall",))
    assert out["all"] == {"count": 1, "scored": 0, "Recall@1": None} and out["collections"]["c"]["Recall@1"] is None
