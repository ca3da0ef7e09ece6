"""Consistency across repeated runs of a query (open-rag-eval's ConsistencyEvaluator,
seed "Open RAG Eval Metrics Documentation", section Consistency Metrics). Pure functions.

open-rag-eval (commit dfc4175, ``evaluators/consistency_evaluator.py``,
``metrics/rouge_score_similarity_metric.py``, ``metrics/bert_score_similarity_metric.py``)
scores a query with 3 or more runs: every pair of its answers (``itertools.combinations``) by
BERTScore F1 (``bert_score``) and by ROUGE-L F1 of the ``rouge`` package (``rouge_score``), each
the mean of both directions, and summarises every numeric per-run metric with
``ConsistencyScore`` statistics (``eval_scores.py``: mean, median, population std, range, IQR by
numpy's linear percentiles, and the consistency-adjusted index mean / (1 + std)).

``rouge_score`` is computed here as rouge 1.0.1 computes ``rouge-l`` ``f`` (``rouge_l_f``):
sentences split on ".", case-sensitive whitespace tokens, the summary-level union LCS counted
in distinct words, f = 2PR / (P + R + 1e-8). A pair the package rejects (an answer of dots
only: "Hypothesis is empty.") is left out of the statistics, as open-rag-eval's warning does.

Where ragscale differs, deliberately:
- it also reports ROUGE-1, ROUGE-2 and ROUGE-L F1 tokenised like rouge-score (``rouge1``,
  ``rouge2``, ``rougeL``: lowercased alphanumeric tokens, as the rest of ragscale), next to
  open-rag-eval's ``rouge_score``;
- it also reports variance, coefficient of variation (std / |mean|, null when the mean is
  0), min and max, which the issue asks for;
- the runs a query needs are ``consistency.min_runs`` (open-rag-eval's 3 by default), and
  the pairwise similarities need as many answered runs (open-rag-eval: 3 non-empty answers);
  a run without an answer (``NO_ANSWER``, ``API_ERROR``, empty) counts as a run for the
  per-metric statistics, where open-rag-eval drops it at load time;
- per-metric statistics use a metric's non-null values (``n`` says how many), where
  open-rag-eval describes a metric only with 3 or more values;
- BERTScore comes from ``consistency.encoder`` (null: the run's encoder, by default the packaged
  MiniLM, raw scores; summary.json's consistency block names it). open-rag-eval uses
  torchmetrics' BERTScore with xlm-roberta-large, its last layer (24: ``num_layers`` unset, not
  bert-score's 17), rescaled with bert-score's ``en`` baseline (its ``lang`` option never reaches
  torchmetrics), on texts cut to 512 tokens by a tokenise-decode round trip;
- the ROUGE-L of a pair whose sentences are too long for rouge 1.0.1's recursive LCS (a
  RecursionError, which open-rag-eval skips with a warning) is computed.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import Any, Iterable, Sequence

from ragscale.metrics.lexical import rouge_l_tokens, rouge_tokenize

REPEATED_RUNS = 2  # the fewest runs that make a pair: the groups kept; consistency.min_runs cuts later


def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def rouge_n_f1(a_tokens: Sequence[str], b_tokens: Sequence[str], n: int) -> float:
    """ROUGE-N F1 of two token lists (rouge-score's ``_score_ngrams``; symmetric)."""
    a, b = _ngrams(a_tokens, n), _ngrams(b_tokens, n)
    overlap = sum((a & b).values())
    if not overlap:  # also when either side has no n-gram
        return 0.0
    p, r = overlap / sum(b.values()), overlap / sum(a.values())
    return 2 * p * r / (p + r)


def rouge_pair(a: str, b: str) -> dict[str, float]:
    """ROUGE-1/2/L F1 of two answers tokenised like rouge-score (ragscale's addition; see
    ``rouge_score_pair`` for open-rag-eval's), each the mean of both directions."""
    ta, tb = rouge_tokenize(a), rouge_tokenize(b)
    return {
        "rouge1": (rouge_n_f1(ta, tb, 1) + rouge_n_f1(tb, ta, 1)) / 2,
        "rouge2": (rouge_n_f1(ta, tb, 2) + rouge_n_f1(tb, ta, 2)) / 2,
        "rougeL": (rouge_l_tokens(ta, tb) + rouge_l_tokens(tb, ta)) / 2,
    }


def rouge_sentences(text: str) -> list[list[str]]:
    """rouge 1.0.1's tokens of a text (``Rouge._get_scores``): the non-empty pieces between
    "." characters, each split on whitespace, case kept; a piece of whitespace only is one
    empty token (the package joins its words with " " and splits that on " ")."""
    return [piece.split() or [""] for piece in text.split(".") if piece]


def _lcs_words(x: Sequence[str], y: Sequence[str]) -> set[str]:
    """The distinct words of one longest common subsequence of ``x`` and ``y``, the one rouge
    1.0.1's ``_recon_lcs`` walks back to (a match is taken; else up when the cell above is
    strictly larger, else left): which LCS it is matters, since its words are counted."""
    table = [[0] * (len(y) + 1) for _ in range(len(x) + 1)]
    for i, xi in enumerate(x, 1):
        row, prev = table[i], table[i - 1]
        for j, yj in enumerate(y, 1):
            row[j] = prev[j - 1] + 1 if xi == yj else max(prev[j], row[j - 1])
    words: set[str] = set()
    i, j = len(x), len(y)
    while i and j:
        if x[i - 1] == y[j - 1]:
            words.add(x[i - 1])
            i, j = i - 1, j - 1
        elif table[i - 1][j] > table[i][j - 1]:
            i -= 1
        else:
            j -= 1
    return words


def rouge_l_f(hypothesis: str, reference: str) -> float:
    """rouge 1.0.1's ``Rouge().get_scores(hypothesis, reference)[0]["rouge-l"]["f"]``
    (``rouge_l_summary_level``, exclusive): the union, over every reference sentence and
    hypothesis sentence, of the words of their LCS, divided by the distinct words of the
    hypothesis (P) and of the reference (R); f = 2PR / (P + R + 1e-8). ValueError when a
    text has no sentence (empty, or dots only), with the package's message."""
    hyp, ref = rouge_sentences(hypothesis), rouge_sentences(reference)
    if not hyp:
        raise ValueError("Hypothesis is empty.")
    if not ref:
        raise ValueError("Reference is empty.")
    union: set[str] = set()
    for r in ref:
        for h in hyp:
            union |= _lcs_words(r, h)
    p = len(union) / len({w for h in hyp for w in h})
    r_ = len(union) / len({w for r in ref for w in r})
    return 2.0 * ((p * r_) / (p + r_ + 1e-8))


def rouge_score_pair(a: str, b: str) -> float | None:
    """open-rag-eval's ``rouge_score`` of two answers: the mean of ``rouge_l_f(a, b)`` and
    ``rouge_l_f(b, a)``; None where the package raises (open-rag-eval skips that pair)."""
    try:
        return (rouge_l_f(a, b) + rouge_l_f(b, a)) / 2
    except ValueError:
        return None


def pairs(n: int) -> list[tuple[int, int]]:
    """Every unordered pair of ``n`` answers, in ``itertools.combinations`` order."""
    return list(itertools.combinations(range(n), 2))


def _percentile(sorted_vals: Sequence[float], q: float) -> float:
    """numpy's default (linear) percentile of sorted values."""
    pos = (len(sorted_vals) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def describe(values: Sequence[float]) -> dict[str, float | None] | None:
    """Statistics of one metric over a query's runs (see module docstring); None when empty."""
    vals = sorted(float(v) for v in values if v is not None)
    if not vals:
        return None
    n = len(vals)
    mean = sum(vals) / n
    var = sum((v - mean) ** 2 for v in vals) / n
    std = math.sqrt(var)
    return {
        "n": n,
        "mean": mean,
        "median": _percentile(vals, 50),
        "std": std,
        "variance": var,
        "cv": std / abs(mean) if mean else None,
        "min": vals[0],
        "max": vals[-1],
        "max_min": vals[-1] - vals[0],
        "iqr": _percentile(vals, 75) - _percentile(vals, 25),
        "consistency_adjusted_index": mean / (1 + std),
    }


def run_of(rec: dict) -> Any:
    """The run number of a record (open-rag-eval's ``query_run``), else its record key."""
    return rec.get("query_run", (rec.get("ragscale") or {}).get("record_key"))


def group_key(rec: dict) -> tuple[str, str] | None:
    """(model_id, query id) of a record: open-rag-eval's ``query_id``, else MT-RAG's task_id."""
    q = rec.get("query_id", rec.get("task_id"))
    return None if q is None else (str(rec.get("model_id")), str(q))


def numeric_metrics(metrics: Sequence[str]) -> list[str]:
    """The metrics whose spread across runs is described (not per-passage vectors)."""
    from ragscale.metrics.registry import lookup

    return [m for m in metrics if lookup(m) is None or lookup(m).shape != "vector"]


class GroupCollector:
    """The runs of each (model, query), collected a record at a time (one pass over the records
    shared with the report sinks). ``scalar(name, value)`` turns a metric value into a number."""

    def __init__(self, metrics: Sequence[str], scalar: Any):
        self.metrics, self.scalar = list(metrics), scalar
        self.groups: dict[tuple[str, str], dict] = {}

    def add(self, rec: dict) -> None:
        from ragscale.metrics.trec import answer_text
        from ragscale.record_fields import record_fields

        key = group_key(rec)
        if key is None or rec.get("error"):
            return
        g = self.groups.setdefault(key, {"model_id": key[0], "query_id": key[1], "runs": [], "answers": [],
                                         "values": {m: [] for m in self.metrics}})
        fields = record_fields(rec)
        answer = fields.answer if (fields.answer_status or "ok") == "ok" else None  # not NO_ANSWER, API_ERROR
        g["runs"].append(run_of(rec))
        g["answers"].append(answer_text(answer).strip() if isinstance(answer, str) else "")
        for m in self.metrics:
            g["values"][m].append(self.scalar(m, (rec.get("metrics") or {}).get(m)))

    def result(self) -> list[dict]:
        """The groups with repeated runs (>= REPEATED_RUNS; the consistency pass keeps those with
        ``consistency.min_runs``, ``scored``)."""
        return [g for g in self.groups.values() if len(g["runs"]) >= REPEATED_RUNS]


def collect_groups(records: Iterable[dict], metrics: Sequence[str],
                   scalar: Any) -> list[dict]:
    """Group finished records by (model, query) and keep those with repeated runs. Each
    group: model_id, query_id, runs, answers (citations removed; "" for a run without an
    answer), and per metric the per-run numbers (``scalar(name, value)`` turns a value into
    a number)."""
    collector = GroupCollector(metrics, scalar)
    for rec in records:
        collector.add(rec)
    return collector.result()


def scored(group: dict, min_runs: int) -> bool:
    """Whether a query has the runs consistency needs (open-rag-eval: more than 2)."""
    return len(group["runs"]) >= min_runs


def answered(group: dict, min_runs: int) -> list[str]:
    """The answers compared pairwise: the non-empty ones, when there are ``min_runs`` of them
    (open-rag-eval's similarity metrics return nothing for fewer than 3), else none."""
    out = [a for a in group["answers"] if a]
    return out if len(out) >= min_runs else []


def finish_group(group: dict, bertscore_f1: Sequence[float | None] | None, min_runs: int) -> dict:
    """The consistency record of one query (``scored(group, min_runs)``): pairwise similarities
    between its answered runs and per-metric statistics across runs."""
    texts = answered(group, min_runs)
    ab = pairs(len(texts))
    sims = {"rouge_score": [rouge_score_pair(texts[i], texts[j]) for i, j in ab]}
    lexical = [rouge_pair(texts[i], texts[j]) for i, j in ab]
    sims.update({k: [r[k] for r in lexical] for k in ("rouge1", "rouge2", "rougeL")})
    bert = list(bertscore_f1 or [])
    return {
        "model_id": group["model_id"],
        "query_id": group["query_id"],
        "runs": group["runs"],
        "answered_runs": sum(1 for a in group["answers"] if a),
        "pairs": len(ab),
        "similarity": {"bert_score": describe(bert), **{k: describe(v) for k, v in sims.items()}},
        "pairwise": {"bert_score_f1": bert, **sims},
        "metrics": {m: describe(v) for m, v in group["values"].items() if any(x is not None for x in v)},
    }


def summarize(groups: Iterable[dict]) -> dict:
    """Per model: number of queries with repeated runs, mean pairwise similarity, and per
    metric the mean std and mean coefficient of variation across queries."""
    acc: dict[str, dict[str, list[float]]] = {}
    counts: dict[str, int] = {}
    for g in groups:
        a = acc.setdefault(g["model_id"], {})
        counts[g["model_id"]] = counts.get(g["model_id"], 0) + 1
        for k, d in g["similarity"].items():
            if d:
                a.setdefault(f"{k}_mean", []).append(d["mean"])
        for m, d in g["metrics"].items():
            if d:
                a.setdefault(f"{m}_std", []).append(d["std"])
                if d["cv"] is not None:
                    a.setdefault(f"{m}_cv", []).append(d["cv"])
    return {model: {"queries": counts[model], **{k: sum(v) / len(v) for k, v in sorted(a.items()) if v}}
            for model, a in sorted(acc.items())}
