"""UMBRELA in the qrels' holes (ragscale/metrics/qrels_fill.py, ``ragscale retrieval --fill umbrela``):
which passages are holes, what a hole gets on a binary and on a graded scale, and Cohen's kappa
against scikit-learn's ``cohen_kappa_score`` (what castorini/umbrela prints) on constructed grades."""

from __future__ import annotations

import json
import random

import pytest

from ragscale.metrics.qrels_fill import agreement, cohen_kappa, fill, is_binary, umbrela_grades

BEIR = "query-id\tcorpus-id\tscore\n"


def rec(task, docs, grades, **more):
    return {"task_id": task, "contexts": [{"document_id": d, "text": d} for d in docs],
            "metrics": {"umbrela_scores": grades}, **more}


def test_grades_are_read_per_passage_and_records_without_them_counted():
    grades, without = umbrela_grades([
        rec("c<::>1", ["d1", "d2", "d3"], [3, None, 0]),  # a failed prompt: no grade
        rec("c::2", ["d1"], [1, 2]),  # not one grade per passage
        {"task_id": "c::3", "contexts": [{"document_id": "x"}], "metrics": {}},
    ])
    assert grades == {"c::1": {"d1": 3, "d3": 0}} and without == 2


def test_holes_of_judged_queries_are_filled_on_the_qrels_scale():
    grades = {"q1": {"a": 3, "b": 2, "c": 1}, "q2": {"z": 3}}
    binary = {"q1": {"a": 1, "x": 0}}
    filled, pairs, counts = fill(binary, grades)
    # binary qrels: a hole is relevant (1) from UMBRELA grade 2; q2 has no qrels: not filled
    assert filled == {"q1": {"a": 1, "x": 0, "b": 1, "c": 0}} and pairs == [(1, 3)]
    assert counts == {"holes": 2, "holes_relevant": 1, "judged": 1, "binary_qrels": True}
    assert binary == {"q1": {"a": 1, "x": 0}}  # the human qrels are left as they were
    graded = {"q1": {"a": 2}}
    filled, pairs, counts = fill(graded, grades)
    assert filled == {"q1": {"a": 2, "b": 2, "c": 1}} and pairs == [(2, 3)] and not counts["binary_qrels"]
    assert is_binary({}) and not is_binary({"q": {"d": 3}})


@pytest.mark.filterwarnings("ignore:::sklearn.*")  # scikit-learn's notes on a single label (n = 1)
def test_kappa_equals_scikit_learns_on_constructed_grades():
    sk = pytest.importorskip("sklearn.metrics")
    rng = random.Random(7)
    for n in (1, 2, 5, 40, 300):
        human = [rng.choice([0, 1, 2, 3]) for _ in range(n)]
        llm = [h if rng.random() < 0.6 else rng.choice([0, 1, 2, 3]) for h in human]
        want = sk.cohen_kappa_score(human, llm)
        got = cohen_kappa(human, llm)
        assert (got is None) if want != want else got == pytest.approx(want, abs=1e-12)
        binary = agreement(list(zip(human, llm)), binary_qrels=False)["kappa_binary"]
        want = sk.cohen_kappa_score([int(h > 1) for h in human], [int(g > 1) for g in llm])  # umbrela's calculate_kappa
        assert (binary is None) if want != want else binary == pytest.approx(want, abs=1e-12)


def test_kappa_by_hand_and_where_it_is_undefined():
    # p_o = 3/4; p_e = (2*2 + 2*2) / 16 = 1/2 -> kappa 0.5
    assert cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0][:3] + [0]) == pytest.approx(0.5)
    assert cohen_kappa([1, 1, 0, 0], [1, 1, 0, 0]) == 1.0
    assert cohen_kappa([], []) is None and cohen_kappa([2, 2], [2, 2]) is None
    with pytest.raises(ValueError):
        cohen_kappa([1], [1, 2])


def test_agreement_on_binary_qrels_counts_a_human_1_as_relevant():
    pairs = [(1, 3), (1, 2), (0, 0), (0, 1), (1, 1)]
    a = agreement(pairs, binary_qrels=True)
    assert a["human_relevant_from"] == 1 and a["umbrela_relevant_from"] == 2 and a["pairs"] == 5
    # binarized: human 1 1 0 0 1, UMBRELA 1 1 0 0 0: p_o 4/5, p_e (3*2 + 2*3) / 25
    assert a["kappa_binary"] == pytest.approx((0.8 - 12 / 25) / (1 - 12 / 25))
    assert a["confusion"] == {"0,0": 1, "0,1": 1, "1,1": 1, "1,2": 1, "1,3": 1}
    assert a["relevant_found"] == pytest.approx(2 / 3) and a["nonrelevant_found"] == 1.0
    only_relevant = agreement([(1, 3), (1, 0)], binary_qrels=True)  # MT-RAG's qrels list relevant passages only
    assert only_relevant["kappa_binary"] == 0.0 and only_relevant["relevant_found"] == 0.5
    assert only_relevant["nonrelevant_found"] is None


def test_the_command_scores_the_filled_qrels_and_prints_the_kappa(tmp_path, capsys):
    pytest.importorskip("pytrec_eval", reason="the retrieval extra")
    from ragscale.commands.retrieval import main

    results = tmp_path / "records.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in [
        rec("a::1", ["d1", "d2"], [3, 0], Collection="c"),  # d1 is a hole, graded 3: relevant once filled
        rec("a::2", ["d3", "d4"], [2, 0], Collection="c")]))
    qrels = tmp_path / "q.tsv"
    qrels.write_text(BEIR + "a::1\td2\t1\na::2\td3\t1\na::2\td4\t0\n")
    assert main([str(results), "--qrels", str(qrels), "--k", "1", "--fill", "umbrela"]) == 0
    out = capsys.readouterr().out
    assert "| all (weighted by tasks) | 2 | 2 | 0.5000 | 0.5000 |" in out  # human: a::1's d1 counts as non-relevant
    assert "qrels filled by UMBRELA" in out
    assert "| all (weighted by tasks) | 2 | 2 | 0.7500 | 1.0000 |" in out  # a::1: d1 relevant, Recall@1 1/2
    assert "on 3 passage(s) both judged" in out and "1 hole(s) filled by UMBRELA (1 relevant)" in out
    assert "UMBRELA finds 50% of the human-relevant passages relevant and 100% of the others non-relevant" in out
    assert main([str(results), "--qrels", str(qrels), "--fill", "umbrela", "--json"]) == 0
    block = json.loads(capsys.readouterr().out)[str(results)]["filled"]
    assert block["fill"]["holes"] == 1 and block["agreement"]["pairs"] == 3
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"task_id": "a::1", "contexts": [{"document_id": "d1"}]}) + "\n")
    assert main([str(plain), "--qrels", str(qrels), "--fill", "umbrela"]) == 2
    assert "holds no UMBRELA grades" in capsys.readouterr().err


def test_a_query_without_qrels_does_not_stop_the_others_being_filled():
    filled, pairs, counts = fill({"b": {"x": 1}}, {"a": {"y": 3}, "b": {"z": 3}})
    assert filled == {"b": {"x": 1, "z": 1}} and counts["holes"] == 1


def test_the_filled_block_sums_every_collections_fill_and_scores_as_asked():
    from ragscale.metrics.qrels_fill import filled_block

    records = [rec("a::1", ["d1", "d2"], [3, 0], Collection="alpha"), rec("b::1", ["e1", "e2"], [2, 3], Collection="beta"),
               {"task_id": "b::2", "contexts": [{"document_id": "e9"}], "metrics": {}}]
    qrels = {"alpha": {"a::1": {"d2": 1}}, "beta": {"b::1": {"e1": 1}}}
    run = {"a::1": {"d1": 2.0, "d2": 1.0}, "b::1": {"e1": 2.0, "e2": 1.0}}
    block = filled_block(records, qrels, run, {"a::1": "alpha", "b::1": "beta"}, {"k_values": [1], "measures": ["P"]})
    assert block["measures"] == ["P@1"]
    assert block["fill"] == {"holes": 2, "holes_relevant": 2, "judged": 2, "records_without_grades": 1,
                             "binary_qrels": True}
    assert block["agreement"]["pairs"] == 2 and block["agreement"]["confusion"] == {"1,0": 1, "1,2": 1}
    assert filled_block(records[2:], qrels, run, {}, {}) is None
    with pytest.raises(ValueError, match="^1 labels against 2$"):
        cohen_kappa([1], [1, 2])
