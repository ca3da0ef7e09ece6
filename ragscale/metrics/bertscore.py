"""BERTScore-family metrics (BertscoreP, BertscoreR, BertKPrec) from token embeddings.

Follows bert-score 0.3.13 (Zhang et al., 2020) as MT-RAG calls it through HF
``evaluate`` in ``scripts/evaluation/run_algorithmic.py``: ``idf=False`` (every token
weighs 1 except [CLS]/[SEP], which weigh 0 but still take part in the max), greedy
cosine matching, optional baseline rescaling ``(s - b) / (1 - b)``.

The math here is pure numpy; the embeddings come from the encoder actor pool
(ragscale/actors/encoder.py). Each unique text of a batch is embedded once and the matching is
done per pair, so a sweep's shared references and passages are encoded once per task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
from ragscale.metrics.registry import MetricSpec, declare


@dataclass(frozen=True)
class TokenEmbedding:
    """L2-normalised token embeddings ``[n_tokens, dim]`` and per-token weights (0 for specials)."""

    vectors: np.ndarray
    weights: np.ndarray
    truncated: bool = False


def greedy_precision_recall(cand: TokenEmbedding, ref: TokenEmbedding) -> tuple[float, float]:
    """BERTScore (P, R) of a candidate against a reference (bert-score ``greedy_cos_idf``).

    P: weighted mean over candidate tokens of their best cosine with any reference token;
    R: the same from the reference side. Special tokens are matched against but weigh 0.
    bert-score also lets zero-padding positions of its batch take part in the max (a
    similarity of 0); that only matters when every similarity of a token is negative,
    which does not happen with real contextual embeddings; ragscale uses real tokens only.
    """
    sim = cand.vectors @ ref.vectors.T
    wp = cand.weights / cand.weights.sum()
    wr = ref.weights / ref.weights.sum()
    precision = float((sim.max(axis=1) * wp).sum())
    recall = float((sim.max(axis=0) * wr).sum())
    return precision, recall


def rescale(value: float, baseline: float) -> float:
    """bert-score's baseline rescaling: ``(value - baseline) / (1 - baseline)``."""
    return (value - baseline) / (1.0 - baseline)


@dataclass(frozen=True)
class BertScoreRequest:
    """The texts one record needs scored: its prediction against targets and passages."""

    prediction: str
    targets: Sequence[str]
    passages: Sequence[str]


def unique_texts(requests: Sequence[BertScoreRequest], want_targets: bool, want_passages: bool) -> list[str]:
    """Every distinct text (stripped, as bert-score encodes it) the requests need, once."""
    seen: dict[str, None] = {}
    for req in requests:
        seen.setdefault(req.prediction.strip())
        if want_targets:
            for t in req.targets:
                seen.setdefault(t.strip())
        if want_passages:
            for p in req.passages:
                seen.setdefault(p.strip())
    return list(seen)


def score_requests(
    requests: Sequence[BertScoreRequest],
    embed: Callable[[list[str]], Mapping[str, TokenEmbedding]],
    *,
    want_targets: bool = True,
    want_passages: bool = True,
    baseline: Mapping[str, float] | None = None,
) -> list[dict]:
    """Compute ``BertscoreP``/``BertscoreR`` (one value per target) and ``BertKPrec`` (the
    precision of the prediction against each passage, ``None`` without passages) for a
    batch of records, embedding every unique text once.

    ``baseline`` (keys ``P``, ``R``) rescales the scores as bert-score's
    ``rescale_with_baseline=True`` does. Returns per request a dict of metrics plus
    ``truncated`` (which texts hit the encoder's length limit).
    """
    table = embed(unique_texts(requests, want_targets, want_passages))
    out: list[dict] = []
    for req in requests:
        cand = table[req.prediction.strip()]
        res: dict = {"truncated": []}
        if cand.truncated:
            res["truncated"].append("prediction")

        def pr(ref_text: str) -> tuple[float, float]:
            p, r = greedy_precision_recall(cand, table[ref_text.strip()])
            if baseline is not None:
                p, r = rescale(p, baseline["P"]), rescale(r, baseline["R"])
            return p, r

        if want_targets:
            scores = [pr(t) for t in req.targets]
            res["BertscoreP"] = [p for p, _ in scores]
            res["BertscoreR"] = [r for _, r in scores]
            res["truncated"] += [f"targets[{i}]" for i, t in enumerate(req.targets) if table[t.strip()].truncated]
        if want_passages:
            res["BertKPrec"] = [pr(p)[0] for p in req.passages] if req.passages else None
            res["truncated"] += [f"contexts[{i}]" for i, p in enumerate(req.passages) if table[p.strip()].truncated]
        out.append(res)
    return out


declare(
    MetricSpec("BertscoreP", "encoder", "algorithmic", shape="target", needs=("reference",), short="BertP",
               reference="IBM/mt-rag-benchmark scripts/evaluation/run_algorithmic.py (bert-score 0.3.13)"),
    MetricSpec("BertscoreR", "encoder", "algorithmic", shape="target", needs=("reference",), short="BertR",
               reference="IBM/mt-rag-benchmark scripts/evaluation/run_algorithmic.py (bert-score 0.3.13)"),
    MetricSpec("BertKPrec", "encoder", "algorithmic", shape="passage", needs=("contexts",),
               reference="IBM/mt-rag-benchmark scripts/evaluation/run_algorithmic.py (BERTScore precision against each passage)"),
)
