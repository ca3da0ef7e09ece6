"""The local judge engine (llama.cpp + packaged SmolLM2) in the pipeline: IDK, RADBench, conditioning."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, assert_parse_floors, run_on_records

pytestmark = pytest.mark.integration
pytest.importorskip("llama_cpp", reason="the local judge engine is built by scripts/setup.sh")


def test_judge_actor_generates_parses_and_caches(tmp_path):

    from ragscale.actors.judge import JudgeActor
    from ragscale.pipeline.stage import process_table, to_rows
    from ragscale.io.inputs import resolve_inputs, scan
    from ragscale.config import JudgeConf
    from ragscale.weights import resolve_gguf, split_gguf_spec
    from ragscale.pipeline.cpu_stages import load_and_lexical, pointer_table

    files = resolve_inputs(os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl"))
    ptrs = list(scan(files, with_tasks=False))[:2]
    from ragscale.row import row_schema

    rows = load_and_lexical(pointer_table(ptrs), files=files, metrics=["Recall"],
                            schema=row_schema(["Recall", "idk_eval", "RB_llm"]))
    spec, requantize = split_gguf_spec(JudgeConf.model)  # the local judge's default model
    kwargs = {"engine": {"engine": "llama.cpp", "model_path": resolve_gguf(spec), "requantize": requantize,
                         "n_ctx": 8192, "n_threads": 2, "seed": 0},
              "judges": ["idk", "radbench"], "cache_path": str(tmp_path / "judge.sqlite"), "max_retries": 1}
    first = to_rows(process_table(JudgeActor(**kwargs), "judge", rows))
    stats = json.loads(first[0]["stats"])
    assert stats["judge_prompts"] == 4 and stats["judge_generations"] >= 4 and stats.get("judge_cache_hits", 0) == 0
    for row in first:
        m = row["metrics"]
        errs = [json.loads(e) for e in row["judge_errors"]]
        for metric, judge in (("idk_eval", "idk"), ("RB_llm", "radbench")):
            # constrained decoding: a score, or a recorded parse failure with its raw text
            assert (m[metric] is not None and len(m[metric]) == 1) or any(e["judge"] == judge and "raw" in e for e in errs)
        if m["idk_eval"] is not None:
            assert m["idk_eval"][0] in (0.0, 0.5, 1.0)
    again = to_rows(process_table(JudgeActor(**kwargs), "judge", rows))  # a fresh actor: everything from the disk cache
    stats2 = json.loads(again[0]["stats"])
    assert stats2.get("judge_generations", 0) == 0 and stats2["judge_cache_hits"] == stats["judge_generations"]
    assert [r["metrics"] for r in again] == [r["metrics"] for r in first]


def test_cli_runs_all_five_mtrag_steps_and_hmean(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=mtrag", f"output_dir={out}", "limit=4",
           f"judge.cache_path={tmp_path / 'cache.sqlite'}"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    recs = [json.loads(line) for line in open(out / "records.jsonl")]
    assert len(recs) == 4
    for r in recs:
        m = r["metrics"]
        assert {"RB_agg", "idk_eval", "RL_F", "RB_llm", "RB_agg_idk", "RB_llm_idk", "RL_F_idk", "HMean",
                "HMean_idk"} <= set(m)
        errs = r["ragscale"]["judge_errors"]
        for metric, judge in (("idk_eval", "idk"), ("RL_F", "ragas_faithfulness"), ("RB_llm", "radbench")):
            # a score, or null with the reason (parse failure with its raw text, or undefined)
            assert m[metric] is not None or any(e["judge"] == judge and ("raw" in e or e.get("undefined")) for e in errs)
        if not r["contexts"]:
            assert m["RL_F"] is None and any(e.get("undefined") and "no passages" in e["reason"] for e in errs)
        parts = [m[k] for k in ("RL_F", "RB_llm", "RB_agg")]
        if all(parts):
            vals = [p[0] for p in parts]
            expected = 0.0 if 0 in vals else 3 / sum(1 / v for v in vals)
            assert m["HMean"][0] == pytest.approx(expected)
        else:
            assert m["HMean"] is None
        ans = r["answerability"][0]
        if m["idk_eval"] is not None:
            idk = m["idk_eval"][0]
            if ans in ("UNANSWERABLE", "CONVERSATIONAL"):
                assert m["RB_agg_idk"] == [1.0 if idk == 1 else 0.0]
            elif idk == 1:
                assert m["RB_agg_idk"] == [0.0]
            else:
                assert m["RB_agg_idk"] == m["RB_agg"]
    assert_parse_floors(out, ["idk", "radbench", "ragas_faithfulness"])
    run = json.load(open(out / "run.json"))
    assert run["models"]["judge"]["engine"] == "llama.cpp"
    assert run["models"]["judge"]["prompt_versions"] == {
        "idk": "mtrag-idk-v1", "ragas_faithfulness": "ragas-0.4.3-faithfulness-v1", "radbench": "mtrag-radbench-v1"}
    work = run["judge_work"]
    by = work["by_judge"]
    assert by["idk"]["prompts"] == 4 and by["radbench"]["prompts"] == 4
    with_passages = sum(1 for r in recs if r["contexts"])
    assert with_passages <= by["ragas_faithfulness"]["prompts"] <= 2 * with_passages
    assert work["prompts"] == sum(b["prompts"] for b in by.values())
    assert work["generations"] + work.get("engine_errors", 0) >= work["prompts"] and work["prompt_tokens"] > 0
    summary = json.load(open(out / "summary.json"))
    assert "answerability_accuracy" in summary["overall"] and summary["overall"]["answerability_n"] > 0
    # the same run again in a new output_dir: every judge output comes from the cache
    res2 = subprocess.run(cmd[:4] + [f"output_dir={tmp_path / 'out2'}"] + cmd[5:], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert res2.returncode == 0, res2.stderr[-3000:]
    run2 = json.load(open(tmp_path / "out2" / "run.json"))
    assert run2["judge_work"].get("generations", 0) == 0
    assert run2["judge_work"]["cache_hits"] == work["generations"]
    recs2 = [json.loads(line) for line in open(tmp_path / "out2" / "records.jsonl")]
    assert sorted(json.dumps(r["metrics"], sort_keys=True) for r in recs2) == sorted(
        json.dumps(r["metrics"], sort_keys=True) for r in recs)


def test_judge_panel_median(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ragscale.run", "+scenario=mtrag", "+judge_panel=local-pair", "steps=[radbench]",
           f"output_dir={out}", "limit=2", f"judge.cache_path={tmp_path / 'cache.sqlite'}",
           f"judge_panel.0.cache_path={tmp_path / 'a.sqlite'}", f"judge_panel.1.cache_path={tmp_path / 'b.sqlite'}"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    import statistics

    for r in (json.loads(line) for line in open(out / "records.jsonl")):
        m = r["metrics"]
        each = [m[f"RB_llm@{t}"][0] for t in ("smollm2-a", "smollm2-b") if m.get(f"RB_llm@{t}")]
        assert m["RB_llm"] == ([statistics.median(each)] if each else None)
    assert_parse_floors(out, ["radbench"])
    run = json.load(open(out / "run.json"))
    assert [p["name"] for p in run["models"]["judge_panel"]] == ["smollm2-a", "smollm2-b"]
    assert run["judge_work"]["by_judge"]["radbench"]["prompts"] == 4  # 2 records x 2 panel judges
    summary = json.load(open(out / "summary.json"))
    assert {"RB_llm", "RB_llm@smollm2-a", "RB_llm@smollm2-b"} <= set(summary["metrics"])


def _conditioned(ans, idk, under, value, underspecified_rule):
    """MT-RAG's get_idk_score / MTRAG-UN's get_idk_underspec_score, written out independently."""
    if underspecified_rule and ans == "UNDERSPECIFIED":
        return None if under is None else (1.0 if under == 1 else 0.0)
    if idk is None:
        return None
    if ans in ("UNANSWERABLE", "CONVERSATIONAL"):
        return 1.0 if idk == 1 else 0.0
    return 0.0 if idk == 1 else value


def _hmean(values):
    if any(v is None for v in values):
        return None
    return 0.0 if 0 in values else len(values) / sum(1 / v for v in values)


def test_mtragun_end_to_end_every_derived_value_by_hand(tmp_path):
    """+scenario=mtragun on one record of each answerability class, one of them UNDERSPECIFIED with a
    clarifying answer: every *_idk, *_idk_underspecified and HMean value equals the reference rules
    applied to the record's own judged components."""
    sample = [json.loads(line) for line in open(os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl"))]
    pick = {(r["task_id"], r["model_id"]): r for r in sample}
    under = json.loads(json.dumps(pick[("conv-library::3", "acme-7b")]))
    under["task_id"] = "conv-library::3u"
    under["input"][-1]["enrichments"]["answerability"] = under["answerability"] = ["UNDERSPECIFIED"]
    under["predictions"] = [{"text": "Do you mean the adult library card or the student card?"}]
    recs = [pick[("conv-api::1", "acme-7b")], pick[("conv-api::2", "borealis-13b")],
            pick[("conv-compost::3", "acme-7b")], under]
    got = run_on_records(tmp_path, "mtragun", recs)
    out = tmp_path / "out"
    assert sorted(r["task_id"] for r in got) == sorted(r["task_id"] for r in recs)
    classes = set()
    for r in got:
        assert r["error"] is None
        m, ans = r["metrics"], r["answerability"][0]
        classes.add(ans)
        one = {k: (m[k][0] if m.get(k) else None) for k in m}
        idk, und = one["idk_eval"], one["underspecified_eval"]
        for base in ("RB_agg", "RB_llm", "RL_F"):
            assert one[f"{base}_idk"] == _conditioned(ans, idk, und, one[base], False), (r["task_id"], base)
            assert one[f"{base}_idk_underspecified"] == _conditioned(ans, idk, und, one[base], True), (r["task_id"], base)
        for name, parts in (("HMean", ("RL_F", "RB_llm", "RB_agg")), ("HMean_idk", ("RL_F_idk", "RB_llm_idk", "RB_agg_idk"))):
            want = _hmean([one[p] for p in parts])
            assert one[name] == (None if want is None else pytest.approx(want)), (r["task_id"], name)
    assert classes == {"ANSWERABLE", "UNANSWERABLE", "CONVERSATIONAL", "UNDERSPECIFIED"}
    assert_parse_floors(out, ["idk", "underspecified", "radbench"])
    summary = json.load(open(out / "summary.json"))
    assert {"RB_agg_idk_underspecified", "RB_llm_idk_underspecified", "RL_F_idk_underspecified"} <= set(summary["metrics"])
    assert "UNDERSPECIFIED" in summary["models"]["acme-7b"]["by_answerability"]
