"""open-rag-eval's LLM judges (UMBRELA, citation, no-answer, AutoNuggetizer) under ragscale's
``reference`` protocol against open-rag-eval's own code, executed from the local copy at
ORAG_COMMIT with the real OpenAI client (its HTTP transport mocked) and pydantic:

- the HTTP requests, byte for byte: ragscale's OpenAI-compatible engine's body for each
  reference prompt against the body the OpenAI client builds for open-rag-eval's
  ``OpenAIModel.parse`` (messages, the strict JSON schema, temperature, seed, UMBRELA's penalties);
- the reading of crafted outputs (odd ones included): ragscale's reference parsers against the
  client's ``message.parsed`` and each metric's use of it;
- whole records: ragscale's judge actor (reference protocol, no re-asks) against open-rag-eval's
  ``RAGResultsLoader`` and ``TRECEvaluator`` on the same CSV, with the same scripted model,
  including failed grades, empty and miscounted nugget outputs and NO_ANSWER rows.

The ``constrained`` protocol keeps its prompts (pinned by test_trec_judges.py, test_nuggets.py).
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
import types
import zlib
from typing import Any, Callable

import pytest

httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
pytest.importorskip("pydantic")

from ragscale.actors.engines import Generation  # noqa: E402
from ragscale.io.orag_csv import read_records  # noqa: E402
from ragscale.judges import JUDGES, citation, no_answer, nugget_reference, nugget_rounds, nuggets, umbrela  # noqa: E402
from ragscale.judges.base import Failed, JudgeParseError, JudgeResult, Undefined, drive  # noqa: E402
from ragscale.metrics.nuggets import KEEP, NUGGETIZER_KEYS, sort_and_keep  # noqa: E402
from ragscale.metrics.trec import SUPPORT_SCORES, retrieval_metrics  # noqa: E402
from ragscale.judges.judge_input import judge_input  # noqa: E402
from ragscale.record import read_record  # noqa: E402
from ragscale.row import detail, judge_error_entries  # noqa: E402
from judge_inputs import judge_input_of  # noqa: E402
from conftest import ORAG_COMMIT, ROOT, reference_source  # noqa: E402

SAMPLE = os.path.join(ROOT, "ragscale", "data", "trec_sample.csv")
ORAG_JUDGES = ("umbrela", "citation", "no_answer", "nuggets")
FAIL = "fails"


# ---------------------------------------------------------------- open-rag-eval's code, executed


def _exec(mp: pytest.MonkeyPatch, path: str, provide: dict, keep_classes: set | None = None,
          drop_imports: tuple = ()) -> types.ModuleType:
    """One open-rag-eval module at ORAG_COMMIT, its package imports replaced by ``provide``
    (and ``drop_imports``' top-level packages, and classes outside ``keep_classes``, left out)."""
    tree = ast.parse(reference_source("open-rag-eval", path, ORAG_COMMIT))
    body = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("open_rag_eval")):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n.split(".")[0] in drop_imports for n in names):
                continue
        if keep_classes is not None and isinstance(node, ast.ClassDef) and node.name not in keep_classes:
            continue
        body.append(node)
    tree.body = body
    module = types.ModuleType("orag_reference_" + os.path.basename(path)[:-3])
    module.__dict__.update(provide)
    mp.setitem(sys.modules, module.__name__, module)  # pydantic and dataclasses look a class's module up
    exec(compile(tree, f"<open-rag-eval {path}>", "exec"), module.__dict__)  # noqa: S102 - the reference's own code
    return module


class _Hallucination:
    """HHEM is not an LLM judge (ragscale.metrics.hhem is compared elsewhere): a constant here."""

    def __init__(self, **kwargs: Any) -> None:
        pass

    def compute(self, rag_result: Any) -> dict:
        return {"hhem_score": 0.0}


@pytest.fixture(scope="module")
def orag() -> types.SimpleNamespace:
    """open-rag-eval's judge model (OpenAIModel only: its other backends' clients are not
    installed), data classes, the four LLM metrics, its CSV loader and its TREC evaluator."""
    mp = pytest.MonkeyPatch()
    try:
        llm = _exec(mp, "open_rag_eval/models/llm_judges.py", {}, keep_classes={"LLMJudgeModel", "OpenAIModel"},
                    drop_imports=("google", "anthropic", "together"))
        rag = _exec(mp, "open_rag_eval/data_classes/rag_results.py", {})
        classes = {k: getattr(rag, k) for k in ("RetrievalResult", "GeneratedAnswerPart", "AugmentedGenerationResult",
                                                "RAGResult", "MultiRAGResult")}
        base = {"LLMJudgeModel": llm.LLMJudgeModel, "RetrievalMetric": object, "AugmentedGenerationMetric": object,
                **classes}
        metrics = {name: _exec(mp, f"open_rag_eval/metrics/{name}.py", base)
                   for name in ("umbrela_metric", "citation_metric", "no_answer_metric", "autonugget_metric")}
        constants = _exec(mp, "open_rag_eval/utils/constants.py", {})
        loader = _exec(mp, "open_rag_eval/rag_results_loader.py",
                       {**classes, "NO_ANSWER": constants.NO_ANSWER, "API_ERROR": constants.API_ERROR})
        scores = _exec(mp, "open_rag_eval/data_classes/eval_scores.py", classes)
        trec = _exec(mp, "open_rag_eval/evaluators/trec_evaluator.py", {
            **{k: getattr(scores, k) for k in ("AugmentedGenerationScores", "MultiScoredRAGResult", "RAGScores",
                                                 "RetrievalScores", "ScoredRAGResult")},
            "MultiRAGResult": rag.MultiRAGResult, "LLMJudgeModel": llm.LLMJudgeModel, "Evaluator": object,
            "UMBRELAMetric": metrics["umbrela_metric"].UMBRELAMetric,
            "AutoNuggetMetric": metrics["autonugget_metric"].AutoNuggetMetric,
            "CitationMetric": metrics["citation_metric"].CitationMetric,
            "NoAnswerMetric": metrics["no_answer_metric"].NoAnswerMetric,
            "HallucinationMetric": _Hallucination})
        yield types.SimpleNamespace(llm=llm, rag=rag, loader=loader, trec=trec, **metrics)
    finally:
        mp.undo()


class _Wire:
    """The HTTP side of open-rag-eval's OpenAI client: records each request body and answers
    with ``respond(user message)`` as the chat completion's content."""

    def __init__(self, respond: Callable[[str], str]):
        self.respond = respond
        self.bodies: list[dict] = []

    def __call__(self, request: Any) -> Any:
        body = json.loads(request.content)
        self.bodies.append(body)
        message = {"role": "assistant", "content": self.respond(body["messages"][-1]["content"])}
        return httpx.Response(200, json={"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                                         "choices": [{"index": 0, "finish_reason": "stop", "message": message}]})


def _their_model(orag: types.SimpleNamespace, model: str, respond: Callable[[str], str]) -> tuple[Any, _Wire]:
    """open-rag-eval's OpenAIModel for ``model`` with a real OpenAI client over a mocked transport."""
    wire = _Wire(respond)
    judge = object.__new__(orag.llm.OpenAIModel)  # its __init__ sets the openai module's global key
    judge.model_name = model
    judge.client = openai.OpenAI(base_url="http://reference.invalid/v1", api_key="test", max_retries=0,
                                 http_client=httpx.Client(transport=httpx.MockTransport(wire)))
    return judge, wire


# ---------------------------------------------------------------- ragscale's side


def _http_body(prompt: Any, temperature: float, seed: int, model: str) -> dict:
    """The body ragscale's OpenAI-compatible engine sends for ``prompt`` (structured outputs)."""
    from ragscale.actors.engines.openai_compat import Engine

    return Engine(model=model, base_url="http://localhost:9/v1")._body(prompt, temperature, seed, "json_schema")


def _canon(body: dict, ours: bool) -> str:
    """A request body without what may differ by design: the json_schema's name (the judge's
    vs the pydantic model's), ragscale's max_tokens (open-rag-eval sends none), the client's
    ``stream: false``."""
    b = dict(body)
    if ours:
        assert b.pop("max_tokens") == umbrela.ORAG_MAX_TOKENS
    else:
        assert b.pop("stream") is False and "max_tokens" not in b
    rf = dict(b["response_format"])
    rf["json_schema"] = {k: v for k, v in rf["json_schema"].items() if k != "name"}
    b["response_format"] = rf
    return json.dumps(b, sort_keys=True, ensure_ascii=False)


def _rows(path: str) -> list[dict]:
    """The pipeline rows of an open-rag-eval CSV, as ragscale reads it."""
    rows = []
    for n, rec in enumerate(read_records(path)):
        rows.append(read_record(json.dumps(rec), key=f"{rec['query_id']}#{rec['query_run']}", model_id="m",
                                task_id=rec["query_id"], source_file=path, source_line=n, need_targets=False).to_row())
    return rows


def _ours(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, rows: list[dict], model: str,
          respond: Callable[[str], str], protocol: str = "reference") -> tuple[list[dict], list[str]]:
    """ragscale's judge actor over ``rows`` (the four judges, no re-asks) with a scripted engine
    named ``model``; returns the judged rows and the canonical request bodies it sent."""
    import ragscale.actors.judge as judge_mod

    bodies: list[str] = []

    class Engine:
        name = "scripted"

        def __init__(self) -> None:
            self.model = model

        def generate(self, prompts, temperature=0.0, seed=None, on_done=None):  # noqa: ANN001, ANN202
            out = []
            for p in prompts:
                if protocol == "reference":
                    bodies.append(_canon(_http_body(p, temperature, seed, model), ours=True))
                out.append(Generation(respond(p.messages[-1]["content"]), 1, 1))
            return out

    monkeypatch.setattr(judge_mod, "build", lambda kwargs: Engine())
    actor = judge_mod.JudgeActor({}, list(ORAG_JUDGES), str(tmp_path / f"cache-{protocol}.sqlite"),
                                 max_retries=0, protocol=protocol)
    rows = [dict(r) for r in rows]
    actor.process(rows)
    return rows, bodies


# ---------------------------------------------------------------- a scripted judge model


def _crc(text: str) -> int:
    return zlib.crc32(text.encode())


def _nugget_list(text: str, label: str) -> list[str]:
    return ast.literal_eval(re.search(label + r": (\[.*\])\n", text).group(1))


def kind_of(text: str) -> str:
    for marker, kind in (("Given a query and a passage", "umbrela"), ("evaluate whether each statement", "citation"),
                         ("attempt to answer the question or not", "no_answer"), ("You are NuggetizeLLM", "create"),
                         ("You are NuggetizeScoreLLM", "importance"), ("You are NuggetizeAssignerLLM", "assign")):
        if marker in text:
            return kind
    raise AssertionError(f"unknown prompt: {text[:200]!r}")


def respond(text: str) -> str:
    """Outputs that depend on the request's user message only (so both sides get the same
    answer to the same request), in a few JSON layouts the reading must accept."""
    kind, h = kind_of(text), _crc(text)
    if kind == "umbrela":
        return ['{"score": "%d"}', ' \n{"score":"%d", "why": "x"}\n'][h % 2] % (h % 4)
    if kind == "citation":
        return json.dumps({"support": list(SUPPORT_SCORES)[h % 3]})
    if kind == "no_answer":
        return json.dumps({"answered": "no" if "sorry" in text.split("Ok now your turn")[1] else "yes"})
    if kind == "create":
        query = re.search(r"Search Query: (.*)\n", text).group(1)
        initial = _nugget_list(text, "Initial Nugget List")
        grow = 0 if initial and "capital" in query else 7  # a fixed point: open-rag-eval asks again
        return json.dumps({"nuggets": initial + [f"{query[:12]} fact {len(initial) + j}" for j in range(grow)]})
    listed = _nugget_list(text, "Nugget List")
    if kind == "importance":
        return json.dumps({"importance": ["okay" if _crc(n) % 3 == 0 else "vital" for n in listed]})
    return json.dumps({"assignment": [["support", "partial_support", "not_support"][_crc(n + text[-80:]) % 3]
                                      for n in listed]})


def quirky(text: str) -> str:
    """``respond`` with a failure or an odd output for some records (see QUIRKS)."""
    kind, out = kind_of(text), respond(text)
    if kind == "umbrela" and "9 November 1989, East German" in text:
        return "3"  # the bare integer the prompt asks for, not the JSON object: berlin-wall fails
    if kind == "create" and "boil an egg" in text:
        return '{"nuggets": []}'  # soft-egg: an empty list
    if kind == "importance" and "Why is the sky" in text:  # sky: one label too many, then one too few
        labels = json.loads(out)["importance"]
        if "fact 0'" in text:
            return json.dumps({"importance": labels + ["okay"]})
        if len(labels) < 10:
            return json.dumps({"importance": labels[:-1]})
    if kind == "importance" and "capital of Australia" in text:
        return json.dumps({"importance": json.loads(out)["importance"][:-1]})  # canberra: one short
    if kind == "assign" and "plants make" in text:  # plants-food: a label spelled otherwise
        labels = json.loads(out)["assignment"]
        return json.dumps({"assignment": [labels[0].capitalize(), *labels[1:]]})
    if kind == "citation" and "206 bones" in text:
        return '{"support": "Full_Support"}'  # bones: not a label
    if kind == "no_answer" and "blue light comes at us" in text:
        return '```json\n{"answered": "yes"}\n```'  # sky run 2: a code fence
    return out


# (query_id, run) -> the judge whose output fails open-rag-eval's whole record under ``quirky``
QUIRK_FAILS = {("berlin-wall", 1): "umbrela", ("bones", 1): "citation", ("sky", 2): "no_answer"}
QUIRK_NEUTRAL = {("soft-egg", 1), ("canberra", 1), ("plants-food", 1), ("plants-food", 2)}
_JUDGE_METRICS = {name: JUDGES[name].metrics for name in ORAG_JUDGES}


# ---------------------------------------------------------------- open-rag-eval's run of a CSV


def _theirs(orag: types.SimpleNamespace, path: str, model: str,
            answer: Callable[[str], str]) -> tuple[dict[tuple[str, int], Any], list[str]]:
    """open-rag-eval's TRECEvaluator over the CSV as its loader reads it, every run evaluated:
    (query_id, run) -> the scored result, and the canonical request bodies."""
    judge, wire = _their_model(orag, model, answer)
    evaluator = orag.trec.TRECEvaluator(judge, {"k_values": [1, 3, 5], "metrics_to_run_consistency": ["f1"]})
    kept: dict[str, list[int]] = {}  # the runs its loader keeps, per query, in its order
    for r in sorted(read_records(path), key=lambda r: (r["query_id"], r["query_run"])):
        if r["answer_status"] == "ok":
            kept.setdefault(r["query_id"], []).append(r["query_run"])
    out = {}
    for multi in orag.loader.RAGResultsLoader(path).load():
        scored = evaluator.evaluate(multi).scored_rag_results
        assert len(scored) == len(kept[multi.query_id])
        out.update({(multi.query_id, run): s for run, s in zip(kept[multi.query_id], scored)})
    return out, [_canon(b, ours=False) for b in wire.bodies]


def _assert_same_record(theirs: Any, metrics: dict, details: dict) -> None:
    """ragscale's metrics of a record equal what open-rag-eval's evaluator scored for it."""
    r, g = theirs.scores.retrieval_score.scores, theirs.scores.generation_score.scores
    assert metrics["umbrela_scores"] == list(r["umbrela_scores"].values())
    assert details["umbrela"] == r["umbrela_scores"]
    assert metrics["umbrela_mean"] == r["mean_umbrela_score"]
    ranks = retrieval_metrics(metrics["umbrela_scores"])
    for name in ("precision@", "AP@"):
        assert {f"{name}{k}": v for k, v in r["precision_metrics"][name].items()} == \
            {k: v for k, v in ranks.items() if k.startswith(name) and v is not None}
    assert ranks["MRR"] == r["precision_metrics"]["MRR"]
    c = g["citation_scores"]
    assert (metrics["citation_precision"], metrics["citation_recall"], metrics["citation_f1"]) == \
        (c["weighted_precision"], c["weighted_recall"], c["f1"]) and c["f1"] == g["citation_f1_score"]
    assert metrics["answered"] == {"yes": 1.0, "no": 0.0}[g["no_answer_score"]["query_answered"]]
    assert details["no_answer"] == g["no_answer_score"]
    assert metrics["nuggets_vital"] == g["vital_nuggetizer_score"]
    assert metrics["nuggets_assignment_mean"] == g["mean_nugget_assignment_score"]
    a = g["autonugget_scores"]
    if not a:  # AutoNuggetMetric failed: the evaluator's 0.5s, nothing else
        assert metrics["nuggets_vital"] == metrics["nuggets_assignment_mean"] == nuggets.NEUTRAL
        assert all(metrics[m] is None for m in _JUDGE_METRICS["nuggets"]
                   if m not in ("nuggets_vital", "nuggets_assignment_mean"))
        assert details["nuggets"]["failed"]
        return
    assert {k: metrics[m] for m, k in NUGGETIZER_KEYS.items()} == a["nuggetizer_scores"]
    d = details["nuggets"]["nuggets"]
    assert [n["text"] for n in d] == a["nuggets"] and [n["importance"] for n in d] == a["labels"]
    assert [n["assignment"] for n in d] == a["assignments"] and metrics["nuggets_count"] == len(a["nuggets"])


def _by_run(rows: list[dict]) -> dict[tuple[str, int], tuple[dict, dict, list]]:
    out = {}
    for row in rows:
        qid, run = row["key"].rsplit("#", 1)
        out[(qid, int(run))] = (dict(row["metrics"]), {j: detail(row["details"], j) for j in row["details"]},
                                judge_error_entries(row))
    return out


# ---------------------------------------------------------------- whole records


@pytest.mark.parametrize("model", ["gpt-4o-mini", "Qwen/Qwen3-8B"])
def test_sample_csv_equals_open_rag_eval(orag, monkeypatch, tmp_path, model):
    """The bundled sample: the same requests (as sets: ragscale asks a repeated request once)
    and, per run, the same UMBRELA grades, retrieval metrics, citation scores, answered label
    and nugget scores as open-rag-eval's TRECEvaluator; its NO_ANSWER run is skipped by both."""
    theirs, their_bodies = _theirs(orag, SAMPLE, model, respond)
    rows, our_bodies = _ours(monkeypatch, tmp_path, _rows(SAMPLE), model, respond)
    assert set(our_bodies) == set(their_bodies)
    assert len(our_bodies) <= len(their_bodies)
    ours = _by_run(rows)
    assert set(ours) - set(theirs) == {("sistine", 1)}  # NO_ANSWER: open-rag-eval's loader skips it
    for key, scored in theirs.items():
        metrics, details, _ = ours[key]
        _assert_same_record(scored, metrics, details)
    metrics, _, errors = ours[("sistine", 1)]
    assert all(metrics[m] is None for name in ORAG_JUDGES for m in _JUDGE_METRICS[name])
    assert {e["judge"] for e in errors if e.get("undefined")} == set(ORAG_JUDGES)
    # the nugget paths exercised: 35 nuggets (30 reached at iteration 5) and a fixed point asked 5 times
    news = [b for b in our_bodies if "<passage>" in json.loads(b)["messages"][1]["content"]]
    assert bool(news) == ("qwen" in model.lower())
    creations = [b for b in their_bodies if "You are NuggetizeLLM" in b]
    assert len(creations) == 5 * len(theirs)  # never 30 before iteration 5 here
    created = [d["nuggets"]["created"] for _, d, _ in ours.values() if "created" in d.get("nuggets", {})]
    assert max(created) == 35 and min(created) == 7


def test_quirks_fail_and_neutralize_records_as_open_rag_eval(orag, monkeypatch, tmp_path):
    """Failed and odd outputs: a failed grade, citation label or answered label fails the
    record in open-rag-eval (ragscale: that judge's metrics null, the failure in judge_errors);
    an empty nugget list, a miscounted or unknown label give the evaluator's 0.5s; a batch with
    one label too many and one too few passes, as in open-rag-eval."""
    theirs, their_bodies = _theirs(orag, SAMPLE, "gpt-4o-mini", quirky)
    rows, our_bodies = _ours(monkeypatch, tmp_path, _rows(SAMPLE), "gpt-4o-mini", quirky)
    assert set(their_bodies) <= set(our_bodies)  # ragscale asks a failed record's other judges too
    ours = _by_run(rows)
    for key, scored in theirs.items():
        metrics, details, errors = ours[key]
        if key in QUIRK_FAILS:
            assert scored.scores.retrieval_score.scores == {} and scored.scores.generation_score.scores == {}
            failed = QUIRK_FAILS[key]
            nulls = _JUDGE_METRICS[failed] + (_JUDGE_METRICS["nuggets"] if failed == "umbrela" else ())
            assert all(metrics[m] is None for m in nulls), (key, metrics)
            assert any(e["judge"] == failed and not e.get("undefined") for e in errors)
            others = [m for name in ORAG_JUDGES for m in _JUDGE_METRICS[name] if m not in nulls]
            assert all(metrics[m] is not None for m in others)  # a difference: those stay
            continue
        _assert_same_record(scored, metrics, details)
        assert (not scored.scores.generation_score.scores["autonugget_scores"]) == (key in QUIRK_NEUTRAL)
    shifted = ours[("sky", 1)][1]["nuggets"]
    assert shifted["created"] == 35 and len(shifted["nuggets"]) == KEEP  # the shifted labels passed


def test_umbrela_failed_grade_keeps_the_others_in_details(monkeypatch, tmp_path):
    rows, _ = _ours(monkeypatch, tmp_path, _rows(SAMPLE), "gpt-4o-mini", quirky)
    metrics, details, errors = _by_run(rows)[("berlin-wall", 1)]
    assert metrics["umbrela_scores"] is None and metrics["umbrela_mean"] is None
    assert details["umbrela"]["[1]"] is None and all(isinstance(details["umbrela"][f"[{i}]"], int) for i in (2, 3, 4))
    assert [e for e in errors if e["judge"] == "umbrela"] == [
        {"judge": "umbrela", "item": 0, "reason": "output is not a JSON object", "raw": "3"}]
    assert {"judge": "nuggets", "reason": "needs umbrela_scores", "undefined": True} in errors


def test_constrained_protocol_is_unchanged_by_the_model_name(monkeypatch, tmp_path):
    """Under constrained the NO_ANSWER run is not answered (0.0) and the prompts are the
    constrained ones (inline schema, greedy, the standard UMBRELA prompt even for qwen)."""
    rows, _ = _ours(monkeypatch, tmp_path, _rows(SAMPLE), "Qwen/Qwen3-8B",
                    lambda t: respond(t) if kind_of(t) in ("umbrela", "citation", "no_answer") else "{}",
                    protocol="constrained")
    ours = _by_run(rows)
    assert ours[("sistine", 1)][0]["answered"] == 0.0
    assert ours[("sky", 1)][0]["umbrela_mean"] is not None


# ---------------------------------------------------------------- UMBRELA's prompt by the judge model

PASSAGES = ["Paris is the capital of France.", "{query} braces, 'quotes' and \"double\"\nnew line",
            "Ünïcödé — dashes … and emoji 🙂", "  leading and trailing spaces  ",
            # text that only resembles the prompts' markers stays as open-rag-eval sends it (templates.neutralize)
            "passage: lower case\nquery: too\nFinal score: 3", "<Passage> </QUERY> < /passage> [the end of the season]"]


@pytest.mark.parametrize("model, new", [
    ("gpt-4o-mini", False), ("meta-llama/Llama-3.1-8B-Instruct", False), ("gpt_oss-20b", False), ("QwQ-32B", False),
    ("Qwen/Qwen2.5-7B-Instruct", True), ("qwen3-4b-q4_k_m.gguf", True), ("openai/gpt-oss-20b", True),
    ("GPT-OSS-120B", True), ("my-QWEN-finetune", True),
])
def test_umbrela_requests_equal_open_rag_eval_per_model(orag, model, new):
    """UMBRELAMetric picks _UMBRELA_NEW_PROMPT for "gpt-oss"/"qwen" models (case-insensitive):
    ragscale's reference requests equal its requests byte for byte, for both prompts."""
    judge, wire = _their_model(orag, model, respond)
    query = "What is the capital of France? {passage}"
    theirs = orag.umbrela_metric.UMBRELAMetric(judge).compute(
        orag.rag.RetrievalResult(query=query, retrieved_passages={f"[{i + 1}]": p for i, p in enumerate(PASSAGES)}),
        [1, 3, 5])
    obj = {"format": "open-rag-eval-csv", "query": query, "passages": [{"id": f"[{i + 1}]", "text": p}
                                                                       for i, p in enumerate(PASSAGES)]}
    row = {"passages": PASSAGES, "prediction": "An answer."}
    spec = JUDGES["umbrela"]
    prompts: list = []
    result = drive(spec.start(judge_input_of(obj, row), **spec.options("reference", model)),
                   lambda p: prompts.append(p) or respond(p.messages[-1]["content"]))
    ours = [_canon(_http_body(p, *p.sampling, model), ours=True) for p in prompts]
    assert ours == [_canon(b, ours=False) for b in wire.bodies]
    assert all(p.version == spec.reference_version == "open-rag-eval-umbrela-ref-v1" for p in prompts)
    assert all(("<passage>" in p.messages[1]["content"]) == new for p in prompts)
    assert umbrela.uses_new_prompt(model) == new
    assert prompts[0].sampling == (0.0, 42)
    assert prompts[0].params == (("top_p", 1.0), ("presence_penalty", 0.5), ("frequency_penalty", 0.0))
    assert result.metrics["umbrela_scores"] == list(theirs["umbrela_scores"].values())
    constrained = next(spec.start(judge_input_of(obj, row), **spec.options("constrained", model)))[0][0]
    assert "<passage>" not in constrained.messages[1]["content"] and constrained.sampling is None


def test_schemas_are_the_pydantic_models_and_strict_as_the_client_sends_them(orag):
    from openai.lib._pydantic import to_strict_json_schema

    from ragscale.actors.engines.openai_compat import strict_schema

    m = orag
    pairs = [(umbrela.REFERENCE_OUTPUT, m.umbrela_metric.UMBRELAScore),
             (citation.REFERENCE_OUTPUT, m.citation_metric.CitationSupport),
             (no_answer.REFERENCE_OUTPUT, m.no_answer_metric.QueryAnswered),
             (nugget_reference.NUGGETS_OUTPUT, m.autonugget_metric.Nuggets),
             (nugget_reference.IMPORTANCE_OUTPUT, m.autonugget_metric.NuggetImportance),
             (nugget_reference.ASSIGNMENT_OUTPUT, m.autonugget_metric.NuggetAssignment)]
    for ours, model in pairs:
        assert ours.schema() == model.model_json_schema()
        assert strict_schema(ours.schema()) == to_strict_json_schema(model)


# ---------------------------------------------------------------- reading outputs

UMBRELA_OUTPUTS = [
    '{"score": "2"}', ' {"score":"3"} \n', '\t{"score":"0"}\r', '{"score": 2}', '{"score": 2.0}', '{"score": true}',
    '{"score": "2", "reason": "x"}', '{"score": " 2"}', '{"score": "2 "}', '{"score": "4"}', '{"Score": "2"}', "2",
    '{"score": "2"}{"score": "3"}', '{"score": "2", "score": "3"}', '{"score": "2", "score": 3}',
    '{"score": "2", "x": "a\nb"}', '{"score": "\\u0032"}', "null", "", '{"score": null}', '{"score": "2", "x": NaN}',
    '\ufeff{"score":"2"}', '{"score": "2",}', '{"score":"2","x":"\\ud800"}', '{"score":"2","x":"\\ud83d\\ude00"}',
    '{"score":"2","x":1e400}', '{"score":"2"}\x00', '```json\n{"score": "2"}\n```', '{"score": "1"} trailing',
    '{"score":"2","x":-Infinity}', '{"score":"2","x":01}', "[]", '{"score": ["2"]}', '{"score": {"value": "2"}}',
]


def _or_fail(f: Callable[[], Any], *errors: type) -> Any:
    try:
        return f()
    except errors:
        return FAIL


@pytest.mark.parametrize("raw", UMBRELA_OUTPUTS)
def test_umbrela_reading_equals_open_rag_eval(orag, raw):
    judge, _ = _their_model(orag, "gpt-4o-mini", lambda t: raw)
    result = orag.rag.RetrievalResult(query="q", retrieved_passages={"[1]": "p"})
    theirs = _or_fail(lambda: orag.umbrela_metric.UMBRELAMetric(judge).compute(result, [1])["umbrela_scores"]["[1]"],
                      Exception)
    assert _or_fail(lambda: umbrela.parse_reference(raw), JudgeParseError) == theirs


LABEL_OUTPUTS = ['{"support": "full_support"}', '{"support": "partial_support", "why": 1}', ' {"support":"no_support"}\n',
                 '{"support": "Full_Support"}', '{"support": "full support"}', '{"support": " no_support"}',
                 '{"support": 1}', '{"support": "yes"}', 'full_support', '{"support": "no_support"} ok',
                 '{"support": "no_support", "support": "full_support"}', '{"answered": "yes"}', '{"answered": "no"}',
                 '{"answered": "Yes"}', '{"answered": "yes "}', '{"answered": true}',
                 '```json\n{"answered": "yes"}\n```', '{"answered": "no", "answered": "yes"}', "", "null"]


@pytest.mark.parametrize("raw", LABEL_OUTPUTS)
def test_citation_and_no_answer_reading_equal_open_rag_eval(orag, raw):
    judge, _ = _their_model(orag, "gpt-4o-mini", lambda t: raw)
    part = orag.rag.GeneratedAnswerPart(text="Paris is the capital.", citations=["[1]"])
    rag = orag.rag.RAGResult(orag.rag.RetrievalResult(query="q", retrieved_passages={"[1]": "Paris."}),
                             orag.rag.AugmentedGenerationResult(query="q", generated_answer=[part]))
    metric = orag.citation_metric.CitationMetric(judge)
    theirs = _or_fail(lambda: metric.compute(rag)["citation_score_[1]"], Exception)
    ours = _or_fail(lambda: SUPPORT_SCORES[citation.parse_reference(raw)], JudgeParseError)
    assert ours == theirs
    no_answer_metric = orag.no_answer_metric.NoAnswerMetric(judge)
    theirs = _or_fail(lambda: no_answer_metric.compute(rag.generation_result)["query_answered"], Exception)
    assert _or_fail(lambda: no_answer.parse_reference(raw), JudgeParseError) == theirs


NUGGET_OUTPUTS = ['{"nuggets": ["a", "b"]}', '{"nuggets": ["a", 1]}', '{"nuggets": []}', '{"nuggets": "a"}',
                  '{"nuggets": ["", " ", "a"]}', '{"nuggets": ["a", "a"]}', '{"nuggets": [null]}',
                  '{"nuggets": ["x"], "nuggets": ["y"]}', '["a"]', '{"nuggets": ["a"]}\n\n',
                  json.dumps({"nuggets": [f"n{i}" for i in range(45)]}), json.dumps({"nuggets": ["é" * 300]})]


@pytest.mark.parametrize("raw", NUGGET_OUTPUTS)
def test_nugget_creation_reading_equals_open_rag_eval(orag, raw):
    """A creation output kept as it is (no cap, blanks and repeats kept); an empty list fails
    the metric (ragscale: the neutral result), as in AutoNuggetMetric._create_nuggets."""
    judge, _ = _their_model(orag, "gpt-4o-mini", lambda t: raw)
    metric = orag.autonugget_metric.AutoNuggetMetric(judge)
    theirs = _or_fail(lambda: metric._create_nuggets("q", {"[1]": "p"}, {"[1]": 2}), Exception)
    ours = _or_fail(lambda: nugget_reference.parse_nuggets_reference(raw), JudgeParseError)
    assert (FAIL if ours == [] else ours) == theirs
    run = nuggets.run_reference("q", "an answer", ["p"])
    step = next(run)
    assert len(step) == 1 and step[0][0].messages == nugget_reference.render_create_reference("q", ["p"], []).messages
    if ours in (FAIL, []):
        with pytest.raises(StopIteration) as stop:
            run.send([ours if ours == [] else Failed("x")])
        assert stop.value.value.metrics["nuggets_vital"] == nuggets.NEUTRAL


LABEL_LIST_OUTPUTS = [
    ('{"importance": ["vital", "okay", "vital"]}', 3), ('{"importance": ["okay", "okay", "vital"], "x": 0}', 3),
    ('{"importance": ["Vital", "okay", "vital"]}', 3), ('{"importance": []}', 3), ('{"importance": ["vital"] }', 3),
    ('{"importance": ["vital", "okay", "vital", "okay"]}', 3), ('{"importance": "vital"}', 1),
    ('{"importance": ["vital"], "importance": ["okay"]}', 1), ('{"importance": [" vital"]}', 1),
    ('{"assignment": ["support", "not_support", "partial_support"]}', 3), ('{"assignment": ["support"]}', 3),
    ('{"assignment": ["Support", "support", "support"]}', 3), ('{"assignment": []}', 2),
    ('{"assignment": ["supported"]}', 1), ('{"assignment": ["not_support"]} x', 1), ('{"assignment": [1]}', 1),
]


@pytest.mark.parametrize("raw, n", LABEL_LIST_OUTPUTS)
def test_nugget_label_reading_equals_open_rag_eval(orag, raw, n):
    """One batch of n nuggets: the labels, the sort (vital first) and the count check of
    _score_and_sort_nuggets / _assign_nuggets against ragscale's reference parse and checks."""
    judge, _ = _their_model(orag, "gpt-4o-mini", lambda t: raw)
    metric = orag.autonugget_metric.AutoNuggetMetric(judge)
    listed = [f"nugget {i}" for i in range(n)]
    if raw.startswith('{"importance"'):
        theirs = _or_fail(lambda: metric._score_and_sort_nuggets("q", listed), Exception)
        labels = _or_fail(lambda: nugget_reference.parse_importance_reference(raw), JudgeParseError)
        if labels == FAIL or nugget_rounds.labels_failure("importance", [labels], n):
            assert theirs == FAIL
        else:
            keep = sort_and_keep(labels, KEEP)
            assert theirs != FAIL and list(theirs[0]) == [listed[i] for i in keep]
            assert [v.value for v in theirs[1]] == [labels[i] for i in keep]
    else:
        part = orag.rag.GeneratedAnswerPart(text="an answer", citations=[])
        theirs = _or_fail(lambda: [v.value for v in metric._assign_nuggets("q", [part], listed)], Exception)
        labels = _or_fail(lambda: nugget_reference.parse_assignment_reference(raw), JudgeParseError)
        if labels != FAIL and nugget_rounds.labels_failure("assignment", [labels], n):
            labels = FAIL
        assert labels == theirs


# ---------------------------------------------------------------- the protocol plumbing


def test_specs_declare_reference_versions():
    versions = {"umbrela": "open-rag-eval-umbrela-ref-v1", "citation": "open-rag-eval-citation-ref-v1",
                "no_answer": "open-rag-eval-no-answer-ref-v1", "nuggets": "openrageval-autonugget-ref-v1"}
    for name, version in versions.items():
        spec = JUDGES[name]
        assert spec.reference_version == version and spec.version != version
        assert spec.version_for("reference") == version and spec.version_for("constrained") == spec.version
        assert spec.options("reference", "m") == {"protocol": "reference", "model": "m"}


@pytest.mark.parametrize("name", ORAG_JUDGES)
def test_constrained_prompts_do_not_depend_on_the_options(name):
    """``start(inp)`` and ``start(inp, protocol="constrained", model=...)`` give the
    same first prompts (the constrained path takes no notice of the model)."""
    rows = _rows(SAMPLE)
    for row in rows[:4]:
        if name == "nuggets":
            row = {**row, "metrics": {"umbrela_scores": [2] * len(row["passages"])}}
        inp = judge_input(row)
        spec = JUDGES[name]
        plain = next(spec.start(inp))
        for model in ("Qwen/Qwen3-8B", "gpt-oss-20b", ""):
            again = next(spec.start(inp, **spec.options("constrained", model)))
            assert again == plain
        first = plain[0][0] if isinstance(plain, list) else plain[0]
        assert first.version == spec.version and first.sampling is None and first.params == ()
        ref = next(spec.start(inp, **spec.options("reference", "gpt-4o-mini")))
        ref_first = ref[0][0] if isinstance(ref, list) else ref[0]
        assert ref_first.version == spec.reference_version and ref_first.sampling == umbrela.ORAG_SAMPLING


def test_no_answer_row_is_skipped_under_reference_and_not_answered_under_constrained():
    row = next(r for r in _rows(SAMPLE) if r["key"] == "sistine#1")
    inp = judge_input(row)
    spec = JUDGES["no_answer"]
    constrained = drive(spec.start(inp), lambda p: pytest.fail("no prompt"))
    assert isinstance(constrained, JudgeResult) and constrained.metrics == {"answered": 0.0}
    for name in ORAG_JUDGES:
        s = JUDGES[name]
        result = drive(s.start(inp, **s.options("reference", "m")), lambda p: pytest.fail("no prompt"))
        assert isinstance(result, Undefined) and "open-rag-eval skips" in result.reason, name


def test_empty_answer_text_and_query_give_the_neutral_nugget_result():
    """An answer of citation markers only ("[1]") has no text: open-rag-eval's
    _assign_nuggets raises, the evaluator writes 0.5; an empty query likewise."""
    for query, answer in (("q", ""), ("", "an answer")):
        result = drive(nuggets.run_reference(query, answer, ["p"]), lambda p: pytest.fail("no prompt"))
        assert result.metrics["nuggets_vital"] == result.metrics["nuggets_assignment_mean"] == 0.5
        assert result.metrics["nuggets_all"] is None and result.details["failed"]


def test_export_of_a_failed_reference_nugget_evaluation():
    """open-rag-eval writes {} as the autonugget cell of a failed evaluation (its 0.5 goes to the
    vital and mean-assignment cells only); ragscale's export does the same under reference."""
    from ragscale.report.orag_export import _nugget_cell

    failed = {"nuggets_vital": 0.5, "nuggets_assignment_mean": 0.5, "nuggets_all": None}
    assert _nugget_cell(failed, {"nuggets": {"failed": "empty nugget list"}}) == {}
    ok = {"nuggets_vital": 1.0, "nuggets_all": 0.5}
    assert _nugget_cell(ok, {"nuggets": {"nuggets": ["a", "b"], "labels": ["vital", "okay"]}})["nuggetizer_scores"] == \
        {"All": 0.5, "Vital": 1.0}
