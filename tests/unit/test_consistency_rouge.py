"""open-rag-eval's consistency ROUGE-L (``rouge_score``) as ragscale computes it
(ragscale/metrics/consistency.py ``rouge_l_f``, ``rouge_score_pair``): equal to the ``rouge``
package (1.0.1, which open-rag-eval calls) on real answers and on edge cases, equal to
open-rag-eval's own ROUGEScoreSimilarityMetric executed from the mirror, and by hand.
Without the package the comparisons skip (under CI=true they fail: `make test` installs it)."""

from __future__ import annotations

import ast
import csv
import glob
import json
import os
from types import SimpleNamespace

import pytest

from conftest import ORAG_COMMIT, ROOT, SHARED, reference_source, unavailable
from ragscale.metrics.consistency import (answered, collect_groups, finish_group, rouge_l_f, rouge_score_pair,
                                          rouge_sentences, scored)

DATA = os.path.join(ROOT, "ragscale", "data")


@pytest.fixture(scope="module")
def rouge():
    """The ``rouge`` package's scorer, as open-rag-eval builds it (``Rouge()``)."""
    try:
        from rouge import Rouge
    except ImportError:
        unavailable("the rouge package (1.0.1) is not installed: pip install 'ragscale[reference]'")
    return Rouge()


def package_f(rouge, hyp: str, ref: str):
    """The package's rouge-l f, or ("raises", message) as open-rag-eval would catch it."""
    try:
        return rouge.get_scores(hyp, ref)[0]["rouge-l"]["f"]
    except ValueError as e:
        return ("raises", str(e))


def ours_f(hyp: str, ref: str):
    try:
        return rouge_l_f(hyp, ref)
    except ValueError as e:
        return ("raises", str(e))


def real_answers() -> list[str]:
    """Answers (and MT-RAG reference answers) from the bundled samples and, where present, the
    shared data: open-rag-eval CSVs' generated_answer, JSONL records' answers and targets."""
    from ragscale.record import answer_of

    def files(ext: str) -> list[str]:
        return sorted(glob.glob(os.path.join(DATA, f"*.{ext}"))) + sorted(glob.glob(os.path.join(SHARED, "data", "*",
                                                                                             f"*.{ext}")))

    texts: list[str] = []
    for path in files("csv"):
        with open(path, newline="", encoding="utf-8-sig") as fh:
            texts += [r["generated_answer"] for r in csv.DictReader(fh) if (r.get("generated_answer") or "").strip()]
    for path in files("jsonl"):
        with open(path, encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if i >= 40:
                    break
                rec = json.loads(line)
                answer = answer_of(rec)
                texts += [answer] if isinstance(answer, str) and answer.strip() else []
                texts += [t["text"] for t in rec.get("targets") or [] if isinstance(t, dict) and t.get("text")][:1]
    return list(dict.fromkeys(texts))


EDGE = ["", " ", "\n", ".", "...", ". . .", " . ", "word", "Word", "word.", ".word", "!!!", "?", ",", "--", "a.b",
        "a..b", "a . . b", "Paris", "paris,", "Paris.", "the the the", "the", "x\xa0y", "x\ty\nz", "é",
        "Ünïcode wörds"]


def test_edge_cases_equal_the_package_including_its_errors(rouge):
    for hyp in EDGE:
        for ref in EDGE:
            assert ours_f(hyp, ref) == package_f(rouge, hyp, ref), (hyp, ref)
    assert ours_f("", "x") == ("raises", "Hypothesis is empty.")  # the package raises; open-rag-eval skips the pair
    assert ours_f("x", "...") == ("raises", "Reference is empty.")


def test_real_answers_equal_the_package_both_directions(rouge):
    texts = real_answers()
    assert len(texts) >= 30  # the bundled samples alone give 57
    compared = 0
    for i in range(len(texts)):
        for j in (i + 1, i + 7, i + 29):  # neighbours (often the same query) and far ones
            if j < len(texts):
                a, b = texts[i], texts[j]
                assert ours_f(a, b) == package_f(rouge, a, b), (a, b)  # exact, not approx
                assert ours_f(b, a) == package_f(rouge, b, a), (b, a)
                compared += 1
    assert compared >= 60


def test_text_equal_to_itself_scores_one_and_disjoint_zero(rouge):
    text = real_answers()[0]
    assert rouge_l_f(text, text) == pytest.approx(1.0, abs=1e-7) == package_f(rouge, text, text)
    assert rouge_l_f("alpha beta", "gamma delta") == 0.0 == package_f(rouge, "alpha beta", "gamma delta")


def test_by_hand_sentences_distinct_words_and_the_lcs_it_walks_back():
    # rouge 1.0.1's own docstring example (_union_lcs): r = w1..w5, c1 = w1 w2 w6 w7 w8, c2 = w1 w3 w8 w9 w5;
    # the union LCS is {w1, w2, w3, w5}: R = 4/5, P = 4/8 (distinct hypothesis words)
    f = rouge_l_f("w1 w2 w6 w7 w8. w1 w3 w8 w9 w5", "w1 w2 w3 w4 w5")
    assert f == 2.0 * ((0.5 * 0.8) / (0.5 + 0.8 + 1e-8))
    # words are counted once (exclusive sets): "a a a" against "a a" is a perfect match
    assert rouge_l_f("a a a", "a a") == 2.0 * (1.0 / (2.0 + 1e-8))
    # case-sensitive, punctuation other than "." kept on the word
    assert rouge_l_f("Paris", "paris") == 0.0 and rouge_l_f("Paris,", "Paris") == 0.0
    assert rouge_l_f("Paris.", "Paris") == rouge_l_f("Paris", "Paris")
    # the LCS the walk-back picks decides the words: b c b -> {b, c}, the other way -> {b}
    assert rouge_l_f("b c b", "b b c") == 2.0 * (1.0 / (2.0 + 1e-8))
    assert rouge_l_f("b b c", "b c b") == 2.0 * (0.25 / (1.0 + 1e-8))
    assert rouge_score_pair("b c b", "b b c") == pytest.approx(0.75, abs=1e-7)  # open-rag-eval's mean of both


def test_sentences_split_on_dots_and_whitespace_pieces_are_one_empty_token():
    assert rouge_sentences("A b. C\td.") == [["A", "b"], ["C", "d"]]
    assert rouge_sentences("a. . b") == [["a"], [""], ["b"]]
    assert rouge_sentences("...") == [] and rouge_sentences("") == []
    assert rouge_sentences("3.14 is pi") == [["3"], ["14", "is", "pi"]]


def test_pair_is_none_where_the_package_raises():
    assert rouge_score_pair("...", "an answer") is None and rouge_score_pair("an answer", "") is None
    assert rouge_score_pair("one two", "two one") == pytest.approx(
        (rouge_l_f("one two", "two one") + rouge_l_f("two one", "one two")) / 2)


# ------------------------------------------------- open-rag-eval's own metric, from the mirror

def orag_rouge_metric():
    """open-rag-eval's ROUGEScoreSimilarityMetric at ORAG_COMMIT, its package imports stubbed."""
    path = "open_rag_eval/metrics/rouge_score_similarity_metric.py"
    tree = ast.parse(reference_source("open-rag-eval", path, ORAG_COMMIT))
    tree.body = [n for n in tree.body
                 if not (isinstance(n, ast.ImportFrom) and (n.module or "").startswith("open_rag_eval"))]
    ns: dict = {"PairwiseAnswerSimilarityMetric": object, "MultiRAGResult": object, "ROUGE_SCORE": "rouge_score"}
    exec(compile(tree, path, "exec"), ns)
    return ns["ROUGEScoreSimilarityMetric"]()


def multi_result(answers: list[str]):
    return SimpleNamespace(rag_results=[
        SimpleNamespace(generation_result=SimpleNamespace(generated_answer=[SimpleNamespace(text=a)] if a else []))
        for a in answers])


def test_metric_name_is_open_rag_eval_s():
    ns: dict = {}
    exec(reference_source("open-rag-eval", "open_rag_eval/utils/constants.py", ORAG_COMMIT), ns)
    out = finish_group({"model_id": "m", "query_id": "q", "runs": [1, 2, 3], "answers": ["a", "b", "c"], "values": {}},
                       [0.5, 0.5, 0.5], 3)
    assert {ns["ROUGE_SCORE"], ns["BERT_SCORE"]} <= set(out["similarity"])


def test_groups_equal_open_rag_eval_s_metric(rouge):
    from ragscale.io.orag_csv import read_records

    metric = orag_rouge_metric()
    groups = collect_groups(read_records(os.path.join(DATA, "trec_sample.csv")), [], lambda m, v: v)
    groups.append({"model_id": "m", "query_id": "dots", "runs": [1, 2, 3, 4, 5], "values": {},
                   "answers": ["The sky is blue [1].", "...", "", "The sky looks blue. Rayleigh scattering.", "Blue."]})
    texts = real_answers()
    groups.append({"model_id": "m", "query_id": "real", "runs": list(range(6)), "values": {}, "answers": texts[:6]})
    checked = 0
    for g in groups:
        if not scored(g, 3):  # open-rag-eval's evaluator returns no scores for fewer than 3 runs
            continue
        ref = metric.compute(multi_result(g["answers"]))
        ours = finish_group(g, None, 3)["pairwise"]["rouge_score"]
        assert [v for v in ours if v is not None] == ref, g["query_id"]  # pairs it skips are None here
        checked += 1
    assert checked == 3  # "sky" (3 runs in the sample), "dots" (a dots-only answer: its pairs skipped), "real"
    two = {"model_id": "m", "query_id": "two", "runs": [1, 2, 3], "values": {}, "answers": ["a b", "", "a c"]}
    assert metric.compute(multi_result(two["answers"])) == [] and answered(two, 3) == []  # 2 answers: no pairs
    assert finish_group(two, None, 3)["pairs"] == 0
