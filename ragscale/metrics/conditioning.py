"""MT-RAG step 5, IDK conditioning (seed "MT-RAG Evaluation Metrics Reference";
IBM/mt-rag-benchmark ``judge_wrapper.get_idk_score``)."""

from __future__ import annotations

IDK_EXPECTED = ("UNANSWERABLE", "CONVERSATIONAL")


def idk_conditioned(answerability: str | None, idk_eval: float | None, value: float | None) -> float | None:
    """The IDK-conditioned version of a metric value.

    Unanswerable or conversational: 1 if the response is a full IDK (``idk_eval == 1``),
    else 0. Otherwise a full IDK scores 0 and anything else keeps the metric's value.
    ``None`` when ``idk_eval`` is missing (the IDK judge failed for the record).
    """
    if idk_eval is None:
        return None
    if answerability in IDK_EXPECTED:
        return 1.0 if idk_eval == 1 else 0.0
    if idk_eval == 1:
        return 0.0
    return value
