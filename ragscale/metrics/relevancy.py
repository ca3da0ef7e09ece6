"""ragas 0.4.3 answer relevancy's score from embeddings (``ResponseRelevancy._calculate_score``
and ``calculate_similarity`` in ragas/metrics/_answer_relevance.py). Pure numpy.

The embeddings come from the run's encoder or from an OpenAI-compatible endpoint
(``relevancy.embeddings``, ragscale.actors.embeddings_http); the score is the same function of
them. Difference: where ragas' division by a zero-length embedding gives NaN (with a numpy
warning), this returns ``None`` quietly.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def answer_relevancy_score(question_vec: Sequence[float], generated_vecs: Sequence[Sequence[float]],
                           generated: Sequence[str], noncommittal: Sequence[int]) -> float | None:
    """Mean cosine similarity between the question's embedding and each generated question's,
    times 0 when every generation is noncommittal (``np.all``); ``None`` when every generated
    question is empty or there is none, or an embedding has zero length (ragas: NaN)."""
    if not generated or all(q == "" for q in generated):
        return None
    q = np.asarray(question_vec, dtype=float).reshape(1, -1)
    g = np.asarray(generated_vecs, dtype=float).reshape(len(generated), -1)
    norms = np.linalg.norm(g, axis=1) * np.linalg.norm(q, axis=1)
    if not norms.all():
        return None
    cos = (g @ q.T).reshape(-1) / norms
    return float(cos.mean() * int(not np.all(noncommittal)))
