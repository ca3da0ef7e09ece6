"""open-rag-eval's TREC math (ragscale/metrics/trec.py): retrieval metrics from UMBRELA grades
and citation precision/recall/F1, against hand-computed values and, where the reference repo is
mirrored locally, against open-rag-eval's own code."""

import random

import pytest

from ragscale.metrics.trec import (
    average_precision_at_k,
    citation_scores,
    precision_at_k,
    reciprocal_rank,
    retrieval_metrics,
    umbrela_mean,
)

from conftest import orag_namespace

G = [3, 0, 2, 1, 2]  # relevant (>= 2) at ranks 1, 3, 5


@pytest.mark.parametrize(
    "grades, k, expected",
    [
        (G, 1, 1.0),
        (G, 3, 2 / 3),
        (G, 5, 3 / 5),
        (G, 0, 0.0),  # open-rag-eval: "if k > 0 else 0.0"
        (G, 6, None),  # K beyond the passages: open-rag-eval leaves it out
        ([0, 1, 2, 3], 1, 0.0),
        ([0, 1, 2, 3], 3, 1 / 3),
        ([], 1, None),
        ([], 0, None),
        ([None, 3], 1, None),  # an unknown grade in the top K
        ([3, None], 1, 1.0),  # ... only below it
        ([3, None], 2, None),
    ],
)
def test_precision_at_k(grades, k, expected):
    got = precision_at_k(grades, k)
    assert got == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(
    "grades, k, expected",
    [
        (G, 1, 1.0),
        (G, 3, (1 / 1 + 2 / 3) / 2),
        (G, 5, (1 / 1 + 2 / 3 + 3 / 5) / 3),
        ([0, 1, 2, 3], 1, 0.0),  # nothing relevant in the top K
        ([0, 1, 2, 3], 3, (1 / 3) / 1),
        ([0, 1, 2, 3], 4, (1 / 3 + 2 / 4) / 2),
        # denominator = relevant in the top K (1), not all relevant (3) nor K (3)
        ([0, 0, 3, 3, 3], 3, 1 / 3),
        ([0, 0, 0], 3, 0.0),
        (G, 0, 0.0),
        (G, 6, None),
        ([], 1, None),
        ([2, None, 3], 1, 1.0),
        ([2, None, 3], 3, None),
    ],
)
def test_average_precision_at_k(grades, k, expected):
    got = average_precision_at_k(grades, k)
    assert got == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(
    "grades, expected",
    [
        (G, 1.0),
        ([0, 1, 2, 3], 1 / 3),
        ([1, 0, 1, 1, 0, 3], 1 / 6),  # no K cut-off
        ([0, 1, 1], 0.0),  # nothing relevant
        ([], None),
        ([0, None, 3], None),  # the first relevant one might be rank 2
        ([0, 3, None], 0.5),  # an unknown grade after the first relevant one changes nothing
        ([None], None),
    ],
)
def test_reciprocal_rank(grades, expected):
    got = reciprocal_rank(grades)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_threshold_is_configurable():
    assert precision_at_k(G, 5, threshold=3) == pytest.approx(1 / 5)
    assert average_precision_at_k(G, 5, threshold=3) == 1.0
    assert reciprocal_rank([0, 1, 2], threshold=1) == 0.5
    assert precision_at_k([0, 1, 2], 3, threshold=1) == pytest.approx(2 / 3)


@pytest.mark.parametrize("k", [-1, 1.5, True, "3"])
def test_bad_k_raises(k):
    with pytest.raises(ValueError):
        precision_at_k(G, k)
    with pytest.raises(ValueError):
        average_precision_at_k(G, k)


@pytest.mark.parametrize(
    "grades, expected",
    [([3, 0, 2], 5 / 3), ([None, 2, 3], 2.5), ([0], 0.0), ([None, None], None), ([], None)],
)
def test_umbrela_mean(grades, expected):
    got = umbrela_mean(grades)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_retrieval_metrics_flattens_open_rag_eval_precision_metrics():
    assert retrieval_metrics([3, 0]) == {
        "precision@1": 1.0, "AP@1": 1.0,
        "precision@3": None, "AP@3": None,
        "precision@5": None, "AP@5": None,
        "MRR": 1.0,
    }
    got = retrieval_metrics(G, k_values=[2, 5], threshold=2)
    assert list(got) == ["precision@2", "AP@2", "precision@5", "AP@5", "MRR"]
    assert got["precision@2"] == 0.5 and got["AP@2"] == 1.0 and got["AP@5"] == pytest.approx(34 / 45)
    assert retrieval_metrics([]) == {k: None for k in retrieval_metrics([3, 0])}


# --- citation scores -------------------------------------------------------------------

F, P, N = "full_support", "partial_support", "no_support"


@pytest.mark.parametrize(
    "parts, precision, recall, f1",
    [
        ([[("[1]", F)], [("[2]", P)]], 0.75, 0.75, 0.75),
        # "[1]" cited by two parts is one citation: (1 + 0.5) / 2; "[2]": 0 -> P = 0.375;
        # parts: (1 + 0) / 2 and 0.5 -> R = 0.5
        ([[("[1]", F), ("[2]", N)], [("[1]", P)]], 0.375, 0.5, 2 * 0.375 * 0.5 / 0.875),
        ([[("[1]", F)], []], 1.0, 0.5, 2 / 3),  # an uncited part counts 0 in recall
        ([[("[9]", None)], [("[1]", F)]], 1.0, 1.0, 1.0),  # a part with only unknown ids is not counted
        ([[("[9]", None), ("[1]", N)]], 0.0, 0.0, 0.0),  # the unknown id is skipped, the other counts
        ([[("[1]", F), ("[1]", F), ("[2]", N)]], 0.5, 2 / 3, 4 / 7),  # a repeated citation counts twice
        ([[]], 0.0, 0.0, 0.0),  # an answer without citations
        ([[], []], 0.0, 0.0, 0.0),
        ([], 0.0, 0.0, 0.0),  # an answer without parts
        ([[("[9]", None)]], 0.0, 0.0, 0.0),  # nothing judged at all
        ([[("[1]", P)], [("[2]", P)], []], 0.5, 1 / 3, 0.4),
    ],
)
def test_citation_scores(parts, precision, recall, f1):
    s = citation_scores(parts)
    assert s["precision"] == pytest.approx(precision)
    assert s["recall"] == pytest.approx(recall)
    assert s["f1"] == pytest.approx(f1)


def test_citation_scores_details_and_weights():
    s = citation_scores([[("[1]", F), ("[2]", N)], [], [("[9]", None)], [("[1]", P)]])
    assert s["citation_averages"] == {"[1]": 0.75, "[2]": 0.0}
    assert s["part_averages"] == [0.5, 0.0, None, 0.5]
    s = citation_scores([[("[1]", "partial_support")]], weights={"full_support": 1, "partial_support": 0.25,
                                                                  "no_support": 0})
    assert s["precision"] == s["recall"] == s["f1"] == 0.25
    with pytest.raises(ValueError):
        citation_scores([[("[1]", "supported")]])


# --- against open-rag-eval's own code (only where its repository is mirrored) ------------------




def test_retrieval_metrics_equal_open_rag_eval():
    metric_cls = orag_namespace("open_rag_eval/metrics/umbrela_metric.py")["UMBRELAMetric"]
    metric = metric_cls.__new__(metric_cls)
    metric._umbrela_relevant_threshold = 2
    rng = random.Random(7)
    for _ in range(300):
        grades = [rng.randint(0, 3) for _ in range(rng.randint(1, 8))]
        k_values = sorted(rng.sample(range(0, 10), 3))
        ref = {"umbrela_scores": {f"[{i + 1}]": g for i, g in enumerate(grades)}}
        metric.add_retrieval_metrics(ref, k_values)
        ours = retrieval_metrics(grades, k_values)
        theirs = ref["retrieval_scores"]
        assert ours["MRR"] == theirs["MRR"]
        for k in k_values:
            assert ours[f"precision@{k}"] == theirs["precision@"].get(str(k))
            assert ours[f"AP@{k}"] == theirs["AP@"].get(str(k))
