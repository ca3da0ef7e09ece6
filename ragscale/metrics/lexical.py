"""Lexical MT-RAG metrics: Recall, ROUGE-L, extractiveness, length.

Each function follows IBM/mt-rag-benchmark ``scripts/evaluation/run_algorithmic.py``
(seed: "MT-RAG Evaluation Metrics Reference", step 1). Deliberate differences are
listed in docs/metrics.md.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Sequence

from rapidfuzz.distance import LCSseq

from ragscale.metrics.registry import UNIT, lexical_metric

_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ROUGE_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_ROUGE_SPACES = re.compile(r"\s+")
_ROUGE_VALID = re.compile(r"^[a-z0-9]+$")
_NON_WORD = re.compile(r"[^\w\s]")


def normalize_text(text: str) -> str:
    """Lower-case, drop ASCII punctuation, drop articles, collapse whitespace (MT-RAG/SQuAD)."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def recall(prediction: str, target: str) -> float:
    """MT-RAG ``recall``: common normalised tokens (multiset) / number of target tokens."""
    target_tokens = normalize_text(target).split()
    common = Counter(normalize_text(prediction).split()) & Counter(target_tokens)
    n_common = sum(common.values())
    if n_common == 0:
        return 0.0
    return n_common / len(target_tokens)


def rouge_tokenize(text: str) -> list[str]:
    """rouge-score 0.1.2's default tokenizer without stemming: lower, split on non [a-z0-9]."""
    text = _ROUGE_NON_ALNUM.sub(" ", text.lower())
    return [t for t in _ROUGE_SPACES.split(text) if _ROUGE_VALID.match(t)]


def rouge_l_tokens(target_tokens: list[str], prediction_tokens: list[str]) -> float:
    """ROUGE-L F-measure over token lists, computed as rouge-score's ``score_lcs`` does.

    The LCS length comes from rapidfuzz's bit-parallel LCS (exact), the precision,
    recall and F arithmetic is the same sequence of float operations as rouge-score, so
    results are bit-identical to ``RougeScorer(["rougeL"]).score(target, prediction)``.
    """
    if not target_tokens or not prediction_tokens:
        return 0.0
    lcs = LCSseq.similarity(target_tokens, prediction_tokens)
    precision = lcs / len(prediction_tokens)
    recall_ = lcs / len(target_tokens)
    if precision + recall_ > 0:
        return 2 * precision * recall_ / (precision + recall_)
    return 0.0


def rouge_l(prediction: str, target: str) -> float:
    """``RougeL_stemFalse``: ROUGE-L F of rouge-score with ``use_stemmer=False``.

    MT-RAG calls HF ``evaluate``'s rouge, i.e. ``RougeScorer.score(target, prediction)``.
    """
    return rouge_l_tokens(rouge_tokenize(target), rouge_tokenize(prediction))


def _strip_newline_words(text: str) -> str:
    # MT-RAG: newlines -> spaces, drop every non-word non-space character, lower-case.
    # MT-RAG then runs BeautifulSoup(html.unescape(...)).get_text(); after this step the
    # text holds no '<', '>', '&' or ';', so that is the identity (checked in the tests
    # against the reference with bs4+lxml) and ragscale skips it.
    return _NON_WORD.sub("", text.replace("\n", " ")).lower()


def extractiveness(prediction: str, passage: str) -> float:
    """``Extractiveness_RougeL`` of a response against one passage (MT-RAG ``extractiveness_rouge``).

    Both texts are cleaned (newlines to spaces, punctuation removed, lower-cased). If the
    cleaned passage, spaces removed, is a substring of the cleaned response, spaces
    removed, the score is 1 (MT-RAG's shortcut, kept as is: it fires when the whole
    passage is inside the response); otherwise ROUGE-L F of the cleaned texts with the
    passage as the reference.
    """
    text = _strip_newline_words(prediction)
    target = _strip_newline_words(passage)
    if target.replace(" ", "") in text.replace(" ", ""):
        return 1.0
    return rouge_l(text, target)


def length_words(prediction: str) -> int:
    """``Length``: number of whitespace-separated words in the response.

    The seed defines Length as the number of words; MT-RAG's code returns characters
    (``len(text)``). ragscale follows the seed (docs/metrics.md).
    """
    return len(prediction.split())


# The catalog entries of the lexical step-1 metrics (per target, per passage), MT-RAG's value shapes.
_REF = "IBM/mt-rag-benchmark scripts/evaluation/run_algorithmic.py"


@lexical_metric("Recall", family="algorithmic", shape="target", needs=("reference",), bounds=UNIT, reference=_REF)
def recall_per_target(prediction: str, targets: Sequence[str], passages: Sequence[str]) -> list[float]:
    return [recall(prediction, t) for t in targets]


@lexical_metric("RougeL_stemFalse", family="algorithmic", shape="target", needs=("reference",), short="RougeL", bounds=UNIT,
                reference=_REF + " (rouge-score, use_stemmer=False)")
def rouge_l_per_target(prediction: str, targets: Sequence[str], passages: Sequence[str]) -> list[float]:
    pred_tokens = rouge_tokenize(prediction)
    return [rouge_l_tokens(rouge_tokenize(t), pred_tokens) for t in targets]


@lexical_metric("Extractiveness_RougeL", family="algorithmic", shape="passage", needs=("contexts",), short="Extract", bounds=UNIT,
                reference=_REF)
def extractiveness_per_passage(prediction: str, targets: Sequence[str], passages: Sequence[str]) -> list[float] | None:
    return [extractiveness(prediction, p) for p in passages] if passages else None


@lexical_metric("Length", family="algorithmic", shape="target", dtype="int", needs=("reference",), higher_is_better=None,
                decimals=1, reference=_REF)
def length_per_target(prediction: str, targets: Sequence[str], passages: Sequence[str]) -> list[int]:
    return [length_words(prediction) for _ in targets]
