"""Custom answer metrics of the seed "Evaluation Metrics Documentation" (seed 004).

Pure functions of (generated answer, expected answer). The seed describes them in prose; its
implementation (``src/evaluation/evaluate.py``) is not public, so every choice the prose leaves
open is made here and stated in docs/metrics.md ("Custom answer metrics and fact checks"):

- **exact_match**: both answers lowercased, whitespace runs collapsed, stripped; 1.0 when
  equal, else 0.0.
- **keyword_coverage**: keywords (below) of the expected answer found among the keywords of the
  generated answer, over the expected keywords. ``None`` when the expected answer has no
  keyword (nothing to cover; the seed gives no value).
- **number_match**: numbers of the expected answer present among the generated answer's
  numbers, compared as values (``$1,250`` = ``1250``; ``0.305%`` = ``0.305``; the sign counts),
  over the expected numbers. ``None`` when the expected answer has no number.
- **answer_completeness**: ``(min(generated words / expected words, 1) + keyword coverage) / 2``;
  with no expected keyword, the length score alone.
- **source_citation**: how many of the seed's source indicators occur in the generated answer
  (case-insensitive substrings), ``min(found / 3, 1)``.

Keywords (seed: "capitalized phrases, numbers and percentages, important words"): runs of
capitalised words optionally followed by a number or code (``Territory 118``, ``Rule C-1``),
every number (normalised as in ``numbers``), and every word of 4+ letters that is not a stop
word, all lowercased. A phrase loses its leading function words (a sentence-initial ``The
Drought Surcharge`` is ``drought surcharge``; ``In June`` is no phrase) and trailing ``.``/``-``
(``Rule C-1.`` is ``rule c-1``), and is a phrase only with two or more words left. A keyword
counts as matched when it is among the generated answer's keywords, or, for a phrase, when it
occurs in the generated text as whole words (``Territory 118`` is not in ``Territory 1180``).
"""

from __future__ import annotations

import re

from ragscale.metrics.registry import UNIT, MetricSpec, declare

STOP_WORDS = frozenset(
    """about above after again against also among another because been before being below between both
    cannot could does doing down during each either every from further have having here hers herself
    himself into itself just know more most much must need only other ours ourselves over same shall
    should some such than that their theirs them themselves then there these they this those through
    under until upon very want were what when where whether which while whom whose will with within
    without would your yours yourself yourselves""".split()
)
SOURCE_INDICATORS = ("source:", "table:", "page", "document", "pdf", "according to", "based on", "from")

_NUMBER = re.compile(r"(?<![\w.])([-−+]?)\$?((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)\s?(%?)")
# a capitalised word, then capitalised words or numbers/codes on the same line (a dot only inside a code)
_PHRASE = re.compile(r"\b[A-Z][A-Za-z]+(?:[ \t]+(?:[A-Z][A-Za-z]+|[A-Z]?-?\d(?:[\w-]|\.(?=\w))*))*")
_WORD = re.compile(r"[A-Za-z]{4,}")
# words that start a capitalised run without belonging to the phrase (sentence starts): dropped
_LEADING = STOP_WORDS | frozenset(
    """a an the in on at of for to by and or but if as is are was be it its our my we you he she they his her
    yes no not so per see note all any according based""".split()
)


def normalize(text: str) -> str:
    """Lowercase, collapse whitespace runs, strip (the seed's exact-match normalisation)."""
    return " ".join(text.lower().split())


def exact_match(generated: str, expected: str) -> float:
    """1.0 when the normalised answers are identical, else 0.0 (seed: Exact Match)."""
    return 1.0 if normalize(generated) == normalize(expected) else 0.0


def numbers(text: str) -> list[float]:
    """Numeric values in ``text``: ``$604`` -> 604, ``1,250`` -> 1250, ``-0.133%`` -> -0.133,
    ``0.305 %`` -> 0.305 (currency symbol, thousands separators and the percent sign dropped,
    the sign kept; a hyphen counts as a minus sign only when it does not follow a word
    character, so ``C-1`` is 1 but ``-1`` is -1)."""
    out = []
    for m in _NUMBER.finditer(text):
        sign, body = m.group(1), m.group(2)
        value = float(body.replace(",", ""))
        out.append(-value if sign in ("-", "−") else value)
    return out


def _num_key(value: float) -> str:
    return f"{value:.10g}"


def phrases(text: str) -> set[str]:
    """Capitalised phrases of ``text``, lowercased: ``Territory 118``, ``Rule C-1``, ``Peak Season
    Surcharge`` (leading function words and trailing ``.``/``-`` dropped; two words or more)."""
    out = set()
    for m in _PHRASE.finditer(text):
        words = m.group(0).lower().split()
        while words and words[0] in _LEADING:
            words.pop(0)
        if words:
            words[-1] = words[-1].rstrip(".-")
        words = [w for w in words if w]
        if len(words) >= 2:
            out.add(" ".join(words))
    return out


def contains_phrase(phrase: str, text: str) -> bool:
    """``phrase`` occurs in ``text`` as whole words (case-insensitive, any whitespace between words)."""
    words = [re.escape(w) for w in phrase.split()]
    if not words:
        return False
    return re.search(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", text, re.IGNORECASE) is not None


def keywords(text: str) -> set[str]:
    """The seed's keywords of ``text``, lowercased: capitalised phrases, numbers, 4+ letter non-stop words."""
    out = phrases(text)
    out |= {_num_key(v) for v in numbers(text)}
    out |= {w.lower() for w in _WORD.findall(text) if w.lower() not in STOP_WORDS}
    return out


def keyword_coverage(generated: str, expected: str) -> float | None:
    """Share of the expected answer's keywords found in the generated answer (seed: Keyword
    Coverage); ``None`` when the expected answer has no keyword."""
    want = keywords(expected)
    if not want:
        return None
    have = keywords(generated)
    found = sum(1 for k in want if k in have or (" " in k and contains_phrase(k, generated)))
    return found / len(want)


def number_match(generated: str, expected: str) -> float | None:
    """Share of the expected answer's distinct numbers found among the generated answer's
    numbers, compared as values (seed: Number Match); ``None`` when none is expected."""
    want = {_num_key(v) for v in numbers(expected)}
    if not want:
        return None
    have = {_num_key(v) for v in numbers(generated)}
    return len(want & have) / len(want)


def answer_completeness(generated: str, expected: str) -> float | None:
    """``(min(generated words / expected words, 1) + keyword coverage) / 2`` (seed: Answer
    Completeness); the length score alone when the expected answer has no keyword; ``None``
    for an empty expected answer."""
    exp_words = len(expected.split())
    if not exp_words:
        return None
    length = min(len(generated.split()) / exp_words, 1.0)
    cov = keyword_coverage(generated, expected)
    return length if cov is None else (length + cov) / 2


def source_indicators(generated: str) -> list[str]:
    """The seed's source indicators that occur in the answer (case-insensitive)."""
    low = generated.lower()
    return [s for s in SOURCE_INDICATORS if s in low]


def source_citation(generated: str) -> float:
    """``min(found indicators / 3, 1)`` (seed: Source Citation Quality)."""
    return min(len(source_indicators(generated)) / 3.0, 1.0)


CUSTOM_METRICS = ("exact_match", "keyword_coverage", "number_match", "answer_completeness", "source_citation")


def custom_metrics(generated: str, expected: str | None, enabled: set[str] | frozenset[str]) -> dict:
    """The enabled reference-based custom metrics of one record (``None`` values when there is
    no expected answer; ``source_citation`` needs none)."""
    out: dict = {}
    fns = {"exact_match": exact_match, "keyword_coverage": keyword_coverage, "number_match": number_match,
           "answer_completeness": answer_completeness}
    for name, fn in fns.items():
        if name in enabled:
            out[name] = None if expected is None else fn(generated, expected)
    if "source_citation" in enabled:
        out["source_citation"] = source_citation(generated)
    return out


FACT_METRICS = ("fact_score", "rules_coverage", "is_correct")  # from custom.expectations' fact checks
# The reference-based ones need a reference answer (a record without one gets null and a warning)
declare(*(MetricSpec(name, "lexical", "custom", scalar=True, bounds=UNIT, reference='seed "Evaluation Metrics Documentation"',
                     needs=("reference",) if name in CUSTOM_METRICS and name != "source_citation" else ())
          for name in (*CUSTOM_METRICS, *FACT_METRICS)))
