"""Every judge's parsers against hostile outputs (docs/judges.md, "Odd outputs"): a parser either
returns a value or raises ``JudgeParseError``, never anything else (RecursionError, TypeError,
KeyError, ValueError, AttributeError...), and a judge that gets such a parsed value never raises
either, under both protocols. MT-RAG's own parser scores a nested ``decision`` 0.5 (its bare
``except``), so the reference protocol's underspecified judge does too.

Each judge is walked step by step on real rows (the bundled MT-RAG sample, open-rag-eval-style
rows, a taxonomy row): at every step, every hostile output goes through the step's parser (and,
when it parses, into a replay of the judge up to that step); then a schema-valid answer advances
the judge to its next step."""

from __future__ import annotations

import json
import os
import random
import re
import types
from typing import Any, Iterator

import pytest

from conftest import ROOT, reference_source
from ragscale.judges import JUDGES
from ragscale.judges.base import Failed, JudgeParseError
from ragscale.judges.judge_input import judge_input
from ragscale.record import read_record

DEEP = 1000  # the issue's nesting: a 4.7 KB line that overflows Python's recursion limit


def deep_list(n: int = DEEP) -> str:
    return "[" * n + "]" * n


def deep_object(n: int = DEEP) -> str:
    return '{"a":' * n + "1" + "}" * n


ODD_VALUES = ["null", "true", "1", "-1", "1.5", "1e400", "-1e400", "NaN", "Infinity", '""', '"x"', '"9"', "[]", "{}",
              "[null]", "[1]", "[[]]", "[{}]", '["x"]', '{"a": 1}', '"\\ud800"', deep_list(), deep_object(),
              "9" * 5000, '"' + "9" * 2000 + '"', '"' + "x" * 2_000 + '"']
TOP_LEVEL = ["", " ", "null", "[]", '"s"', "1", "NaN", "{}", "{", "}", "yes", "no", "Rating: [[99999999999]]",
             "Rating: [[" + "9" * 2000 + "]]", "[[-1]]", "```json\n" + deep_list() + "\n```",
             '```json\n{"decision": ' + deep_list() + "}\n```", "{" + deep_list() + "}", deep_list(), deep_object(),
             deep_list(100_000), "\x00", "\ud800", '{"a": "\\ud800"}', "x" * 2_000]
# (longer texts never reach a parser: the judge actor cuts an output to judge.max_raw_chars first;
# ragas' reference parser, LangChain's partial-JSON repair, is quadratic in the length)


def hostile(schema: dict | None) -> list[str]:
    """Odd whole outputs, and every property of the step's schema (plus the usual names) set to each odd value."""
    props = list(((schema or {}).get("properties") or {}))
    props += [p for p in ("decision", "label", "score", "rating", "statements", "verdict", "nuggets", "importance",
                          "assignment", "support", "query_answered", "question", "noncommittal", "reason")
              if p not in props]
    out = list(TOP_LEVEL)
    for p in props:
        out += ['{"%s": %s}' % (p, v) for v in ODD_VALUES]
        out.append('{"%s": [%s]}' % (p, ", ".join(['{"statement": [], "verdict": {}, "reason": null}', "null", "1"])))
    return out


def instance(schema: Any) -> Any:
    """A minimal value valid under ``schema`` (the judges' schemas: objects, arrays, enums, strings, numbers)."""
    if not isinstance(schema, dict):
        return "x"
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema or "oneOf" in schema:
        return instance((schema.get("anyOf") or schema.get("oneOf"))[0])
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {k: instance(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        n = max(1, int(schema.get("minItems") or 1))
        return [instance(schema.get("items")) for _ in range(n)]
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    return "x"


FREE_TEXT = ['{"decision": "yes", "explanation": "x"}', "yes", "Rating: [[5]]", '{"label": "yes"}',
             '{"statements": ["The answer is Paris."]}', '{"score": 2}', '{"query_answered": "yes"}']


def valid(prompt: Any, parse: Any) -> Any:
    """A parsed valid answer of the step (its schema's minimal instance, or a free-text answer that parses)."""
    for text in ([json.dumps(instance(prompt.schema))] if prompt.schema else []) + FREE_TEXT:
        try:
            return parse(text)
        except JudgeParseError:
            continue
    return None


def rows() -> list[dict]:
    sample = os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")
    with open(sample, encoding="utf-8") as fh:
        lines = [line for line in fh if line.strip()][:2]
    out = [read_record(line, key=str(n), model_id="m", task_id=None, source_file=sample, source_line=n,
                       need_targets=True).to_row() for n, line in enumerate(lines)]
    raw = {"format": "open-rag-eval-csv", "query_id": "q", "query": "Capital of France?", "query_run": 1,
           "passages": [{"id": "[1]", "text": "Paris is the capital."}, {"id": "[2]", "text": "It is in Europe."}],
           "generated_answer": "Paris [1]. It is in Europe [2].", "answer_status": "ok"}
    out.append(read_record(json.dumps(raw), key="q", model_id="m", task_id="q", source_file="f", source_line=1,
                           need_targets=False).to_row())
    for row in out:  # nuggets reads UMBRELA's grades from the row's metrics (it runs after it)
        row["metrics"] = {"umbrela_scores": [3] * len(row.get("passages") or []), **judge_input(row).metrics}
    return out


def runs() -> Iterator[tuple[str, str, dict]]:
    """Each judge under each of its protocols, on the first row it has a prompt for (a judge
    that cannot start on a row, e.g. RADBench without a reference answer, is the actor's
    business: tests/unit/test_faults_judge.py)."""
    for name, spec in sorted(JUDGES.items()):
        for protocol in ("constrained", "reference") if spec.reference_version else ("constrained",):
            for row in rows():
                try:
                    next(start(name, protocol, row))
                except Exception:  # noqa: BLE001 - no prompt on this row (StopIteration: undefined)
                    continue
                yield name, protocol, row
                break


def start(name: str, protocol: str, row: dict):
    spec = JUDGES[name]
    return spec.start(judge_input(row), **spec.options(protocol, "gpt-4o-mini"))


def replay(name: str, protocol: str, row: dict, answers: list, last: Any) -> None:
    """Start the judge again, answer its steps with ``answers`` then ``last``: it must end or yield, never raise."""
    run = start(name, protocol, row)
    try:
        next(run)
        for a in answers:
            run.send(a)
        run.send(last)
    except StopIteration:
        pass


def parsed_or_failed(parse: Any, text: str) -> Any:
    try:
        return parse(text)
    except JudgeParseError as e:
        return Failed(e.reason, text)


@pytest.mark.parametrize("name,protocol,row", list(runs()),
                         ids=[f"{n}-{p}-{r['key']}" for n, p, r in runs()])
def test_every_parser_raises_only_parse_errors(name, protocol, row):
    problems: list[str] = []
    answers: list[Any] = []
    run = start(name, protocol, row)
    try:
        step = next(run)
        for depth in range(6):
            items = step if isinstance(step, list) else [step]
            for prompt, parse in items[:2]:
                for text in hostile(prompt.schema) if depth < 2 else TOP_LEVEL:  # (later steps: fewer, for time)
                    try:
                        value = parse(text)
                    except JudgeParseError:
                        continue
                    except BaseException as e:  # noqa: BLE001 - what this test looks for
                        problems.append(f"step {depth} parser: {type(e).__name__} on {text[:60]!r}")
                        continue
                    if isinstance(step, list):
                        value = [value] + [parsed_or_failed(p, text) for _, p in items[1:]]
                    try:
                        replay(name, protocol, row, answers, value)
                    except BaseException as e:  # noqa: BLE001
                        problems.append(f"step {depth} judge after parse: {type(e).__name__}: {e} on {text[:60]!r}")
            good = [valid(p, parse) for p, parse in items]
            if any(g is None for g in good):
                break  # no schema-valid answer parses (free text the candidates do not cover): stop here
            answers.append(good if isinstance(step, list) else good[0])
            step = run.send(answers[-1])
    except StopIteration:
        pass
    assert not problems, "\n".join(dict.fromkeys(problems))


def test_the_issue_nested_decision():
    """The issue's output: a constrained parse failure, and MT-RAG's 0.5 under the reference protocol."""
    from ragscale.judges import mtrag_reference, underspecified

    text = '{"decision": ' + deep_list() + "}"
    with pytest.raises(JudgeParseError):
        underspecified.parse(text)
    assert mtrag_reference.underspecified_decision(text) == mtrag_reference.DEFAULT
    assert mtrag_reference.underspecified_decision("```json\n" + text + "\n```") == mtrag_reference.DEFAULT


def test_rating_patterns_find_mtrags_first_match_in_linear_time():
    """extract_rating's patterns spell MT-RAG's numbers without their catastrophic backtracking:
    the same first match as MT-RAG's own patterns on random texts made of their pieces, the same
    rating as MT-RAG's extract_rating, and a 20,000-digit output read at once."""
    from ragscale.judges import mtrag_reference as ref

    utils = types.ModuleType("judge_utils")
    exec(compile(reference_source("mt-rag-benchmark", "scripts/evaluation/judge_utils.py"), "judge_utils", "exec"),
         utils.__dict__)  # noqa: S102 - the reference's own code
    source = reference_source("mt-rag-benchmark", "scripts/evaluation/judge_utils.py")
    block = source[source.index("regex_patterns = ["):source.index("]", source.index("out of 10"))]
    theirs = [re.compile(p, re.IGNORECASE) for p in re.findall(r'r"((?:[^"\\]|\\.)*)"', block)]
    assert len(theirs) == len(ref._RATING_PATTERNS) == 12
    pieces = ["1", "7", "10", "0", ".", "5", "-", "+", " ", "/10", "/", " out of 10", " OUT OF 10", "Rating: ",
              "rating: [[", "[[", "]]", "[", "]", "Score: ", "Overall Rating: ", "[Rating]\n", "x", "\n", "٣"]
    rng = random.Random(33)
    for _ in range(1500):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 14)))
        for mine, orig in zip(ref._RATING_PATTERNS, theirs):
            assert mine.findall(text)[:1] == orig.findall(text)[:1], (orig.pattern, text)
        assert ref.extract_rating(text) == utils.extract_rating(text), text
    t0 = __import__("time").monotonic()
    for text in ("9" * 20_000, "Score: " + "9" * 20_000, "Rating: [[" + "9" * 20_000 + "x", "9." * 10_000):
        assert ref.extract_rating(text) == ref.DEFAULT
    assert __import__("time").monotonic() - t0 < 5
