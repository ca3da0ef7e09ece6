"""Derived MT-RAG scores over other metrics (seed "MT-RAG Evaluation Metrics Reference")."""

from __future__ import annotations

from typing import Any, Mapping
from ragscale.metrics.registry import UNIT, MetricSpec, declare


def rb_agg(metrics: Mapping[str, Any]) -> tuple[float, bool]:
    """``RB_agg`` and ``RB_agg_zero_denominator`` (MT-RAG ``run_algorithmic.rb_agg``).

    recall = (BertscoreR[0] + 1) / 2 (MT-RAG falls back to Recall[0] without BERTScore),
    rouge = RougeL_stemFalse[0], extractiveness = (max(BertKPrec) + 1) / 2 with ``None``
    passages counted as 0, or 0 when there are no passages; the harmonic mean of the
    three. As in MT-RAG the score is 0 as soon as one component is 0; the flag says
    whether the harmonic-mean denominator itself was 0 (two or more components 0).
    """
    bert_r = metrics.get("BertscoreR")
    recall = (bert_r[0] + 1) / 2 if bert_r else metrics["Recall"][0]
    rouge = metrics["RougeL_stemFalse"][0]
    kprec = metrics.get("BertKPrec")
    extract = (max(0.0 if v is None else v for v in kprec) + 1) / 2 if kprec else 0.0
    denominator = recall * rouge + recall * extract + rouge * extract
    if rouge == 0 or recall == 0 or extract == 0:
        return 0.0, denominator == 0
    return 3 * recall * rouge * extract / denominator, False


# MT-RAG adds RB_agg only when these four evaluators are configured.
declare(
    MetricSpec("RB_agg", "derive", "algorithmic", needs=("reference",), bounds=UNIT,  # MT-RAG: a harmonic mean of 0..1 scores
               requires=("Recall", "RougeL_stemFalse", "BertscoreR", "BertKPrec"), reference="IBM/mt-rag-benchmark scripts/evaluation/run_algorithmic.py",
               derive=lambda d: [rb_agg(d.metrics)[0]]),
    MetricSpec("RB_agg_zero_denominator", "derive", "algorithmic", dtype="bool", needs=("reference",),
               requires=("RB_agg",), higher_is_better=None, short="RB0", reference="ragscale: RB_agg's denominator was 0",
               derive=lambda d: [rb_agg(d.metrics)[1]]),
)
