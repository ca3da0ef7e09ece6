"""Edge cases of the metric modules that mutation testing found unpinned (make mutate):
consistency statistics and grouping, the custom metrics' keyword rules, MT-RAG's extractiveness
normalisation, the TREC helpers' thresholds and citation parsing, taxonomy's missing labels, and
the messages of the checks that reject bad values."""

from __future__ import annotations

import numpy as np
import pytest

from ragscale.metrics import consistency as cons
from ragscale.metrics import custom, lexical, nuggets, taxonomy, trec
from ragscale.metrics.conditioning import harmonic_mean

# ---------------------------------------------------------------- consistency


def test_describe_median_and_iqr_use_numpys_linear_percentile():
    d = cons.describe([8, 1, 4, 2])  # sorted 1 2 4 8
    assert d["median"] == 3.0  # position 1.5: 2 + (4 - 2) * 0.5
    assert d["iqr"] == pytest.approx(5.0 - 1.75)  # q75 at 2.25: 4 + 4 * .25 = 5; q25 at 0.75: 1.75
    assert d["iqr"] == pytest.approx(float(np.percentile([1, 2, 4, 8], 75) - np.percentile([1, 2, 4, 8], 25)))
    assert cons.describe([1, 2, 4])["iqr"] == pytest.approx(3.0 - 1.5)


def test_run_of_falls_back_to_the_record_key():
    assert cons.run_of({"query_run": 2, "ragscale": {"record_key": "f:1"}}) == 2
    assert cons.run_of({"ragscale": {"record_key": "f:7"}}) == "f:7"
    assert cons.run_of({}) is None


def test_group_key_query_id_then_task_id_else_none():
    assert cons.group_key({"model_id": "m", "query_id": "q", "task_id": "t"}) == ("m", "q")
    assert cons.group_key({"model_id": "m", "task_id": 5}) == ("m", "5")
    assert cons.group_key({"model_id": "m"}) is None


def test_numeric_metrics_leave_out_per_passage_vectors():
    assert cons.numeric_metrics(["umbrela_scores", "umbrela_mean", "not_a_declared_metric"]) == [
        "umbrela_mean", "not_a_declared_metric"]


def test_collector_keeps_groups_of_two_runs_and_asks_scalar_per_metric():
    seen = []

    def scalar(name, value):
        seen.append(name)
        return None if value is None else float(value)

    c = cons.GroupCollector(["a", "b"], scalar)
    for run, (a, b) in enumerate([(1, 10), (3, 30)], start=1):
        c.add({"model_id": "m", "query_id": "q", "query_run": run, "generated_answer": "x",
               "metrics": {"a": a, "b": b}, "ragscale": {"record_key": f"k{run}"}})
    c.add({"model_id": "m", "query_id": "lonely", "query_run": 1, "metrics": {"a": 1}, "ragscale": {}})
    (g,) = c.result()  # two runs are repeated runs (consistency.min_runs cuts later); one run is not
    assert g["query_id"] == "q" and g["runs"] == [1, 2]
    assert g["values"] == {"a": [1.0, 3.0], "b": [10.0, 30.0]}
    assert seen[:4] == ["a", "b", "a", "b"]


def test_finish_group_names_its_fields():
    group = {"model_id": "m", "query_id": "q", "runs": [1, 2], "answers": ["the cat sat", "the cat sat"],
             "values": {"a": [1.0, 3.0], "never": [None, None]}}
    out = cons.finish_group(group, [0.9], 2)
    assert (out["model_id"], out["query_id"], out["runs"], out["answered_runs"], out["pairs"]) == ("m", "q", [1, 2], 2, 1)
    assert out["pairwise"] == {"bert_score_f1": [0.9], "rouge_score": [pytest.approx(1.0, abs=1e-8)],
                               "rouge1": [1.0], "rouge2": [1.0], "rougeL": [1.0]}
    assert out["similarity"]["bert_score"]["mean"] == 0.9 and set(out["metrics"]) == {"a"}
    assert cons.finish_group(group, None, 2)["pairwise"]["bert_score_f1"] == []
    short = cons.finish_group(group, None, 3)  # fewer answered runs than min_runs: no pairs, statistics kept
    assert short["pairs"] == 0 and short["answered_runs"] == 2 and short["pairwise"]["rouge_score"] == []
    assert short["similarity"]["rouge_score"] is None and short["metrics"]["a"]["n"] == 2


def test_summarize_counts_queries_and_averages_std_and_cv():
    def g(model, a_vals):
        return {"model_id": model, "similarity": {"rouge1": cons.describe([0.5]), "bert_score": None},
                "metrics": {"a": cons.describe(a_vals)}}

    out = cons.summarize([g("m", [1.0, 3.0]), g("m", [0.0, 0.0]), g("n", [2.0, 2.0])])
    m = out["m"]
    assert m["queries"] == 2 and out["n"]["queries"] == 1
    assert m["a_std"] == pytest.approx((1.0 + 0.0) / 2)  # the mean of the per-query std
    assert m["a_cv"] == pytest.approx(0.5)  # the all-zero query has no cv and is left out
    assert m["rouge1_mean"] == 0.5 and "bert_score_mean" not in m


# ---------------------------------------------------------------- custom metrics


def test_normalize_lowercases_and_collapses_whitespace():
    assert custom.normalize("  The   Cat\tSat \n") == "the cat sat"


def test_answer_completeness_caps_the_length_ratio_at_one():
    # 4 generated words for 2 expected: length ratio 1 (not 2); both keywords found
    assert custom.answer_completeness("alpha beta gamma delta", "alpha beta") == 1.0


def test_contains_phrase_of_nothing_is_false():
    assert custom.contains_phrase("", "anything") is False
    assert custom.contains_phrase("  ", "anything") is False


def test_keyword_coverage_finds_a_phrase_written_in_lowercase():
    # "peak season surcharge" is a phrase of the expected answer, not of the lowercase answer;
    # contains_phrase finds it there (whitespace runs allowed)
    assert custom.keyword_coverage("the peak  season surcharge applies", "Peak Season Surcharge applies") == 1.0


def test_phrases_drop_a_trailing_dot_or_dash():
    assert custom.phrases("See Rule C-1.") == {"rule c-1"}
    assert custom.phrases("Zone 4-") == {"zone 4"}


# ---------------------------------------------------------------- lexical, conditioning, nuggets, trec


def test_mtrag_extractiveness_normalisation():
    assert lexical._strip_newline_words("Hello,\nWorld!") == "hello world"


def test_harmonic_mean_of_a_negative_value_names_it():
    with pytest.raises(ValueError, match=r"harmonic mean of negative values: \[0.5, -1\]"):
        harmonic_mean([0.5, -1])


def test_nugget_label_checks_say_what_is_wrong():
    with pytest.raises(ValueError, match="1 assignments for 2 nuggets"):
        nuggets.nugget_scores(["vital", "okay"], ["support"])
    with pytest.raises(ValueError, match="importance 'big' is not one of"):
        nuggets.nugget_scores(["big"], ["support"])
    with pytest.raises(ValueError, match="assignment 'yes' is not one of"):
        nuggets.nugget_scores(["vital"], ["yes"])
    with pytest.raises(ValueError, match="1 importance labels for 2 nuggets"):
        nuggets.autonugget_scores(["a", "b"], ["vital"], ["support"])


def test_trec_checks_say_what_is_wrong():
    with pytest.raises(ValueError, match="k must be a non-negative integer, got -1"):
        trec.precision_at_k([3], -1)
    with pytest.raises(ValueError, match="unknown support label 'maybe'"):
        trec.citation_scores([[("1", "maybe")]])


def test_an_unjudged_citation_does_not_hide_the_next_one():
    out = trec.citation_scores([[("9", None), ("1", "full_support")]])
    assert out["part_averages"] == [1.0] and out["recall"] == 1.0


def test_a_two_character_uncited_tail_is_a_part():
    parts = trec.parse_generated_answer("Yes [1] ok")
    assert parts == [{"text": "Yes", "citations": ["[1]"]}, {"text": "ok", "citations": []}]
    assert trec.parse_generated_answer("Yes [1] .") == [{"text": "Yes", "citations": ["[1]"]}]


def test_retrieval_metrics_pass_the_threshold_on():
    out = trec.retrieval_metrics([1, 0], k_values=(1,), threshold=1)
    assert out == {"precision@1": 1.0, "AP@1": 1.0, "MRR": 1.0}
    assert trec.retrieval_metrics([1, 0], k_values=(1,)) == {"precision@1": 0.0, "AP@1": 0.0, "MRR": 0.0}


# ---------------------------------------------------------------- taxonomy


def test_retrieval_scores_are_none_where_a_label_is_missing():
    chunks = [{"topically_relevant": 1, "evidence_sufficient": 1, "misleading": 0}, {"topically_relevant": None}]
    out = taxonomy.retrieval_scores(chunks)
    assert all(v is None for v in out.values()), out
