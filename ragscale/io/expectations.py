"""Per-question expectations (fact checks) from a YAML file, and their scores.

Generalises the question-specific checks of the seed "Evaluation Metrics Documentation"
(EF_1 list coverage, EF_2 fact checks, EF_3 calculation correctness with "cannot calculate"
detection) so that any dataset can supply them::

    version: 1
    cannot_calculate: ["cannot calculate", "unable to calculate"]   # optional; default list below
    questions:
      - id: EF_3                 # matches the record's task_id (or use `question:` to match the query text)
        facts:                   # fact_score = share of facts that hold
          - {name: has_604, number: 604}                    # the value appears (tolerance: optional)
          - {name: has_yes, any: ["yes"]}                   # any phrase appears (case-insensitive, whole words)
          - {name: mentions_rule, pattern: "rule\\s+c-\\d"}  # a regular expression matches (case-insensitive)
          - {name: big_difference, range: [30, null]}       # some number lies in the range (null = open end)
          - {name: has_difference_36, range: [30, null], within: "difference[^.]*"}  # only numbers inside
                                 # the regex's matches count (group 1 when it has one): "difference of 36 (or > 30)"
        list_items: ["Rule C-1", "Rule C-2"]                # rules_coverage = share of items mentioned
        correct: [has_604]       # is_correct = these facts hold and no cannot-calculate phrase occurs

Scores per record (``null`` when the question has no such part, or no expectations):
``fact_score``, ``rules_coverage``, ``is_correct`` (0/1); the per-check outcomes go to the
record's ``ragscale.details.fact_checks``.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any

from ragscale.errors import UserError
from ragscale.metrics.custom import contains_phrase, normalize, numbers

DEFAULT_CANNOT_CALCULATE = (
    "cannot calculate", "can't calculate", "cannot be calculated", "unable to calculate", "not able to calculate",
    "cannot compute", "cannot determine", "cannot be determined", "not enough information",
    "insufficient information", "do not have enough information", "don't have enough information",
)
_FACT_KINDS = ("any", "pattern", "number", "range")
_FACT_KEYS = {"name", "tolerance", "within", *_FACT_KINDS}
_QUESTION_KEYS = {"id", "question", "facts", "list_items", "correct", "cannot_calculate"}
_TOP_KEYS = {"version", "cannot_calculate", "questions"}


@dataclass(frozen=True)
class Fact:
    name: str
    kind: str  # any | pattern | number | range
    value: Any
    tolerance: float = 0.0
    within: str | None = None  # number/range facts: only numbers inside this regex's matches count

    def holds(self, answer: str, answer_numbers: list[float]) -> bool:
        """Whether the fact holds in the answer (see the module docstring)."""
        if self.kind == "any":
            return any(_phrase_in(p, answer) for p in self.value)
        if self.kind == "pattern":
            return re.search(self.value, answer, re.IGNORECASE) is not None
        if self.within is not None:
            answer_numbers = [n for m in re.finditer(self.within, answer, re.IGNORECASE)
                              for n in numbers(m.group(1) if m.re.groups and m.group(1) is not None else m.group(0))]
        if self.kind == "number":
            return any(math.isclose(n, self.value, rel_tol=0.0, abs_tol=self.tolerance + 1e-9) for n in answer_numbers)
        lo, hi = self.value
        return any((lo is None or n >= lo) and (hi is None or n <= hi) for n in answer_numbers)


@dataclass(frozen=True)
class Expectation:
    key: str  # id or question text, for messages
    facts: tuple[Fact, ...] = ()
    list_items: tuple[str, ...] = ()
    correct: tuple[str, ...] | None = None
    cannot_calculate: tuple[str, ...] = DEFAULT_CANNOT_CALCULATE


@dataclass
class Expectations:
    """A loaded expectations file: questions by task id and by normalised question text."""

    path: str
    sha256: str
    by_id: dict[str, Expectation] = field(default_factory=dict)
    by_question: dict[str, Expectation] = field(default_factory=dict)

    def find(self, task_id: str | None, question: str | None) -> Expectation | None:
        """The expectation of a record: by task id first, else by question text."""
        if task_id is not None and task_id in self.by_id:
            return self.by_id[task_id]
        if question:
            return self.by_question.get(normalize(question))
        return None


_phrase_in = contains_phrase  # whole words, case-insensitive, any whitespace between words


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise UserError(f"{where} must be a non-empty list of non-empty strings")
    return tuple(value)


def _number(value: Any, where: str, allow_null: bool = False) -> float | None:
    if value is None and allow_null:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{where} must be a number, got {value!r}")
    return float(value)


def _fact(raw: Any, where: str) -> Fact:
    if not isinstance(raw, dict):
        raise UserError(f"{where} must be a mapping like {{name: has_604, number: 604}}")
    unknown = set(raw) - _FACT_KEYS
    if unknown:
        raise UserError(f"{where}: unknown key(s) {sorted(unknown)}; a fact has name, one of {list(_FACT_KINDS)}, "
                        "optionally tolerance (number) and within (number, range)")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"{where} needs a name")
    kinds = [k for k in _FACT_KINDS if k in raw]
    if len(kinds) != 1:
        raise UserError(f"{where} ({name}) needs exactly one of {list(_FACT_KINDS)}, got {kinds or 'none'}")
    kind, value = kinds[0], raw[kinds[0]]
    tolerance = _number(raw.get("tolerance", 0.0), f"{where} ({name}).tolerance")
    if tolerance < 0:
        raise UserError(f"{where} ({name}).tolerance must be >= 0, got {tolerance:g}")
    if "tolerance" in raw and kind != "number":
        raise UserError(f"{where} ({name}): tolerance applies to a number fact only")
    within = raw.get("within")
    if within is not None:
        if kind not in ("number", "range"):
            raise UserError(f"{where} ({name}): within applies to a number or range fact only")
        _regex(within, f"{where} ({name}).within")
    if kind == "any":
        value = _strings(value, f"{where} ({name}).any")
    elif kind == "pattern":
        _regex(value, f"{where} ({name}).pattern")
    elif kind == "number":
        value = _number(value, f"{where} ({name}).number")
    else:
        if not isinstance(value, list) or len(value) != 2:
            raise UserError(f"{where} ({name}).range must be [low, high] (null for an open end)")
        value = (_number(value[0], f"{where} ({name}).range[0]", True), _number(value[1], f"{where} ({name}).range[1]", True))
        if value == (None, None):
            raise UserError(f"{where} ({name}).range needs at least one bound")
        if None not in value and value[0] > value[1]:
            raise UserError(f"{where} ({name}).range is empty: {value[0]:g} > {value[1]:g}")
    return Fact(name.strip(), kind, value, float(tolerance or 0.0), within)


def _regex(value: Any, where: str) -> None:
    if not isinstance(value, str) or not value:
        raise UserError(f"{where} must be a non-empty string (a regular expression)")
    try:
        re.compile(value)
    except re.error as e:
        raise UserError(f"{where} is not a valid regular expression: {e}") from None


def parse_expectations(data: Any, path: str, sha256: str = "") -> Expectations:
    """Validate the parsed YAML; every problem is a one-line UserError naming the file and question."""
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping with 'questions'")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise UserError(f"{path}: unknown top-level key(s) {sorted(unknown)}; allowed: {sorted(_TOP_KEYS)}")
    default_cc = _strings(data["cannot_calculate"], f"{path}: cannot_calculate") \
        if "cannot_calculate" in data else DEFAULT_CANNOT_CALCULATE
    questions = data.get("questions")
    if not isinstance(questions, list) or not questions:
        raise UserError(f"{path}: 'questions' must be a non-empty list")
    out = Expectations(path, sha256)
    for i, q in enumerate(questions):
        where = f"{path}: questions[{i}]"
        if not isinstance(q, dict):
            raise UserError(f"{where} must be a mapping")
        qid = q.get("id")
        qtext = q.get("question")
        if qid is None and not isinstance(qtext, str):
            raise UserError(f"{where} needs an id (the records' task_id) or a question text")
        if qid is not None:
            where = f"{path}: question {qid}"
        unknown = set(q) - _QUESTION_KEYS
        if unknown:
            raise UserError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_QUESTION_KEYS)}")
        facts_raw = q.get("facts") or []
        if not isinstance(facts_raw, list):
            raise UserError(f"{where}: facts must be a list")
        facts = tuple(_fact(f, f"{where}: facts[{j}]") for j, f in enumerate(facts_raw))
        names = [f.name for f in facts]
        if len(set(names)) != len(names):
            raise UserError(f"{where}: fact names must be unique, got {names}")
        items = _strings(q["list_items"], f"{where}: list_items") if "list_items" in q else ()
        correct = None
        if "correct" in q:
            correct = _strings(q["correct"], f"{where}: correct")
            missing = [c for c in correct if c not in names]
            if missing:
                raise UserError(f"{where}: correct names unknown fact(s) {missing}; facts are {names}")
        cc = _strings(q["cannot_calculate"], f"{where}: cannot_calculate") if "cannot_calculate" in q else default_cc
        if not facts and not items:
            raise UserError(f"{where} has neither facts nor list_items")
        exp = Expectation(str(qid) if qid is not None else qtext, facts, items, correct, cc)
        if qid is not None:
            if str(qid) in out.by_id:
                raise UserError(f"{where} is listed twice")
            out.by_id[str(qid)] = exp
        if isinstance(qtext, str) and qtext.strip():
            out.by_question[normalize(qtext)] = exp
    return out


def load_expectations(path: str) -> Expectations:
    """Read and validate an expectations YAML file (one-line UserError on any problem)."""
    import yaml

    try:
        with open(path, "rb") as fh:
            blob = fh.read()
    except OSError as e:
        raise UserError(f"custom.expectations: cannot read {path}: {e.strerror or e}") from None
    try:
        data = yaml.safe_load(blob)
    except yaml.YAMLError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "invalid YAML"
        raise UserError(f"{path}: not valid YAML: {first}") from None
    return parse_expectations(data, path, hashlib.sha256(blob).hexdigest())


def check(exp: Expectation, answer: str) -> tuple[dict, dict]:
    """Scores (``fact_score``, ``rules_coverage``, ``is_correct``) and per-check details of one answer."""
    nums = numbers(answer)
    facts = {f.name: f.holds(answer, nums) for f in exp.facts}
    found = [item for item in exp.list_items if _phrase_in(item, answer)]
    cannot = [p for p in exp.cannot_calculate if _phrase_in(p, answer)]
    scores: dict[str, float | None] = {
        "fact_score": sum(facts.values()) / len(facts) if facts else None,
        "rules_coverage": len(found) / len(exp.list_items) if exp.list_items else None,
        "is_correct": None if exp.correct is None else float(all(facts[c] for c in exp.correct) and not cannot),
    }
    details = {"question": exp.key, "facts": facts, "cannot_calculate": cannot}
    if exp.list_items:
        details.update({"rules_found": len(found), "total_rules": len(exp.list_items),
                        "missing_items": [i for i in exp.list_items if i not in found]})
    return scores, details
