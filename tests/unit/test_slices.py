"""Slices and the unit of resampling (ragscale.report.slices, docs/statistics.md "Slices"): a task's
value of a field, the conversation as the unit of every test, the per-model intervals, and slice
discovery with the false discovery rate controlled (Benjamini-Hochberg): a constructed slice where the
overall winner loses is found; with no slice effect the flagged slices stay within the FDR level."""


import numpy as np
import pytest

from ragscale.config import SignificanceConf, SlicesConf
from ragscale.errors import UserError
from ragscale.overrides import normalize
from ragscale.report.significance import PairedValues, compare
from ragscale.report.slices import (check_slices, cluster_field, console_lines, finding_text, intervals_block,
                                    markdown_lines, slice_value, slices_block, slices_context)

SETTINGS = SignificanceConf(resamples=999)


def rec(model, conv, turn, value, **fields):
    return {"task_id": f"{conv}::{turn}", "conversation_id": conv, "turn": turn, "model_id": model,
            "metrics": {"RB_agg": [value]}, **fields}


def sweep(rng, effects, convs=40, turns=(3, 6), rho=0.5, base=0.5):
    """Two models on conversations of several turns, each in a domain (Collection); model m1's
    advantage over m2 is ``effects[domain]``; turns of one conversation share a random effect
    (intra-conversation correlation ``rho`` of the differences)."""
    out = []
    domains = list(effects)
    for c in range(convs):
        dom = domains[c % len(domains)]
        shared = rng.normal(0, np.sqrt(rho) * 0.2)
        for t in range(1, rng.integers(turns[0], turns[1] + 1) + 1):
            task = rng.normal(base, 0.1)
            noise = rng.normal(0, np.sqrt(1 - rho) * 0.2)
            out.append(rec("m1", f"c{c}", t, task + effects[dom] + shared + noise, Collection=dom))
            out.append(rec("m2", f"c{c}", t, task, Collection=dom))
    return out


def fed(records, cluster_by="conversation_id", slice_by=("Collection",)):
    values = PairedValues(["RB_agg"], cluster_by=cluster_by, slice_by=list(slice_by))
    for r in records:
        values.add(r)
    return values


@pytest.mark.parametrize("record, field, want", [
    ({"Collection": "FiQA"}, "Collection", "FiQA"),
    ({"turn": 3}, "turn", "3"),
    ({"turn": 3.0}, "turn", "3"),
    ({"tags": ["b", "a", "b"]}, "tags", "a+b"),
    ({"flag": True}, "flag", "true"),
    ({"Collection": "  "}, "Collection", None),
    ({"x": float("nan")}, "x", None),
    ({"x": {"nested": 1}}, "x", None),
    ({"input": [{"speaker": "user", "text": "q", "enrichments": {"Question Type": ["Factoid"]}}]},
     "Question Type", "Factoid"),
    ({}, "Collection", None),
])
def test_a_tasks_value_of_a_field(record, field, want):
    assert slice_value(record, field) == want


def test_answerability_is_the_readers():
    r = {"task_id": "t", "input": [{"speaker": "user", "text": "q", "enrichments": {"answerability": ["UNANSWERABLE"]}}],
         "predictions": [{"text": "a"}]}
    assert slice_value(r, "answerability") == "UNANSWERABLE"


def test_settings_and_shorthand():
    assert cluster_field("none") is None and cluster_field(None) is None and cluster_field(" conv ") == "conv"
    with pytest.raises(UserError, match="cluster_by must be a field name"):
        cluster_field(3)
    assert normalize(["slices=[Collection,turn]", "slices=turn", "slices.min_n=5"]) == [
        "slices.by=[Collection,turn]", "slices.by=[turn]", "slices.min_n=5"]
    for bad, msg in ((SlicesConf(by=["a", "a"]), "names a field twice"), (SlicesConf(by=[""]), "list of field names"),
                     (SlicesConf(by=["a"], min_n=1), "min_n must be an integer >= 2")):
        with pytest.raises(UserError, match=msg):
            check_slices(bad)


def test_the_unit_is_the_conversation():
    rng = np.random.default_rng(1)
    values = fed(sweep(rng, {"a": 0.1}, convs=12))
    unit = values.unit()
    assert unit["by"] == "conversation_id" and unit["units"] == 12 and unit["name"] == "conversation"
    assert unit["text"].startswith("resampled by conversation: 12 conversations (")
    block = compare(["m1", "m2"], values, SETTINGS)
    assert block["unit"] == unit
    (entry,) = block["metrics"]["RB_agg"]
    assert entry["units"] == 12 and entry["design_effect"] > 1
    plain = fed(sweep(np.random.default_rng(1), {"a": 0.1}, convs=12), cluster_by=None)
    assert plain.unit()["name"] == "task" and plain.clusters() is None
    (naive,) = compare(["m1", "m2"], plain, SETTINGS)["metrics"]["RB_agg"]
    assert "units" not in naive and naive["diff"] == entry["diff"]
    # whole conversations resampled: the interval is wider than the one treating turns as independent
    assert entry["ci"][1] - entry["ci"][0] > naive["ci"][1] - naive["ci"][0]


def test_tasks_without_the_field_stand_alone():
    records = [rec("m1", "c1", 1, 0.5), rec("m2", "c1", 1, 0.4)]
    records += [{**r, "conversation_id": None} for r in (rec("m1", "c9", 1, 0.2), rec("m2", "c9", 1, 0.1))]
    unit = fed(records).unit()
    assert unit["units"] == 2 and "1 task without conversation_id, each on its own" in unit["text"]
    none = fed([{**r, "conversation_id": None} for r in records])
    assert none.unit()["text"] == "resampled by task: 2 tasks (no record has conversation_id)"


def test_intervals_of_means_resample_the_unit():
    rng = np.random.default_rng(2)
    records = sweep(rng, {"a": 0.1}, convs=30)
    block = intervals_block(["m1", "m2"], fed(records), 0.95)
    est = block["models"]["m1"]["RB_agg"]
    vals = np.array([r["metrics"]["RB_agg"][0] for r in records if r["model_id"] == "m1"])
    assert est["n"] == len(vals) and est["units"] == 30 and est["mean"] == pytest.approx(vals.mean())
    naive = intervals_block(["m1", "m2"], fed(records, cluster_by=None), 0.95)["models"]["m1"]["RB_agg"]
    assert naive["units"] == len(vals) and naive["design_effect"] is None
    assert est["ci"][1] - est["ci"][0] > naive["ci"][1] - naive["ci"][0]
    from ragscale.stats.intervals import mean_interval

    lo, hi = mean_interval("RB_agg", len(vals), vals.mean(), vals.std(ddof=1), (vals.min(), vals.max()))
    assert naive["ci"] == pytest.approx([lo, hi], abs=1e-12)  # each record alone: today's Student-t interval


def test_a_slice_where_the_overall_winner_loses_is_found():
    rng = np.random.default_rng(3)
    records = sweep(rng, {"Cloud": 0.12, "FiQA": 0.12, "Govt": -0.15}, convs=90)
    values = fed(records)
    overall = compare(["m1", "m2"], values, SETTINGS)
    assert overall["metrics"]["RB_agg"][0]["better"] == "m1"
    block = slices_block(["m1", "m2"], values, SETTINGS, "RB_agg", 10, overall)
    # 3 slices x (1 pair + 2 models against their own overall mean)
    assert block["correction"] == "bh" and block["tests"] == 9
    first = block["findings"][0]
    assert (first["field"], first["value"], first["worse"], first["better"]) == ("Collection", "Govt", "m1", "m2")
    assert first["reversal"] and first["overall"] == "m1 significantly better overall" and first["difference"] > 0
    assert first["p_adjusted"] <= 0.05
    levels = block["fields"]["Collection"]["levels"]
    assert set(levels) == {"Cloud", "FiQA", "Govt"} and levels["Govt"]["models"]["m1"]["units"] == 30
    summary = {"slices": block}
    text = "\n".join(markdown_lines(summary))
    assert "## Where models lose" in text and "m1 worse than m2 on Collection=Govt (RB_agg)" in text
    assert "m1 ranks above m2 overall" in text and "| Govt | " in text
    assert console_lines(summary)[0].startswith("m1 worse than m2 on Collection=Govt")
    # m1 is also worse on Govt than its own overall mean; m2 (no domain effect) is nowhere
    own = [f for f in block["findings"] if f["better"] is None]
    assert [(f["worse"], f["value"]) for f in own] == [("m1", "Govt")]
    assert own[0]["difference"] == pytest.approx(own[0]["overall_mean"] - own[0]["mean"]) and own[0]["difference"] > 0.1
    assert "m1 worse on Collection=Govt than its own overall mean (RB_agg): " in text


def test_a_slice_below_a_models_own_mean_is_found_with_one_model():
    """One model, weaker on one domain: the slice is found against its own overall mean (the
    cluster-robust t test of the slice mean minus the overall mean), with its interval and n."""
    rng = np.random.default_rng(7)
    records = [r for r in sweep(rng, {"a": 0.0, "b": 0.0, "c": -0.2}, convs=60) if r["model_id"] == "m1"]
    block = slices_block(["m1"], fed(records), SETTINGS, "RB_agg", 10)
    assert block["tests"] == 3
    (found,) = block["findings"]
    assert (found["worse"], found["value"], found["better"]) == ("m1", "c", None)
    vals = np.array([r["metrics"]["RB_agg"][0] for r in records])
    inside = np.array([r["Collection"] == "c" for r in records])
    assert found["mean"] == pytest.approx(vals[inside].mean()) and found["overall_mean"] == pytest.approx(vals.mean())
    assert found["n"] == inside.sum() and found["ci"][0] < found["difference"] < found["ci"][1]
    entry = block["fields"]["Collection"]["levels"]["c"]["models"]["m1"]["vs_overall"]
    assert entry["significant"] and entry["clusters"] == 20 and entry["p_adjusted"] <= 0.05


def test_small_slices_are_not_tested():
    records = sweep(np.random.default_rng(4), {"a": 0.1, "b": 0.1}, convs=4, turns=(2, 2))
    block = slices_block(["m1", "m2"], fed(records), SETTINGS, "RB_agg", 10)
    assert block["tests"] == 0 and block["findings"] == []
    entry = block["fields"]["Collection"]["levels"]["a"]["comparisons"][0]
    assert entry["p"] is None and "fewer than 10 paired tasks: not tested" in entry["note"]


def test_without_a_slice_effect_the_flags_stay_within_the_fdr_level():
    """Under no difference anywhere, BH at 0.05 flags any slice in at most about 5% of draws (its FDR
    is then the chance of any flag); 200 draws of 6 slices."""
    rng = np.random.default_rng(5)
    draws, flagged = 200, 0
    for _ in range(draws):
        records = sweep(rng, {d: 0.0 for d in "abcdef"}, convs=36, turns=(3, 5))
        block = slices_block(["m1", "m2"], fed(records), SETTINGS, "RB_agg", 10)
        flagged += bool(block["findings"])
    assert flagged <= 0.05 * draws + 2 * np.sqrt(0.05 * 0.95 * draws) + 1  # 15 at most of 200


def test_plot_intervals_resample_the_unit():
    from ragscale.report.plots import box_stats
    from ragscale.stats.clustered import cluster_codes, cluster_mean

    rng = np.random.default_rng(6)
    units = [f"c{i // 5}" for i in range(40)]
    vals = np.clip(np.repeat(rng.uniform(0.2, 0.8, 8), 5) + rng.normal(0, 0.05, 40), 0, 1)
    est = cluster_mean(vals, cluster_codes(units))
    box = box_stats("m", list(vals), "RB_agg", units)
    assert box.ci == pytest.approx(tuple(est["ci"]))  # inside the metric's bounds already
    plain = box_stats("m", list(vals), "RB_agg")
    assert box.ci[1] - box.ci[0] > plain.ci[1] - plain.ci[0]
    assert box_stats("m", list(vals), "RB_agg", [None] * 40).ci == plain.ci


def finding(**kw):
    base = {"metric": "RB_agg", "field": "Collection", "value": "Govt", "worse": "m1", "better": "m2",
            "difference": 0.1234, "ci": [0.03, 0.21], "p_adjusted": 0.004, "n": 24, "reversal": False}
    return {**base, **kw}


def test_a_finding_as_a_sentence():
    assert finding_text(finding()) == ("m1 worse than m2 on Collection=Govt (RB_agg): difference 0.1234 "
                                       "[0.0300, 0.2100], adjusted p = 0.004 (BH), 24 tasks")
    assert finding_text(finding(ci=None, reversal=True)).endswith(
        "difference 0.1234, adjusted p = 0.004 (BH), 24 tasks; m1 ranks above m2 overall")
    own = finding(better=None, mean=0.41, overall_mean=0.5, difference=0.09)
    assert finding_text(own) == ("m1 worse on Collection=Govt than its own overall mean (RB_agg): 0.4100 vs 0.5000, "
                                 "difference 0.0900 [0.0300, 0.2100], adjusted p = 0.004 (BH), 24 tasks")


def test_the_console_prints_at_most_five_findings_then_a_count():
    five = {"slices": {"findings": [finding(n=i) for i in range(5)] + ["?"]}}
    assert len(console_lines(five)) == 5 and console_lines(five)[-1].endswith(", 4 tasks")
    seven = {"slices": {"findings": [finding(n=i) for i in range(7)]}}
    assert console_lines(seven)[5:] == ["... and 2 more in leaderboard.md (Where models lose)"]
    assert console_lines({"slices": "?"}) == console_lines("?") == console_lines({}) == []


def test_a_finding_states_what_the_run_says_of_the_pair_overall():
    rng = np.random.default_rng(3)
    values = fed(sweep(rng, {"Cloud": 0.12, "FiQA": 0.12, "Govt": -0.15}, convs=90))
    same, m1 = "no significant difference overall", "m1 significantly better overall"
    for entry, said in [({"a": "m2", "b": "m1", "significant": True, "better": "m1"}, m1),
                        ({"a": "m1", "b": "m2", "significant": False, "better": "m1"}, same),
                        ({"a": "m1", "b": "m2", "significant": True, "better": None}, same),
                        ({"a": "m1", "b": "m3", "significant": True, "better": "m1"}, "not compared overall")]:
        block = slices_block(["m1", "m2"], values, SETTINGS, "RB_agg", 10, {"metrics": {"RB_agg": [entry]}})
        pair = [f for f in block["findings"] if f["better"] is not None]
        assert pair and all(f["overall"] == said for f in pair), (entry, pair)
    block = slices_block(["m1", "m2"], values, SETTINGS, "RB_agg", 10, None)
    assert {f["overall"] for f in block["findings"] if f["better"]} == {"not compared overall"}


def test_the_reports_slice_tables():
    levels = {"Govt": {"tasks": 30, "models": {"m1": {"mean": 0.41, "n": 30, "ci": [0.35, 0.47]},
                                               "m2": {"mean": 0.5, "n": 29}}},
              "FiQA": {"tasks": 12, "models": {"m2": {"mean": None, "n": 0}, "m3": {"mean": 0.7, "n": 12, "ci": [1]}}},
              "Empty": {"tasks": 0, "models": {"m1": "?"}}}
    block = {"metric": "RB_agg", "fields": {"Collection": {"levels": levels}, "turn": {"levels": {}}},
             "findings": [finding(reversal=True), "?"], "by": ["Collection", "turn"], "tests": 9, "min_n": 10,
             "method": "BH", "unit": {"text": "resampled by conversation"}}
    ctx = slices_context({"slices": block})
    assert ctx["metric"] == "RB_agg" and ctx["reversals"] == 1 and ctx["by"] == "Collection, turn"
    assert (ctx["tests"], ctx["min_n"], ctx["method"], ctx["unit"]) == (9, 10, "BH", "resampled by conversation")
    assert ctx["findings"] == [finding_text(finding(reversal=True))]
    (table,) = ctx["tables"]  # a field without levels has no table
    assert table["field"] == "Collection" and table["models"] == ["m1", "m2", "m3"]
    assert [(r["value"], r["tasks"]) for r in table["rows"]] == [("Govt", 30), ("FiQA", 12), ("Empty", 0)]
    none = {"text": "–", "title": None}
    assert table["rows"][0]["cells"] == [{"text": "0.4100 (30)", "title": "n=30, [0.3500, 0.4700]"},
                                         {"text": "0.5000 (29)", "title": "n=29"}, none]
    assert table["rows"][1]["cells"] == [none, none, {"text": "0.7000 (12)", "title": "n=12"}]
    assert table["rows"][2]["cells"] == [none, none, none]
    assert slices_context({"slices": {"fields": "?"}}) is None and slices_context({}) is None


def test_a_runs_summary_blocks_and_what_they_print():
    """The report pass's blocks: intervals for the models with a scored record, the slices by the run's
    settings (their min_n, what the run's significance block says overall), the jury's, and one line each."""
    from types import SimpleNamespace

    from ragscale.report.jury import JuryValues
    from ragscale.report.slices import summary_blocks

    rng = np.random.default_rng(3)
    records = sweep(rng, {"Cloud": 0.12, "FiQA": 0.12, "Govt": -0.15}, convs=90)
    values = fed(records)
    overall = compare(["m1", "m2"], values, SETTINGS)
    summary = {"metrics": ["RB_agg"], "significance": overall,
               "models": {"m1": {"count": 10, "errors": 0, "metrics": {"RB_agg": 0.6}, "n": {"RB_agg": 10}},
                          "m2": {"count": 10, "errors": 0, "metrics": {"RB_agg": 0.5}, "n": {"RB_agg": 10}},
                          "m3": {"count": 2, "errors": 2, "metrics": {}, "n": {}}}}
    jury = JuryValues({"RB_llm": ["a", "b"]})
    for i in range(4):
        jury.add({"task_id": f"t{i}", "model_id": "m1", "metrics": {"RB_llm@a": [0.25 * i], "RB_llm@b": [0.25 * i]}})
    lines: list[str] = []
    settings = SimpleNamespace(significance=SETTINGS, slices=SimpleNamespace(by=["Collection"], min_n=10))
    out = summary_blocks(summary, values, jury, settings, lines.append)
    assert list(out["intervals"]["models"]) == ["m1", "m2"]  # m3 has no scored record
    block = out["slices"]
    assert block["min_n"] == 10 and block["tests"] == 9
    assert any(f["overall"] == "m1 significantly better overall" for f in block["findings"])
    assert lines[0] == (f"[ragscale] slices: 9 slice test(s) of RB_agg by Collection; {len(block['findings'])} where a "
                        "model is significantly worse (Benjamini-Hochberg)")
    assert lines[1].startswith("[ragscale] jury on RB_llm: Krippendorff's alpha 1.00 (ordinal, 2 judges, 4 records)")
    small = summary_blocks(summary, values, None, SimpleNamespace(significance=SETTINGS,
                                                                 slices=SimpleNamespace(by=["Collection"], min_n=200)),
                           lines.append)
    assert small["slices"]["tests"] == 0 and "jury" not in small  # no slice has 200 tasks
    assert "slices" not in summary_blocks(summary, values, None, SimpleNamespace(significance=SETTINGS,
                                                                                 slices=SimpleNamespace(by=[])))


@pytest.mark.parametrize("block, expected", [
    ({"models": {"m1": {"RB_agg": {"mean": 0.5, "ci": [0.4, 0.6]}}}}, (0.4, 0.6)),
    ({"models": {"m1": {"RB_agg": {"mean": 0.5, "ci": [0, 1]}}}}, (0.0, 1.0)),
    ({"models": {"m1": {"RB_agg": {"mean": 0.5, "ci": [0.4]}}}}, None),
    ({"models": {"m1": {"RB_agg": {"mean": 0.5, "ci": [0.4, "0.6"]}}}}, None),
    ({"models": {"m1": {"RB_agg": {"mean": 0.5, "ci": [True, 0.6]}}}}, None),
    ({"models": {"m1": {"RB_agg": {"mean": 0.5, "ci": None}}}}, None),
    ({"models": {"m1": {"RB_agg": [0.4, 0.6]}}}, None),
    ({"models": {"m1": {}}}, None),
    ({"models": {}}, None),
    ({}, None),
    ("intervals", None),
])
def test_the_interval_kept_for_a_models_mean(block, expected):
    from ragscale.report.slices import kept_interval, unit_text

    got = kept_interval(block, "m1", "RB_agg")
    assert got == expected and (got is None or all(isinstance(v, float) for v in got))
    assert unit_text({"unit": {"text": "resampled by conversation"}}) == "resampled by conversation"
    assert unit_text({"unit": {"text": 3}}) is None and unit_text({"unit": "x"}) is None and unit_text(None) is None
