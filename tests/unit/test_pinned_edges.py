"""Edge cases pinned because a deliberate bug in them survived the suite (docs/testing.md):
resume keys across a sweep with ``limit``, resume=false / overwrite=true / the fingerprint,
the derived MT-RAG values, RB_agg's boundaries and competition ranking of ties."""

from __future__ import annotations

import json
import os

import pytest

from ragscale.errors import UserError
from ragscale.io.inputs import PointerArray, resolve_inputs, scan
from ragscale.io.output import STATE, RecordKeys, finished_keys, prepare
from ragscale.metrics.aggregate import rb_agg
from rows import rows_of, table, worker_row  # tests/rows.py
from ragscale.pipeline.cpu_stages import derive
from ragscale.report.ranking import ranked


# -- resume keys ----------------------------------------------------------------------------

def test_an_earlier_runs_record_beyond_limit_never_marks_the_next_files_record_done(tmp_path):
    """Sweep of two files, limit=3 over each: an earlier run wrote a:4, beyond this run's
    limit. Its code falls between a's and b's codes; a lookup that does not check the code
    it lands on would mark b:0 (never evaluated) done, and b:0 would never be written."""
    for name in ("a", "b"):
        (tmp_path / f"{name}.jsonl").write_text("".join(f'{{"task_id": "{name}{i}"}}\n' for i in range(6)))
    files = resolve_inputs([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")])
    assert len(files) == 2
    keys_all = [p.key(files) for p in scan(files, with_tasks=False)]  # a:0..5 then b:0..5
    run = PointerArray.scan(files, with_tasks=False)[[0, 1, 2, 6, 7, 8]]  # limit=3 over each file
    keys = RecordKeys(files, run)
    a4, b0 = keys_all[4], keys_all[6]
    assert keys.add(a4) and a4 in keys and keys.other == {a4}
    assert b0 not in keys
    assert keys.done_mask(run).tolist() == [False] * 6 and keys.expected_done() == 0


def test_resume_false_and_overwrite_start_afresh_and_the_fingerprint_refuses_changes(tmp_path):
    out = str(tmp_path)
    prepare(out, {"metrics": ["RL_F"], "judge": "m1"}, resume=True, overwrite=False)
    with open(os.path.join(out, "records.jsonl"), "w") as fh:
        fh.write(json.dumps({"ragscale": {"record_key": "k1"}}) + "\n")
    prepare(out, {"metrics": ["RL_F"], "judge": "m1"}, resume=True, overwrite=False)  # same config: kept
    assert list(finished_keys(out)) == ["k1"]
    with pytest.raises(UserError, match=r"different configuration \(judge\); use another output_dir or overwrite=true"):
        prepare(out, {"metrics": ["RL_F"], "judge": "m2"}, resume=True, overwrite=False)
    assert list(finished_keys(out)) == ["k1"]  # a refusal touches nothing
    prepare(out, {"metrics": ["RL_F"], "judge": "m1"}, resume=False, overwrite=False)
    assert list(finished_keys(out)) == []  # resume=false: the earlier records are gone
    with open(os.path.join(out, "records.jsonl"), "w") as fh:
        fh.write(json.dumps({"ragscale": {"record_key": "k2"}}) + "\n")
    prepare(out, {"metrics": ["RL_F", "RB_llm"], "judge": "m1"}, resume=True, overwrite=True)
    assert list(finished_keys(out)) == []
    with open(os.path.join(out, STATE)) as fh:
        assert json.load(fh)["metrics"] == ["RL_F", "RB_llm"]  # the new fingerprint is the one kept


# -- derived MT-RAG values ------------------------------------------------------------------

DERIVED = ["RB_agg", "RB_agg_idk", "RB_llm_idk", "RL_F_idk", "HMean", "HMean_idk", "RB_agg_idk_underspecified",
           "RB_llm_idk_underspecified", "RL_F_idk_underspecified"]


def _row(answerability: str, **metrics: float) -> dict:
    return worker_row(answerability=answerability, error=None, metrics={k: [v] for k, v in metrics.items()})


def _derive(*rows: dict) -> list[dict]:
    out = rows_of(derive(table(list(rows), DERIVED), metrics=DERIVED))
    return [{k: (v or [None])[0] for k, v in r["metrics"].items()} for r in out]


BASE = dict(Recall=0.5, RougeL_stemFalse=0.4, BertscoreR=0.2, BertKPrec=0.6, RL_F=0.8, RB_llm=0.7)


def test_derive_computes_every_mtrag_value_by_hand():
    # RB_agg: recall (0.2+1)/2 = 0.6, rouge 0.4, extract (0.6+1)/2 = 0.8: 3*.6*.4*.8 / (.24+.48+.32)
    agg = 3 * 0.6 * 0.4 * 0.8 / (0.6 * 0.4 + 0.6 * 0.8 + 0.4 * 0.8)
    ans, ans_idk, unans, unans_idk, under, under_clar = _derive(
        _row("ANSWERABLE", idk_eval=0.0, underspecified_eval=0.0, **BASE),
        _row("ANSWERABLE", idk_eval=1.0, underspecified_eval=0.0, **BASE),
        _row("UNANSWERABLE", idk_eval=0.0, underspecified_eval=0.0, **BASE),
        _row("UNANSWERABLE", idk_eval=1.0, underspecified_eval=0.0, **BASE),
        _row("UNDERSPECIFIED", idk_eval=1.0, underspecified_eval=0.0, **BASE),
        _row("UNDERSPECIFIED", idk_eval=0.0, underspecified_eval=1.0, **BASE))
    hmean = 3 / (1 / 0.8 + 1 / 0.7 + 1 / agg)
    assert ans["RB_agg"] == pytest.approx(agg) and ans["HMean"] == pytest.approx(hmean)
    assert (ans["RB_agg_idk"], ans["RB_llm_idk"], ans["RL_F_idk"]) == pytest.approx((agg, 0.7, 0.8))
    assert ans["HMean_idk"] == pytest.approx(hmean)
    # answerable but a full IDK: every conditioned metric 0, HMean_idk 0, HMean unchanged
    assert (ans_idk["RB_agg_idk"], ans_idk["RB_llm_idk"], ans_idk["RL_F_idk"], ans_idk["HMean_idk"]) == (0, 0, 0, 0)
    assert ans_idk["HMean"] == pytest.approx(hmean)
    # unanswerable: 1 for a full IDK, else 0; HMean_idk built from the conditioned values
    assert (unans["RB_agg_idk"], unans["HMean_idk"]) == (0.0, 0.0) and unans["HMean"] == pytest.approx(hmean)
    assert (unans_idk["RB_agg_idk"], unans_idk["RB_llm_idk"], unans_idk["RL_F_idk"]) == (1.0, 1.0, 1.0)
    assert unans_idk["HMean_idk"] == 1.0  # not RB_agg's own value: it comes from RB_agg_idk
    # the underspecified rule: 1 for a clarification, else 0; elsewhere the IDK rule
    assert under["RB_agg_idk_underspecified"] == 0.0 and under_clar["RL_F_idk_underspecified"] == 1.0
    assert under_clar["RB_llm_idk_underspecified"] == 1.0 and under["RB_llm_idk"] == 0.0
    assert ans["RB_agg_idk_underspecified"] == pytest.approx(agg) and unans_idk["RL_F_idk_underspecified"] == 1.0


def test_a_failed_idk_judge_leaves_the_conditioned_values_null():
    (row,) = _derive(_row("ANSWERABLE", underspecified_eval=0.0, **BASE))
    assert row["RB_agg_idk"] is None and row["HMean_idk"] is None and row["HMean"] is not None


# -- RB_agg ----------------------------------------------------------------------------------

def test_rb_agg_with_perfect_components_and_missing_bertkprec():
    m = {"Recall": [1.0], "RougeL_stemFalse": [1.0], "BertscoreR": [1.0], "BertKPrec": [1.0]}
    assert rb_agg(m) == (pytest.approx(1.0), False)  # a perfect RougeL or recall is not "zero"
    assert rb_agg({**m, "BertscoreR": [-1.0]})[0] == 0.0  # recall (-1+1)/2 = 0
    # a passage without BertKPrec counts as 0, not skipped: max(0, -0.5) -> extract 0.5
    assert rb_agg({**m, "BertKPrec": [None, -0.5]})[0] == pytest.approx(3 * 0.5 / (1 + 0.5 + 0.5))  # skipped: 0.5
    assert rb_agg({**m, "BertKPrec": []}) == (0.0, False)  # no passages: extractiveness 0
    assert rb_agg({**m, "RougeL_stemFalse": [0.0], "BertKPrec": []}) == (0.0, True)  # two zeros: denominator 0
    assert rb_agg({k: v for k, v in m.items() if k != "BertscoreR"} | {"Recall": [0.5]})[0] == pytest.approx(
        3 * 0.5 * 1 * 1 / (0.5 + 0.5 + 1))  # without BERTScore, Recall


# -- leaderboard ranking ---------------------------------------------------------------------

def test_ties_share_a_rank_and_the_next_rank_skips():
    summary = {"models": {m: {"metrics": {"HMean": v}} for m, v in
                          (("a", 0.9), ("b", 0.8), ("c", 0.8), ("d", 0.7), ("e", None))}}
    assert [(r, m) for r, m, _ in ranked(summary, "HMean")] == [(1, "a"), (2, "b"), (2, "c"), (4, "d"), (None, "e")]


def test_mtrag_unknown_idk_label_keeps_the_raw_metric():
    """reference protocol: MT-RAG's first_token_idk "unknown" (idk_eval null, its label in the
    details) matches none of get_idk_score's branches: the raw metric is kept, even unanswerable."""
    unknown = _row("UNANSWERABLE", underspecified_eval=0.0, **BASE)
    unknown["details"] = {"idk": json.dumps({"label": "unknown"})}
    failed = _row("UNANSWERABLE", underspecified_eval=0.0, **BASE)
    failed["details"] = {"idk": json.dumps({"label": "other"})}
    (u, f) = _derive(unknown, failed)
    assert (u["RL_F_idk"], u["RB_llm_idk"], u["RL_F_idk_underspecified"]) == (0.8, 0.7, 0.8)
    assert f["RL_F_idk"] is None and f["RB_llm_idk"] is None
