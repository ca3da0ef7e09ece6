"""ragas' judges (RL_F faithfulness, answer relevancy, context precision, context recall) under the
``reference`` protocol against ragas 0.4.3 itself, driven the way MT-RAG drives it: a LangChain
chat model wrapped by ragas' LangchainLLMWrapper (what ``ragas.evaluate`` does with MT-RAG's
ChatOpenAI). One scripted chat model answers both sides as a function of the prompt text, with
well-formed, fenced, chatty and broken outputs, so that ragas' FixOutputFormat rounds run too:
equal prompt strings (byte for byte), equal messages and temperatures, equal parses and equal
scores mean ragscale runs what ragas runs. The ``constrained`` protocol keeps its own prompts."""

from __future__ import annotations

import asyncio
import base64
import importlib
import json
import os
import re
import warnings

import numpy as np
import pytest

from conftest import ROOT, reference_source
from ragscale.judges import JUDGES
from ragscale.judges import faithfulness as fa
from ragscale.judges import ragas_metrics as rm
from ragscale.judges import ragas_protocol as rp
from ragscale.judges.base import JudgeParseError, JudgeResult, Undefined, cache_key, drive
from judge_inputs import judge_input_of
from ragscale.metrics.relevancy import answer_relevancy_score

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
ragas = pytest.importorskip("ragas", reason="ragas 0.4.3 is installed by scripts/setup.sh (reference extra)")



# --- the scripted judge model -------------------------------------------------------------------

def ascii_id(text: str) -> str:
    """A test id of ASCII letters, digits and spaces (pytest escapes other characters in ids, and an
    escaped id cannot select its test again: mutation testing selects tests by id)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in " .,-") else "_" for c in text)


def _input_of(prompt: str) -> dict:
    return json.loads(prompt[prompt.rindex("\ninput: ") + len("\ninput: "): prompt.rindex("\nOutput: ")])


def _words(text: str) -> set:
    return set(re.findall(r"\w+", text.lower()))


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def _clean(prompt: str, data: dict, sample: int) -> dict:
    """A well-formed output for an original ragas prompt (its input ``data``)."""
    if set(data) == {"question", "answer"}:  # statements
        return {"statements": _sentences(data["answer"])}
    if set(data) == {"context", "statements"}:  # NLI verdicts ("TWO" gives a verdict 2: truthy)
        ctx = _words(data["context"])
        return {"statements": [{"statement": s, "reason": "scripted",
                                "verdict": 2 if "TWO" in s else int(_words(s) <= ctx)} for s in data["statements"]]}
    if set(data) == {"response"}:  # answer relevancy: a question per sample
        r = data["response"]
        q = "" if "EMPTY" in r else f"what about {' '.join(sorted(_words(r))[sample::2][:6])}?"
        return {"question": q, "noncommittal": int("don't know" in r.lower() or ("MIXED" in r and not sample))}
    if "verify if the context was useful" in prompt:  # context precision
        return {"reason": "scripted", "verdict": int(len(_words(data["context"]) & _words(data["answer"])) >= 2)}
    ctx = _words(data["context"])  # context recall
    return {"classifications": [{"statement": s, "reason": "scripted",
                                 "attributed": int(len(_words(s) & ctx) * 2 >= len(_words(s)))}
                                for s in _sentences(data["answer"])]}


def _encode(obj: dict) -> str:
    """A broken output that carries the intended one (base64 has no brackets: nothing parses)."""
    return "I would say: " + base64.b64encode(json.dumps(obj).encode()).decode()


def _decode(broken: str) -> dict | str:
    try:
        return json.loads(base64.b64decode(broken.rsplit(" ", 1)[-1]))
    except ValueError:  # the model never raises: ragas would retry it with backoff
        return "undecodable"


def _style(obj: dict, marker: str, sample: int) -> str:
    """How the model writes an output: the markers in the prompt's input choose."""
    text = json.dumps(obj, indent=2, ensure_ascii=False)
    if "BROKEN" in marker and sample != 1:
        return _encode(obj)
    if "FENCED" in marker:
        return f"Sure! Here is the output:\n```json\n{text}\n```\nHope this helps {{:"
    if "CHATTY" in marker:
        return f"Output: {json.dumps(obj)} and that is all [done]"
    return text


def scripted(prompt: str, sample: int = 0) -> str:
    """The judge model. A FixOutputFormat prompt (its input: output_string, prompt_value) is
    answered with ``{"text": <the intended output>}``, except that inputs marked "STUBBORN" stay
    broken for one nested fix more (the nested fix then answers ``{"text": "{\"text\": ...}"}``,
    the fixed output of the fix, as ragas re-parses it; "FLAT" answers the intended output
    unwrapped, which ragas cannot parse), "HOPELESS" ones never parse, and "BADFIX" fixes with
    a text that is not JSON, "CHATTYFIX" with the intended output after some words (ragas does
    not extract the JSON of a fixed text)."""
    data = _input_of(prompt)
    if set(data) == {"output_string", "prompt_value"}:
        inner, depth = data, 0
        while set(inner) == {"output_string", "prompt_value"}:
            original = inner["prompt_value"]
            inner, depth = _input_of(original), depth + 1
        marker = json.dumps(inner)
        if "HOPELESS" in marker or ("STUBBORN" in marker and depth == 1):
            return "still no json"
        if "BADFIX" in marker:
            return json.dumps({"text": "not json either"})
        if "CHATTYFIX" in marker:
            return json.dumps({"text": "Fixed: " + json.dumps(_decode(data["output_string"]))})
        # the intended output: decoded from the first broken output of the chain
        first = data
        while set(_input_of(first["prompt_value"])) == {"output_string", "prompt_value"}:
            first = _input_of(first["prompt_value"])
        fixed = json.dumps(_decode(first["output_string"]))
        for _ in range(1 if "FLAT" in marker else depth):
            fixed = json.dumps({"text": fixed})
        return fixed
    return _style(_clean(prompt, data, sample), json.dumps(data), sample)


def _fake_chat(calls: list):
    """A LangChain chat model (what MT-RAG passes to ragas.evaluate) that records each request:
    its messages, temperature and n as ragas' LangchainLLMWrapper sets them."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class FakeChat(BaseChatModel):
        temperature: float = 0.7
        n: int = 1

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN003
            calls.append(([(m.type, m.content) for m in messages], self.temperature, self.n))
            return ChatResult(generations=[
                ChatGeneration(message=AIMessage(content=scripted(messages[-1].content, i)),
                               generation_info={"finish_reason": "stop"}) for i in range(self.n)])

    return FakeChat()


def _ragas_llm(calls: list):
    from ragas.llms.base import LangchainLLMWrapper

    with warnings.catch_warnings():  # ragas 0.4 deprecates the wrapper that evaluate() itself uses
        warnings.simplefilter("ignore", DeprecationWarning)
        return LangchainLLMWrapper(_fake_chat(calls))


def _ragas_requests(calls: list) -> list:
    """ragas' requests as (messages, temperature), one per sample (n samples: n entries)."""
    return [(tuple(msgs), t) for msgs, t, n in calls for _ in range(n)]


def _ours(run) -> tuple:  # noqa: ANN001
    """Drive a ragscale judge run with the scripted model; its requests as (messages, temperature)."""
    sent = []

    def respond(p):  # noqa: ANN001, ANN202
        assert p.schema is None and p.max_tokens == rp.REFERENCE_MAX_TOKENS and p.params == ()
        sent.append((tuple((m["role"].replace("user", "human"), m["content"]) for m in p.messages), p.sampling[0]))
        return scripted(p.messages[0]["content"], p.sampling[1])

    try:
        result = drive(run, respond)
    except JudgeParseError as e:
        result = e
    return result, sent


def _key(req: tuple) -> tuple:
    return req[0][0][1], req[1]


# --- faithfulness (RL_F) ------------------------------------------------------------------------

FAITH_CASES = [
    ("user: Who wrote it?", "Marie Curie wrote the report. It won a prize.", ["Marie Curie wrote the report in 1903."]),
    ("user: hi\nagent: hello\nuser: what about \"quotes\" and ünïcödé?",
     "Ünïcödé is fine. \"Quotes\" too!\nNew line.",
     ["Ünïcödé is fine", "quotes too new line"]),
    ("user: q", "FENCED answer words. Another FENCED sentence.", ["fenced answer words"]),
    ("user: q", "CHATTY all words in context.", ["chatty all words in context"]),
    ("user: q", "BROKEN statements come first. Then more.", ["broken statements come first"]),
    ("user: q", "BROKEN STUBBORN output here.", ["broken stubborn output here"]),
    ("user: q", "BROKEN STUBBORN FLAT output.", ["broken stubborn output"]),  # ragas raises: NaN
    ("user: q", "BROKEN CHATTYFIX output.", ["broken output"]),  # ragas raises: NaN
    ("user: q", "A TWO verdict. A plain one.", ["a plain one"]),
    ("user: q", "No passages at all.", []),  # ragas asks against an empty context
]


def _ragas_faithfulness(q, a, ctx, calls):  # noqa: ANN001, ANN202
    from ragas.dataset_schema import SingleTurnSample
    from ragas.metrics._faithfulness import Faithfulness

    metric = Faithfulness(llm=_ragas_llm(calls))
    try:
        sample = SingleTurnSample(user_input=q, response=a, retrieved_contexts=ctx)
        return asyncio.run(metric.single_turn_ascore(sample))
    except Exception as e:  # noqa: BLE001 - evaluate() turns any exception into NaN
        return e


def _row(a, ctx, ref=None):  # noqa: ANN001, ANN202
    return {"prediction": a, "passages": ctx, "targets": [ref] if ref else []}


def _obj(q):  # noqa: ANN001, ANN202
    return {"input": [{"speaker": line.split(": ", 1)[0], "text": line.split(": ", 1)[1]} for line in q.split("\n")]}


def _mtrag(q, a, ctx, ref=None):  # noqa: ANN001, ANN202
    """An MT-RAG record's JudgeInput: ``q`` its conversation as ``speaker: text`` lines."""
    return judge_input_of(_obj(q), _row(a, ctx, ref))


def _single(q, a, ctx, ref=None):  # noqa: ANN001, ANN202
    """A ragas record's JudgeInput (``user_input`` the question)."""
    return judge_input_of({"user_input": q}, _row(a, ctx, ref))


@pytest.mark.parametrize("case", FAITH_CASES, ids=lambda c: ascii_id(c[1][:20]))
def test_faithfulness_requests_and_score_equal_ragas(case):
    q, a, ctx = case
    calls: list = []
    theirs = _ragas_faithfulness(q, a, ctx, calls)
    mine, sent = _ours(fa.from_record(_mtrag(q, a, ctx), protocol="reference", model="m"))
    # the same requests in the same order: one human message, the prompt string, temperature 0.01
    assert sent == _ragas_requests(calls) and all(len(m) == 1 and m[0][0] == "human" for m, _ in sent)
    assert {t for _, t in sent} == {0.01}
    if isinstance(theirs, Exception):  # ragas gives up (evaluate: NaN): a parse failure, null
        assert isinstance(mine, JudgeParseError) and ("FLAT" in a or "CHATTYFIX" in a)
        return
    assert mine == pytest.approx(theirs, abs=0)
    fixes = sum(m[0][1].startswith("The output string did not satisfy the constraints") for m, _ in sent)
    # a broken output of each round (the marker reaches the statements) is fixed once; a fix whose
    # own output does not parse is fixed again (nested)
    assert fixes == (4 if "STUBBORN" in a else 2 if "BROKEN" in a else 0)


def test_faithfulness_edge_cases_equal_ragas():
    """No statements: NaN -> null with the reason; a verdict list that ragas cannot parse even
    after its fixes: ragas raises (NaN in evaluate) -> a parse failure (null, judge_errors)."""
    from ragas.exceptions import RagasOutputParserException
    from langchain_core.exceptions import OutputParserException

    calls: list = []
    assert np.isnan(_ragas_faithfulness("user: q", "", ["ctx"], calls))
    mine, sent = _ours(fa.from_record(_mtrag("user: q", "", ["ctx"]), protocol="reference"))
    assert isinstance(mine, Undefined) and "no statements" in mine.reason and sent == _ragas_requests(calls)
    for marker, exc in (("HOPELESS", RagasOutputParserException), ("BADFIX", OutputParserException)):
        calls = []
        theirs = _ragas_faithfulness("user: q", f"BROKEN {marker} here.", ["c"], calls)
        mine, sent = _ours(fa.from_record(_mtrag("user: q", f"BROKEN {marker} here.", ["c"]), protocol="reference"))
        assert isinstance(theirs, exc) and isinstance(mine, JudgeParseError), (marker, theirs, mine)
        assert sent == _ragas_requests(calls)
    assert len(sent) == 2  # BADFIX: the output, its fix; the fixed text does not parse
    calls = []
    _ragas_faithfulness("user: q", "BROKEN HOPELESS here.", ["c"], calls)
    assert len(calls) == 1 + rp.FIX_RETRIES  # the output and three nested fixes


def test_faithfulness_scores_equal_ragas_evaluate():
    """MT-RAG's own call: ``evaluate(dataset, metrics=[faithfulness], llm=<LangChain chat model>)``
    on question/answer/contexts columns; NaN where ragscale gives null."""
    datasets = pytest.importorskip("datasets")
    from ragas import evaluate
    from ragas.metrics._faithfulness import Faithfulness

    cases = [*FAITH_CASES, ("user: q", "", ["ctx"]), ("user: q", "BROKEN HOPELESS here.", ["c"])]
    ds = datasets.Dataset.from_dict({"question": [c[0] for c in cases], "answer": [c[1] for c in cases],
                                     "contexts": [c[2] for c in cases]})
    calls: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = evaluate(ds, metrics=[Faithfulness()], llm=_fake_chat(calls), show_progress=False,
                          raise_exceptions=False)
    theirs = result.to_pandas()["faithfulness"].tolist()
    assert len(theirs) == len(cases)
    for (q, a, ctx), t in zip(cases, theirs):
        mine, _ = _ours(fa.from_record(_mtrag(q, a, ctx), protocol="reference"))
        if np.isnan(t):
            assert isinstance(mine, (Undefined, JudgeParseError)), (a, mine)
        else:
            assert mine == pytest.approx(t, abs=0), (a, mine, t)
    assert {t for _, t, _ in calls} == {0.01}


def test_faithfulness_prompts_equal_ragas_prompt_objects():
    """Every round's prompt string equals the metric's own prompt objects' ``to_string``, and the
    fix prompt equals FixOutputFormat's, for the bundled sample's records too."""
    from ragas.metrics._faithfulness import Faithfulness, NLIStatementInput, StatementGeneratorInput
    from ragas.prompt.pydantic_prompt import OutputStringAndPrompt, fix_output_format_prompt

    metric = Faithfulness()
    cases = list(FAITH_CASES)
    with open(os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")) as fh:
        for line in fh:
            o = json.loads(line)
            cases.append(("\n".join(f"{t['speaker']}: {t['text']}" for t in o["input"]), o["predictions"][0]["text"],
                          [c["text"] for c in o["contexts"]]))
    for q, a, ctx in cases:
        run = fa.reference_run(q, a, ctx)
        prompt, parse = next(run)
        assert prompt.messages[0]["content"] == metric.statement_generator_prompt.to_string(
            StatementGeneratorInput(question=q, answer=a))
        assert prompt.version == fa.REFERENCE_VERSION and prompt.sampling == (0.01, 0) and prompt.schema is None
        statements = _sentences(a) or ["x"]
        prompt2, _ = run.send({"statements": statements})
        assert prompt2.messages[0]["content"] == metric.nli_statements_prompt.to_string(
            NLIStatementInput(context="\n".join(ctx), statements=statements))
    raw = 'Not "json"\n\t\x01 ünï {[ \\ \u2028'
    fixed = rp.fix_prompt(prompt, raw)
    assert fixed.messages[0]["content"] == fix_output_format_prompt.to_string(
        OutputStringAndPrompt(output_string=raw, prompt_value=prompt.messages[0]["content"]))
    assert fixed.sampling == (0.01, 0) and fixed.version == prompt.version and fixed.judge == prompt.judge


def test_the_constrained_protocol_is_unchanged():
    """``protocol="constrained"`` (and no protocol) renders today's prompts: versions, schemas,
    max_tokens and cache keys as before; the reference prompts have their own version."""
    q, a, ctx = FAITH_CASES[0]
    default = next(fa.from_record(_mtrag(q, a, ctx)))[0]
    constrained = next(fa.from_record(_mtrag(q, a, ctx), protocol="constrained", model="m"))[0]
    reference = next(fa.from_record(_mtrag(q, a, ctx), protocol="reference", model="m"))[0]
    assert default == constrained and default.version == "ragas-0.4.3-faithfulness-v1"
    assert default.schema == fa.STATEMENTS_SCHEMA and default.max_tokens == 1024 and default.sampling is None
    assert reference.messages == default.messages  # the same ragas prompt string
    key = cache_key("e", "m", default, {"temperature": 0.0, "seed": 0})
    assert key == cache_key("e", "m", constrained, {"temperature": 0.0, "seed": 0})
    assert key != cache_key("e", "m", reference, {"temperature": 0.01, "seed": 0})
    for name in (fa.NAME, rm.ANSWER_RELEVANCY, rm.CONTEXT_PRECISION, rm.CONTEXT_RECALL):
        spec = JUDGES[name]
        assert spec.version_for("constrained") == spec.version and spec.version.endswith("-v1")
        assert spec.version_for("reference") == spec.reference_version != spec.version
        assert spec.options("reference", "m") == {"protocol": "reference", "model": "m"}
    assert JUDGES[rm.CONTEXT_PRECISION].version == "ragas-0.4.3-v1"


# --- answer relevancy, context precision, context recall ----------------------------------------

CASES = [  # (question, response, contexts, reference)
    ("Who wrote the report?", "Marie Curie wrote the report in 1903. It won a prize.",
     ["P: Marie Curie wrote the report in 1903.", "P: The prize was the Nobel Prize.", "P: Unrelated text about cats."],
     "Marie Curie wrote it. It won the Nobel Prize. She lived in Paris."),
    ("What is the capital?", "I don't know, sorry.", ["P: Paris is the capital of France."], "Paris is the capital."),
    ("Q?", "EMPTY answer here", ["P: nothing relevant", "P: also nothing"], "Zebras are striped."),
    ("Ünïcödé and \"quotes\"?", "FENCED Ünïcödé works. \"Quotes\" too!",
     ["P: FENCED ünïcödé works fine", "P: quotes too"],
     "FENCED Ünïcödé works. Quotes too."),
    ("Is the pool open on Sundays?", "MIXED: the pool is open on Sundays until noon.",
     ["P: The pool opens on Sundays.", "P: CHATTY Sunday hours end at noon for the pool."], "CHATTY   "),
    ("Broken?", "BROKEN output for some samples.", ["P: BROKEN broken output", "P: fine context here"],
     "BROKEN output. STUBBORN sentence here."),
    ("Nothing retrieved?", "An answer.", [], "A reference."),  # no contexts: ragas still scores
]


def embed(text: str) -> list:
    """A deterministic bag-of-words embedding (hashed, 64 dims)."""
    import hashlib

    v = np.zeros(64)
    for w in _words(text) or {"<empty>"}:
        v[int(hashlib.md5(w.encode()).hexdigest(), 16) % 64] += 1.0
    return v.tolist()


def _embeddings():
    from ragas.embeddings.base import BaseRagasEmbeddings

    class _Emb(BaseRagasEmbeddings):
        def embed_query(self, text):  # noqa: ANN001, ANN202
            return embed(text)

        def embed_documents(self, texts):  # noqa: ANN001, ANN202
            return [embed(t) for t in texts]

        async def aembed_query(self, text):  # noqa: ANN001, ANN202
            return embed(text)

        async def aembed_documents(self, texts):  # noqa: ANN001, ANN202
            return [embed(t) for t in texts]

    return _Emb()


def _ragas_score(metric, q, a, ctx, ref):  # noqa: ANN001, ANN202
    from ragas.dataset_schema import SingleTurnSample

    try:
        return asyncio.run(metric.single_turn_ascore(
            SingleTurnSample(user_input=q, response=a, retrieved_contexts=ctx, reference=ref)))
    except Exception as e:  # noqa: BLE001
        return e


@pytest.mark.parametrize("case", CASES, ids=lambda c: ascii_id(c[1][:16]))
def test_answer_relevancy_equals_ragas(case):
    from ragas.metrics._answer_relevance import AnswerRelevancy

    q, a, ctx, ref = case
    calls: list = []
    theirs = _ragas_score(AnswerRelevancy(llm=_ragas_llm(calls), embeddings=_embeddings()), q, a, ctx, ref)
    res, sent = _ours(rm.answer_relevancy(_single(q, a, ctx, ref), protocol="reference", model="m"))
    # one request with n = 3 at temperature 0.3 (ragscale: three samples, seeds 0..2), fixes at 0.01
    assert sorted(sent, key=_key) == sorted(_ragas_requests(calls), key=_key)
    assert calls[0][1:] == (0.3, 3) and all(c[1:] == (0.01, 1) for c in calls[1:])
    d = res.details
    mine = answer_relevancy_score(embed(d["question"]), [embed(g) for g in d["generated"]], d["generated"],
                                  d["noncommittal"])
    if isinstance(theirs, float) and not np.isnan(theirs):
        assert mine == pytest.approx(theirs, abs=1e-12)
    else:
        assert mine is None
    assert d["question"] == q  # ragas embeds user_input


def test_answer_relevancy_edge_cases():
    """A sample ragas cannot parse even after its fixes: ragas raises (NaN) -> null, the sample
    failed; an MT-RAG record's question is the conversation, as ragas' user_input."""
    from ragas.metrics._answer_relevance import AnswerRelevancy

    calls: list = []
    theirs = _ragas_score(AnswerRelevancy(llm=_ragas_llm(calls), embeddings=_embeddings()), "q", "BROKEN HOPELESS",
                          [], None)
    assert isinstance(theirs, Exception) and len(calls) == 1 + rp.FIX_RETRIES  # it stops at the first sample
    runs = rm.answer_relevancy(_mtrag("user: hi\nagent: hello\nuser: and?", "BROKEN HOPELESS", []),
                               protocol="reference")
    res, sent = _ours(runs)
    assert res.details["generated"] == [] and res.details["failed"] == 2
    assert res.details["question"] == "user: hi\nagent: hello\nuser: and?"
    assert len(sent) == 3 + 2 * rp.FIX_RETRIES  # samples 0 and 2 broken, three fixes each
    res, _ = _ours(rm.answer_relevancy(_single("q", "", []), protocol="reference"))
    assert isinstance(res, JudgeResult)  # ragas asks for an empty response too
    res, _ = _ours(rm.answer_relevancy(_single(" ", "a", []), protocol="reference"))
    assert isinstance(res, Undefined)


@pytest.mark.parametrize("name", ["context_precision", "context_recall"])
def test_context_metrics_equal_ragas(name):
    from ragas.metrics._context_precision import LLMContextPrecisionWithReference
    from ragas.metrics._context_recall import LLMContextRecall

    cls, start = {"context_precision": (LLMContextPrecisionWithReference, rm.context_precision),
                  "context_recall": (LLMContextRecall, rm.context_recall)}[name]
    for q, a, ctx, ref in CASES:
        calls: list = []
        theirs = _ragas_score(cls(llm=_ragas_llm(calls)), q, a, ctx, ref)
        res, sent = _ours(start(_single(q, a, ctx, ref), protocol="reference", model="m"))
        assert sorted(sent, key=_key) == sorted(_ragas_requests(calls), key=_key), (name, a)
        assert {t for _, t in sent} <= {0.01}
        if isinstance(theirs, float) and np.isnan(theirs):  # no reference sentence classified
            assert isinstance(res, Undefined) and name == "context_recall", (q, ref, res)
            continue
        assert isinstance(res, JudgeResult), (name, a, res)
        assert res.metrics[name] == pytest.approx(theirs, abs=1e-12), (name, q, ref)
    # no contexts: precision 0.0 without asking, recall asked against an empty context
    res, sent = _ours(rm.context_precision(_single("q", "a", [], "r."), protocol="reference"))
    assert res.metrics["context_precision"] == 0.0 and sent == []


def test_context_metric_failures_and_no_reference():
    """A context whose verdict never parses: ragas raises (NaN) -> null with the failed item; no
    reference: null with the reason (ragas: a validation error)."""
    from ragas.metrics._context_precision import LLMContextPrecisionWithReference
    from ragas.metrics._context_recall import LLMContextRecall

    ctx = ["P: HOPELESS BROKEN", "P: fine"]
    assert isinstance(_ragas_score(LLMContextPrecisionWithReference(llm=_ragas_llm([])), "q", "a", ctx, "r fine."),
                      Exception)
    res, _ = _ours(rm.context_precision(_single("q", "a", ctx, "r fine."), protocol="reference"))
    assert res.metrics["context_precision"] is None and res.details["verdicts"] == [None, 0]
    for cls, start in ((LLMContextPrecisionWithReference, rm.context_precision), (LLMContextRecall, rm.context_recall)):
        assert isinstance(_ragas_score(cls(llm=_ragas_llm([])), "q", "a", ["P: c"], None), Exception)
        res, sent = _ours(start(_single("q", "a", ["P: c"]), protocol="reference"))
        assert isinstance(res, Undefined) and "no reference" in res.reason and sent == []


def test_prompts_of_every_round_equal_ragas_to_string():
    from ragas.metrics._answer_relevance import ResponseRelevanceInput, ResponseRelevancePrompt
    from ragas.metrics._context_precision import QAC, ContextPrecisionPrompt
    from ragas.metrics._context_recall import QCA, ContextRecallClassificationPrompt

    for q, a, ctx, ref in CASES:
        first = rm.reference(rm.ANSWER_RELEVANCY, {"response": a}, 2)
        assert first.messages[0]["content"] == ResponseRelevancePrompt().to_string(ResponseRelevanceInput(response=a))
        assert first.sampling == (0.3, 2) and first.version == rm.REFERENCE_VERSION
        for c in ctx:
            p = rm.reference(rm.CONTEXT_PRECISION, {"question": q, "context": c, "answer": ref})
            qac = QAC(question=q, context=c, answer=ref)
            assert p.messages[0]["content"] == ContextPrecisionPrompt().to_string(qac)
            assert p.sampling == (0.01, 0)
        p = rm.reference(rm.CONTEXT_RECALL, {"question": q, "context": "\n".join(ctx), "answer": ref})
        assert p.messages[0]["content"] == ContextRecallClassificationPrompt().to_string(
            QCA(question=q, context="\n".join(ctx), answer=ref))


# --- ragas' output parser -----------------------------------------------------------------------

OUTPUTS = [
    '{"statements": ["a", "b"]}',
    '```json\n{"statements": ["a"]}\n```',
    '```\n{"statements": ["a"]}\n```',
    'Sure! Here you go: {"statements": ["a"]} Anything else? {"statements": ["b"]}',
    'text [note] then {"statements": ["a"]}',
    '```json [1] ``` {"statements": ["a"]}',
    '{"statements": ["a } b", "c"]}',
    '{"statements": ["unterminated',
    '{"statements": ["a", "b"',
    '{"statements": ["a",',
    '{"statements": ["a"], }',
    "{'statements': ['a']}",
    '{"statements": ["a"}',
    '{"statements": ["a\\',
    '{"statements": ["line\nbreak', '{"statements": ["a \\" b', '{"statements": ["a\\\\',
    '{"statements": ["line\nbreak", "tab\there"]}',
    '{"statements": ["esc \\" quote", "ünïcödé"]}',
    '{"statements": []}',
    '{"statements": "a"}',
    '{"statements": [1]}',
    '{"statements": null}',
    '{"other": []}',
    '{"statements": ["a"], "extra": 1}',
    '["a"]',
    "",
    "   ",
    "no json at all",
    "```json\n```",
    '{"statements": ["a"]}}}',
    '{{"statements": ["a"]}}',
    '  \n{"statements": ["a"]}  ``` ',
    '{"statements": ["a"]} trailing ``` {"x": 1}',
]
VALUES = ["1", " 1 ", "1.0", "+1", "-0", "1_0", "01", "1.00", "0x1", "1e2", "1.", ".0", "1__0", "yes", "", "١",
          1, 0, 2, -1, True, False, 1.0, 1.5, 100.0, 1e19, None, [1], {"a": 1}, "1.5"]


def _ragas_result(model, text: str, extract: bool = True):  # noqa: ANN001, ANN202
    from langchain_core.output_parsers import PydanticOutputParser
    from langchain_core.prompt_values import StringPromptValue
    from ragas.prompt.pydantic_prompt import RagasOutputParser

    try:
        if extract:
            out = asyncio.run(RagasOutputParser(pydantic_object=model).parse_output_string(
                output_string=text, prompt_value=StringPromptValue(text="p"), llm=None, callbacks=None, retries_left=0))
        else:
            out = PydanticOutputParser(pydantic_object=model).parse(text)
        return out.model_dump()
    except Exception:  # noqa: BLE001 - RagasOutputParserException / OutputParserException
        return "error"


def _ours_result(shape, text: str, extract: bool = True):  # noqa: ANN001, ANN202
    try:
        return rp.ragas_parse(shape, text, extract)
    except ValueError:
        return "error"


def test_parser_equals_ragas_parser_on_crafted_outputs():
    from ragas.metrics._faithfulness import NLIStatementOutput, StatementGeneratorOutput
    from ragas.prompt.base import StringIO

    seen = set()
    for text in OUTPUTS:
        for extract in (True, False):
            theirs = _ragas_result(StatementGeneratorOutput, text, extract)
            assert _ours_result(fa.STATEMENTS_MODEL, text, extract) == theirs, (text, extract)
            seen.add(json.dumps(theirs))
        wrapped = json.dumps({"text": text})
        assert _ours_result(rp.TEXT_MODEL, wrapped) == _ragas_result(StringIO, wrapped)
    assert len(seen) > 8  # the cases reach many different outcomes, errors included
    for v in VALUES:
        text = "Output: " + json.dumps({"statements": [{"statement": "s", "reason": "r", "verdict": v}]})
        theirs = _ragas_result(NLIStatementOutput, text)
        assert _ours_result(fa.NLI_MODEL, text) == theirs, v
    for model, (module, shape) in ((rm.RELEVANCE_MODEL, ("_answer_relevance", "ResponseRelevanceOutput")),
                                   (rm.VERIFICATION_MODEL, ("_context_precision", "Verification")),
                                   (rm.CLASSIFICATIONS_MODEL, ("_context_recall", "ContextRecallClassifications"))):
        cls = getattr(importlib.import_module(f"ragas.metrics.{module}"), shape)
        sample = {"question": "q", "noncommittal": "1", "reason": "r", "verdict": 1.0,
                  "classifications": [{"statement": "s", "reason": "r", "attributed": True}]}
        for text in (json.dumps(sample), json.dumps({k: sample[k] for k in list(sample)[:2]}), "[]", "{}"):
            assert _ours_result(model, text) == _ragas_result(cls, text), (shape, text)
        assert set(cls.model_fields) == set(model)
        assert _shape_of(cls) == model


def _shape_of(cls) -> dict:  # noqa: ANN001
    """A ragas output model (pydantic) as the shape ragscale's ``validate`` reads."""
    out = {}
    for name, f in cls.model_fields.items():
        args = getattr(f.annotation, "__args__", ())
        out[name] = [_shape_of(args[0]) if hasattr(args[0], "model_fields") else args[0]] if args else f.annotation
    return out


def test_parser_shapes_equal_ragas_output_models():
    from ragas.metrics._faithfulness import NLIStatementOutput, StatementGeneratorOutput
    from ragas.prompt.base import StringIO

    assert _shape_of(StatementGeneratorOutput) == fa.STATEMENTS_MODEL
    assert _shape_of(NLIStatementOutput) == fa.NLI_MODEL and _shape_of(StringIO) == rp.TEXT_MODEL


def test_sampling_equals_ragas():
    from ragas.llms.base import BaseRagasLLM
    from ragas.metrics._answer_relevance import ResponseRelevancy
    from ragas.prompt.pydantic_prompt import PydanticPrompt

    assert BaseRagasLLM.get_temperature(None, 1) == rp.REFERENCE_TEMPERATURE == 0.01
    assert BaseRagasLLM.get_temperature(None, 3) == rm.SAMPLE_TEMPERATURE == 0.3
    assert ResponseRelevancy().strictness == rm.STRICTNESS
    import inspect

    assert inspect.signature(PydanticPrompt.generate).parameters["retries_left"].default == rp.FIX_RETRIES


# --- the judge actor ----------------------------------------------------------------------------

def test_judge_actor_runs_the_reference_rounds(tmp_path, monkeypatch):
    """Under ``protocol=reference`` the actor sends ragas' prompts with no schema at temperature
    0.01 and seed 0; a broken output is fixed in an extra round, batched across records."""
    import ragscale.actors.judge as judge_mod
    from ragscale.actors.engines import Generation
    from ragscale.io.inputs import resolve_inputs, scan
    from ragscale.pipeline.stage import process_table
    from ragscale.pipeline.cpu_stages import load_and_lexical, pointer_table
    from ragscale.judges.judge_input import judge_input
    from ragscale.row import row_schema
    from rows import rows_of
    from rows import table as batch_of  # tests/rows.py

    calls = []

    class Engine:
        name, model = "scripted", "scripted"

        def generate(self, prompts, temperature=0.0, seed=None, on_done=None):  # noqa: ANN001, ANN202
            calls.append((len(prompts), temperature, seed, {p.schema is None for p in prompts}))
            return [Generation(scripted(p.messages[0]["content"], p.sampling[1]), 10, 5) for p in prompts]

    monkeypatch.setattr(judge_mod, "build", lambda kwargs: Engine())
    files = resolve_inputs(os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl"))
    judged = JUDGES["ragas_faithfulness"].metrics
    table = load_and_lexical(pointer_table(list(scan(files, with_tasks=False))[:6]), files=files, metrics=["Recall"],
                             schema=row_schema(["Recall", *judged]))
    rows = rows_of(table)
    for r, (_, a, ctx) in zip(rows, FAITH_CASES):  # the sample's conversations, the cases' responses and passages
        r["prediction"], r["passages"] = a, ctx
    actor = judge_mod.JudgeActor({}, ["ragas_faithfulness"], str(tmp_path / "c.sqlite"), protocol="reference")
    out = rows_of(process_table(actor, "judge", batch_of(rows, judged)))
    assert all(t == 0.01 and s == 0 and schema == {True} for _, t, s, schema in calls)
    for r in out:
        expected, _ = _ours(fa.from_record(judge_input(r), protocol="reference"))
        assert r["metrics"]["RL_F"] == [expected], r["prediction"]
    # one engine call per round across records: statements, then fixes and verdicts together, ...
    # (the rounds: as many as the longest chain of requests, 6 for BROKEN STUBBORN's two nested fixes)
    requests = [len(_ours(fa.from_record(judge_input(r), protocol="reference"))[1]) for r in out]
    assert sum(n for n, *_ in calls) == sum(requests) and len(calls) == max(requests) == 6 and calls[0][0] == 6
    assert len(calls) > 2  # statements, fixes, verdicts, nested fixes: rounds across records


# --- ragas 0.3.3 (MT-RAG's pin) ------------------------------------------------------------------

def _ragas_v033(path: str) -> str:
    return reference_source("ragas", path, commit="v0.3.3")


def test_ragas_033_faithfulness_is_043s():
    """MT-RAG pins ragas 0.3.3: its faithfulness module, output parser helpers and temperatures
    are 0.4.3's, so the reference prompts and scores hold for MT-RAG's own runs."""
    import inspect

    for module in ("metrics/_faithfulness", "prompt/utils"):
        mod = importlib.import_module("ragas." + module.replace("/", "."))
        assert _ragas_v033(f"src/ragas/{module}.py") == inspect.getsource(mod), module
    old = _ragas_v033("src/ragas/prompt/pydantic_prompt.py")
    for name in ("to_string", "_generate_output_signature", "_generate_examples"):
        from ragas.prompt.pydantic_prompt import PydanticPrompt

        assert inspect.getsource(getattr(PydanticPrompt, name)) in old, name
    from ragas.prompt.pydantic_prompt import RagasOutputParser

    assert inspect.getsource(RagasOutputParser) in old
    assert "return 0.3 if n > 1 else 0.01" in _ragas_v033("src/ragas/llms/base.py")


@pytest.mark.parametrize("value, out", [
    (3, 3), (True, 1), (1e10, 10**10), (-2.0**62, -2**62), (2.0**63 - 1024, 2**63 - 1024),
    (" 1_000 ", 1000), ("-7.000", -7), ("+4", 4),
])
def test_an_integer_field_as_pydantic_reads_it(value, out):
    assert rp.validate(int, value, "output.verdict") == out


@pytest.mark.parametrize("value, why", [
    (2.0**63, "an integer too large"), (-2.0**63, "an integer too large"),
    (0.5, "a number with a fractional part"), (float("nan"), "not a finite number"),
    ("1_", "a string that is not an integer"), ("١٢", "a string that is not an integer"),
    ("1.5", "a string that is not an integer"), (None, "NoneType, not an integer"),
])
def test_an_integer_field_that_is_no_integer_says_why(value, why):
    with pytest.raises(ValueError) as e:
        rp.validate(int, value, "output.verdict")
    assert str(e.value) == f"output.verdict: {why}"
