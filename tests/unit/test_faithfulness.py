"""RL_F (RAGAS faithfulness) against the ragas library itself, with one scripted LLM.

The scripted LLM is a deterministic function of the prompt text: it splits the answer
into sentences (statement round) and marks a statement supported when all its words
occur in the context (verdict round). Both sides see the same LLM, so equal prompts and
equal scores mean ragscale computes what ragas 0.4.3 computes.
"""

import asyncio
import json
import os
import re

import pytest

from conftest import ROOT
from ragscale.judges import faithfulness
from ragscale.judges.base import Undefined

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")


def _input_of(prompt: str) -> dict:
    body = prompt[prompt.rindex("\ninput: ") + len("\ninput: "): prompt.rindex("\nOutput: ")]
    return json.loads(body)


def _words(text: str) -> set:
    return set(re.findall(r"\w+", text.lower()))


def scripted(prompt: str) -> str:
    data = _input_of(prompt)
    if "answer" in data:
        sents = [s.strip() for s in re.split(r"(?<=[.!?])\s+", data["answer"]) if s.strip()]
        return json.dumps({"statements": sents})
    ctx = _words(data["context"])
    return json.dumps({"statements": [
        {"statement": s, "reason": "scripted", "verdict": int(_words(s) <= ctx)} for s in data["statements"]]})


CASES = [
    ("user: Who wrote it?", "Marie Curie wrote the report. It won a prize.", ["Marie Curie wrote the report in 1903."]),
    ("user: hi\nagent: hello\nuser: what about \"quotes\" and ünïcödé?", "Ünïcödé is fine. \"Quotes\" too!\nNew line.",
     ["Ünïcödé is fine", "quotes too new line"]),
    ("user: q", "Nothing here matches", ["completely different context", "second passage"]),
    ("user: q", "All words in context.", ["all words in context"]),
]


def _sample_cases():
    """The bundled sample's records that have passages (with none, RL_F is null by design: see below)."""
    out = []
    with open(os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")) as fh:
        for line in fh:
            obj = json.loads(line)
            q = "\n".join(f"{t['speaker']}: {t['text']}" for t in obj["input"])
            if obj["contexts"]:
                out.append((q, obj["predictions"][0]["text"], [c["text"] for c in obj["contexts"]]))
    return out


def ours(question, answer, passages):
    run = faithfulness.run(question, answer, passages)
    prompts = []
    try:
        prompt, parse = next(run)
        while True:
            prompts.append(prompt.messages[0]["content"])
            prompt, parse = run.send(parse(scripted(prompts[-1])))
    except StopIteration as stop:
        return stop.value, prompts


def test_prompts_equal_ragas_prompts():
    pytest.importorskip("ragas", reason="ragas 0.4.3 is installed by scripts/setup.sh (reference extra)")
    from ragas.metrics._faithfulness import (NLIStatementInput, NLIStatementPrompt, StatementGeneratorInput,
                                             StatementGeneratorPrompt)

    for q, a, ctx in CASES + _sample_cases():
        p = faithfulness.statements_prompt(q, a).messages[0]["content"]
        assert p == StatementGeneratorPrompt().to_string(StatementGeneratorInput(question=q, answer=a))
        st = json.loads(scripted(p))["statements"]
        p2 = faithfulness.verdicts_prompt("\n".join(ctx), st).messages[0]["content"]
        assert p2 == NLIStatementPrompt().to_string(NLIStatementInput(context="\n".join(ctx), statements=st))


def test_scores_equal_ragas_legacy_faithfulness():
    """MT-RAG calls ragas' legacy ``faithfulness`` (ragas.metrics._faithfulness) through evaluate()."""
    pytest.importorskip("ragas", reason="ragas 0.4.3 is installed by scripts/setup.sh (reference extra)")
    from langchain_core.outputs import Generation, LLMResult
    from ragas.dataset_schema import SingleTurnSample
    from ragas.llms.base import BaseRagasLLM
    from ragas.metrics._faithfulness import Faithfulness

    seen = []

    class Scripted(BaseRagasLLM):
        def generate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None):
            seen.append(prompt.to_string())
            return LLMResult(generations=[[Generation(text=scripted(prompt.to_string()))]])

        async def agenerate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None):
            return self.generate_text(prompt, n, temperature, stop, callbacks)

        def is_finished(self, response):
            return True

    metric = Faithfulness(llm=Scripted())
    for q, a, ctx in CASES + _sample_cases():
        seen.clear()
        theirs = asyncio.run(metric.single_turn_ascore(SingleTurnSample(user_input=q, response=a, retrieved_contexts=ctx)))
        mine, prompts = ours(q, a, ctx)
        assert prompts == seen
        assert mine == pytest.approx(theirs, abs=0), (q, a)


def test_scores_equal_ragas_collections_faithfulness():
    """ragas 0.4's newer ``ragas.metrics.collections.Faithfulness`` (instructor-style LLM): same scores."""
    pytest.importorskip("ragas", reason="ragas 0.4.3 is installed by scripts/setup.sh (reference extra)")
    from ragas.llms.base import InstructorBaseRagasLLM
    from ragas.metrics.collections import Faithfulness

    class Scripted(InstructorBaseRagasLLM):
        def generate(self, prompt, response_model):
            return response_model.model_validate_json(scripted(prompt))

        async def agenerate(self, prompt, response_model):
            return self.generate(prompt, response_model)

    metric = Faithfulness(llm=Scripted())
    for q, a, ctx in CASES + _sample_cases():
        theirs = asyncio.run(metric.ascore(user_input=q, response=a, retrieved_contexts=ctx)).value
        mine, _ = ours(q, a, ctx)
        assert mine == pytest.approx(theirs, abs=0)


def test_undefined_cases_and_parsing():
    result, prompts = ours("user: q", "x", [])
    assert isinstance(result, Undefined) and "no passages" in result.reason and prompts == []
    run = faithfulness.run("user: q", "An answer.", ["ctx"])
    next(run)
    with pytest.raises(StopIteration) as stop:
        run.send([])
    assert isinstance(stop.value.value, Undefined) and "no statements" in stop.value.value.reason
    assert isinstance(faithfulness.score([]), Undefined)
    assert faithfulness.score([1, 0, 1, 1]) == 0.75
    # ragas counts truthy verdicts over the verdicts returned (not over the statements asked)
    assert faithfulness.score([2, 0]) == 0.5
    from ragscale.judges.base import JudgeParseError

    for bad in ["", "not json", "[]", '{"statements": "a"}', '{"statements": [1]}']:
        with pytest.raises(JudgeParseError):
            faithfulness.parse_statements(bad)
    for bad in ['{"statements": [{"statement": "s", "reason": "r"}]}', '{"statements": [{"statement": "s", "reason": "r", "verdict": "1"}]}',
                '{"statements": [{"statement": "s", "reason": "r", "verdict": true}]}', '{"statements": {}}']:
        with pytest.raises(JudgeParseError):
            faithfulness.parse_verdicts(bad)
    schema = faithfulness.verdicts_prompt("c", ["a", "b", "c"]).schema
    assert schema["properties"]["statements"]["minItems"] == schema["properties"]["statements"]["maxItems"] == 3


def test_judge_actor_batches_both_rounds_across_records(tmp_path, monkeypatch):
    """Every record's statement prompt goes in one engine call, then every verdict prompt in one."""
    import ragscale.actors.judge as judge_mod
    from ragscale.actors.engines import Generation
    from ragscale.io.inputs import resolve_inputs, scan
    from ragscale.judges import JUDGES
    from ragscale.pipeline.cpu_stages import load_and_lexical, pointer_table
    from ragscale.row import judge_error_entries, row_schema
    from rows import rows_of  # tests/rows.py

    calls = []

    class Engine:
        name, model = "scripted", "scripted"

        def generate(self, prompts, temperature=0.0, seed=None, on_done=None):
            calls.append(len(prompts))
            return [Generation(scripted(p.messages[0]["content"]), 10, 5) for p in prompts]

    monkeypatch.setattr(judge_mod, "build", lambda kwargs: Engine())
    files = resolve_inputs(os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl"))
    rows = load_and_lexical(pointer_table(list(scan(files, with_tasks=False))[:8]), files=files, metrics=["Recall"],
                            schema=row_schema(["Recall", *JUDGES["ragas_faithfulness"].metrics]))
    from ragscale.pipeline.stage import process_table

    out = rows_of(process_table(judge_mod.JudgeActor({}, ["ragas_faithfulness"], str(tmp_path / "c.sqlite")), "judge",
                                rows))
    with_passages = sum(1 for r in out if json.loads(r["input_json"])["contexts"])
    assert 0 < with_passages < 8 and calls == [with_passages, with_passages]
    for r in out:
        obj = json.loads(r["input_json"])
        q = "\n".join(f"{t['speaker']}: {t['text']}" for t in obj["input"])
        expected, _ = ours(q, obj["predictions"][0]["text"], [c["text"] for c in obj["contexts"]])
        if isinstance(expected, Undefined):  # no passages: null, and the reason on the record
            assert "RL_F" in r["metrics"] and r["metrics"]["RL_F"] is None
            assert judge_error_entries(r) == [{"judge": "ragas_faithfulness", "reason": expected.reason, "undefined": True}]
        else:
            assert r["metrics"]["RL_F"] == [expected] and not r["judge_errors"]
    stats = json.loads(out[0]["stats"])
    n = 2 * with_passages
    assert stats["judge_prompts"] == n and stats["judgeby|ragas_faithfulness|generations"] == n
    # the same batch again: both rounds come from the cache, nothing is generated
    calls.clear()
    again = rows_of(process_table(judge_mod.JudgeActor({}, ["ragas_faithfulness"], str(tmp_path / "c.sqlite")),
                                  "judge", rows))
    assert calls == [] and [r["metrics"] for r in again] == [r["metrics"] for r in out]
