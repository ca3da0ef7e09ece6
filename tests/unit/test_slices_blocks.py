"""summary.json's ``slices`` and ``intervals`` blocks on small constructed runs (ragscale.report.slices,
docs/statistics.md "Slices" and "Conversation-aware inference"): which slices appear and in what
order, each model's mean with its interval and n, which pairs are compared and from how many paired
tasks, how a finding is oriented, and the report pass that makes the blocks."""

from types import SimpleNamespace

import pytest

from ragscale.config import SignificanceConf
from ragscale.report.significance import PairedValues
from ragscale.report.slices import intervals_block, slices_block, summary_blocks

SETTINGS = SignificanceConf(resamples=199)


def fed(rows, metric="RB_agg", cluster_by=None, slice_by=("Collection",)):
    """``rows``: (model, task, value, fields) with the conversation in fields["conv"] when given."""
    values = PairedValues([metric], cluster_by=cluster_by, slice_by=list(slice_by))
    for model, task, value, fields in rows:
        values.add({"task_id": task, "model_id": model, "metrics": {metric: [value]}, **fields})
    return values


def offsets(n, spread=0.05):
    return [spread * ((i % 4) - 1.5) for i in range(n)]


def effect_rows(means, per_slice=12, spread=0.05):
    """Per model and slice the mean ``means[model][slice]``; task values differ around it the same way
    for every model, m2's and m3's with a zero-mean wobble of their own."""
    rows = []
    for model, by_slice in means.items():
        for s, mean in by_slice.items():
            for i, d in enumerate(offsets(per_slice, spread)):
                wobble = {"m2": 0.02 * (-1) ** i, "m3": 0.03 * (i % 3 - 1)}.get(model, 0.0)
                rows.append((model, f"{s}-{i:02d}", mean + d + wobble, {"Collection": s}))
    return rows


# ------------------------------------------------------------------ which slices, in what order


@pytest.mark.parametrize("metric, order, slice_by", [(None, ["m1"], ["Collection"]), ("RB_agg", [], ["Collection"]),
                                                     ("RB_agg", ["m1"], [])])
def test_no_block_without_a_metric_a_model_or_a_field(metric, order, slice_by):
    values = fed([("m1", f"t{i}", 0.5, {"Collection": "a"}) for i in range(3)], slice_by=slice_by)
    assert slices_block(order, values, SETTINGS, metric, 10) is None


def test_slices_are_the_fields_values_numbers_first_then_text_with_the_tasks_without_one_counted():
    labels = ["10", "2", "b", "1", "A", "2", None, "10", None, "b"]
    rows = [("m1", f"t{i}", 0.1 * i, {"grp": g} if g is not None else {}) for i, g in enumerate(labels)]
    block = slices_block(["m1"], fed(rows, slice_by=["grp"]), SETTINGS, "RB_agg", 10)
    fb = block["fields"]["grp"]
    assert list(fb["levels"]) == ["1", "2", "10", "A", "b"] and all(type(k) is str for k in fb["levels"])
    assert {k: lb["tasks"] for k, lb in fb["levels"].items()} == {"1": 1, "2": 2, "10": 2, "A": 1, "b": 2}
    assert fb["without"] == 2 and block["by"] == ["grp"]
    assert fb["levels"]["2"]["models"]["m1"]["mean"] == pytest.approx(0.3)


def test_slices_of_plain_text_values_are_plain_strings():
    rows = [("m1", f"t{i}", 0.1 * i, {"Collection": c}) for i, c in enumerate(["FiQA", "Cloud", "FiQA", "Govt"])]
    levels = slices_block(["m1"], fed(rows), SETTINGS, "RB_agg", 10)["fields"]["Collection"]["levels"]
    assert list(levels) == ["Cloud", "FiQA", "Govt"] and all(type(k) is str for k in levels)
    assert slices_block(["m1"], fed(rows), SETTINGS, "RB_agg", 10)["fields"]["Collection"]["without"] == 0


# ------------------------------------------------------------------ per slice and model


def test_a_model_without_a_task_in_a_slice_has_no_mean_there_and_the_pair_is_not_tested():
    rows = [("m2", f"a{i}", 0.5, {"Collection": "a"}) for i in range(3)]
    rows += [(m, f"b{i}", 0.5 + 0.1 * i * (m == "m1"), {"Collection": "b"}) for m in ("m1", "m2") for i in range(3)]
    levels = slices_block(["m1", "m2"], fed(rows), SETTINGS, "RB_agg", 10)["fields"]["Collection"]["levels"]
    assert list(levels["a"]["models"]) == ["m2"] and list(levels["b"]["models"]) == ["m1", "m2"]
    (entry,) = levels["a"]["comparisons"]
    assert entry["n"] == 0 and entry["p"] is None
    assert entry["note"] == "no paired tasks; fewer than 10 paired tasks: not tested"
    assert levels["b"]["comparisons"][0]["note"] == "fewer than 10 paired tasks; fewer than 10 paired tasks: not tested"


def test_a_slice_mean_of_one_task_has_no_interval():
    rows = [("m1", "t0", 0.25, {"Collection": "a"}), ("m1", "t1", 0.5, {"Collection": "b"}),
            ("m1", "t2", 0.75, {"Collection": "b"})]
    levels = slices_block(["m1"], fed(rows), SETTINGS, "RB_agg", 10)["fields"]["Collection"]["levels"]
    assert levels["a"]["models"] == {"m1": {"mean": 0.25, "ci": None, "n": 1, "units": 1, "design_effect": None}}


def test_a_slice_means_interval_stays_within_the_metrics_bounds():
    rows = [("m1", f"t{i}", v, {"Collection": "a"}) for i, v in enumerate([0.0, 1.0, 1.0])]
    est = slices_block(["m1"], fed(rows), SETTINGS, "RB_agg", 10)["fields"]["Collection"]["levels"]["a"]["models"]["m1"]
    assert est["ci"] == [0.0, 1.0] and est["mean"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("min_n, tested", [(2, {"a", "b"}), (3, {"b"}), (4, set())])
def test_a_slice_is_tested_from_min_n_paired_tasks_on(min_n, tested):
    """Slice a has 2 tasks and slice b 3, every task its own unit: a slice is compared (and each model's
    slice mean set against its own overall mean) when it has at least min_n tasks."""
    rows = [(m, f"{s}{i}", v + (0.2 if m == "m1" else 0.0), {"Collection": s})
            for m in ("m1", "m2") for s, vals in (("a", [0.1, 0.4]), ("b", [0.3, 0.5, 0.8])) for i, v in enumerate(vals)]
    block = slices_block(["m1", "m2"], fed(rows), SETTINGS, "RB_agg", min_n)
    levels = block["fields"]["Collection"]["levels"]
    assert {s for s, lb in levels.items() if lb["comparisons"][0]["p"] is not None} == tested
    assert {s for s, lb in levels.items() if "vs_overall" in lb["models"]["m1"]} == tested
    for s in set(levels) - tested:
        assert levels[s]["comparisons"][0]["note"].endswith(f"fewer than {min_n} paired tasks: not tested")
    assert block["tests"] == 3 * len(tested) and block["min_n"] == min_n


# ------------------------------------------------------------------ pairs


@pytest.mark.parametrize("all_pairs_max_models, pairs", [
    (3, [("m1", "m2"), ("m1", "m3"), ("m2", "m3")]),
    (8, [("m1", "m2"), ("m1", "m3"), ("m2", "m3")]),
    (2, [("m1", "m2"), ("m1", "m3")]),
])
def test_the_pairs_compared_in_a_slice_are_the_leaderboards(all_pairs_max_models, pairs):
    rows = [(m, f"t{i}", 0.5, {"Collection": "a"}) for m in ("m1", "m2", "m3") for i in range(2)]
    settings = SignificanceConf(resamples=199, all_pairs_max_models=all_pairs_max_models)
    block = slices_block(["m1", "m2", "m3"], fed(rows), settings, "RB_agg", 10)
    entries = block["fields"]["Collection"]["levels"]["a"]["comparisons"]
    assert [(e["a"], e["b"]) for e in entries] == pairs


# ------------------------------------------------------------------ findings


def three_models():
    """m3 is 0.3 below m1 and m2 on slice a and level with them on slice b; ranked m1, m3, m2."""
    means = {m: {"a": 0.5 - (0.3 if m == "m3" else 0.0), "b": 0.5} for m in ("m1", "m2", "m3")}
    return fed(effect_rows(means))


def test_findings_are_oriented_so_the_difference_is_the_better_models_advantage():
    block = slices_block(["m1", "m3", "m2"], three_models(), SETTINGS, "RB_agg", 10)
    entries = {(e["a"], e["b"]): e for e in block["fields"]["Collection"]["levels"]["a"]["comparisons"]}
    assert [e["better"] for e in entries.values()] == ["m1", None, "m2"]
    pairs = [f for f in block["findings"] if f["better"] is not None]
    assert [(f["worse"], f["better"], f["reversal"]) for f in pairs] == [("m3", "m2", True), ("m3", "m1", False)]
    for f in pairs:
        e = entries[("m1", "m3")] if f["better"] == "m1" else entries[("m3", "m2")]
        assert f["difference"] == pytest.approx(abs(e["diff"])) and f["difference"] == pytest.approx(0.3, abs=0.02)
        assert 0 < f["ci"][0] < f["difference"] < f["ci"][1] == pytest.approx(max(abs(v) for v in e["ci"]))
        assert f["ci"][0] == pytest.approx(min(abs(v) for v in e["ci"]))
        assert {k: f[k] for k in ("field", "value", "metric", "n", "p", "p_adjusted", "overall")} == {
            "field": "Collection", "value": "a", "metric": "RB_agg", "n": 12, "p": e["p"],
            "p_adjusted": e["p_adjusted"], "overall": "not compared overall"}
    own = [f for f in block["findings"] if f["better"] is None]
    assert [(f["worse"], f["value"], f["overall"]) for f in own] == [("m3", "a", "against its own overall mean")]
    est = block["fields"]["Collection"]["levels"]["a"]["models"]["m3"]
    assert own[0]["p"] == est["vs_overall"]["p"] and own[0]["difference"] == pytest.approx(-est["vs_overall"]["diff"])
    assert own[0]["ci"] == pytest.approx(sorted(-v for v in est["vs_overall"]["ci"]))
    assert (block["alpha"], block["method"], block["unit"]) == (0.05, block["method"], block["unit"])
    assert block["unit"]["name"] == "task" and block["method"].startswith("paired bootstrap (BCa)")
    assert set(block) == {"by", "metric", "min_n", "alpha", "correction", "method", "tests", "unit", "fields",
                          "findings"}


def test_for_a_metric_where_lower_is_better_the_higher_slice_is_the_worse():
    means = {"m1": {"a": 0.2, "b": 0.2}, "m2": {"a": 0.5, "b": 0.2}}
    values = fed(effect_rows(means), metric="UnsupportedClaimRate")
    block = slices_block(["m2", "m1"], values, SETTINGS, "UnsupportedClaimRate", 10)
    summary = [(f["worse"], f["better"], f["value"]) for f in block["findings"]]
    assert summary == [("m2", "m1", "a"), ("m2", None, "a")]
    own = block["findings"][1]
    assert block["findings"][0]["reversal"] and not own["reversal"]
    assert own["difference"] == pytest.approx(own["mean"] - own["overall_mean"]) and own["difference"] > 0.1
    assert own["ci"][0] < own["difference"] < own["ci"][1]


def test_a_metric_without_a_direction_has_no_findings():
    means = {"m1": {"a": 2.0, "b": 2.0}, "m2": {"a": 9.0, "b": 2.0}}
    block = slices_block(["m1", "m2"], fed(effect_rows(means), metric="Length"), SETTINGS, "Length", 10)
    assert block["tests"] == 6 and block["findings"] == []
    assert all(e["better"] is None for e in block["fields"]["Collection"]["levels"]["a"]["comparisons"])


def test_an_adjusted_p_equal_to_alpha_is_significant():
    rows = [(m, f"t{i}", 0.5 + (0.05 if m == "m1" else 0.0) + 0.1 * ((i * 7) % 5 - 2) * (m == "m1"),
             {"Collection": "a"}) for m in ("m1", "m2") for i in range(10)]
    first = slices_block(["m1", "m2"], fed(rows), SETTINGS, "RB_agg", 10)
    (entry,) = first["fields"]["Collection"]["levels"]["a"]["comparisons"]
    q = entry["p_adjusted"]
    again = slices_block(["m1", "m2"], fed(rows), SignificanceConf(resamples=199, alpha=q), "RB_agg", 10)
    (entry,) = again["fields"]["Collection"]["levels"]["a"]["comparisons"]
    assert entry["p_adjusted"] == q and entry["significant"] and entry["better"] == "m1"


@pytest.mark.parametrize("order", [["m1", "m2"], ["m2", "m1"]])
def test_a_model_better_by_the_whole_range_is_found_better(order):
    rows = [(m, f"t{i}", 1.0 if m == "m1" else 0.0, {"Collection": "a"}) for m in ("m1", "m2") for i in range(12)]
    block = slices_block(order, fed(rows), SETTINGS, "RB_agg", 10)
    (entry,) = block["fields"]["Collection"]["levels"]["a"]["comparisons"]
    assert abs(entry["diff"]) == 1.0 and entry["significant"] and entry["better"] == "m1"
    (found,) = block["findings"]
    assert (found["worse"], found["better"], found["difference"]) == ("m2", "m1", 1.0)
    assert found["reversal"] == (order[0] == "m2")


@pytest.mark.parametrize("narrow, wide", [(0.8, 0.95)])
def test_a_lower_confidence_gives_narrower_slice_intervals(narrow, wide):
    values = three_models()
    width = {}
    for conf in (narrow, wide):
        block = slices_block(["m1", "m3", "m2"], values, SignificanceConf(resamples=199, confidence=conf), "RB_agg", 10)
        est = block["fields"]["Collection"]["levels"]["a"]["models"]["m3"]
        width[conf] = (est["ci"][1] - est["ci"][0], est["vs_overall"]["ci"][1] - est["vs_overall"]["ci"][0])
    assert width[narrow][0] < width[wide][0] and width[narrow][1] < width[wide][1]


# ------------------------------------------------------------------ intervals


def test_a_models_mean_from_one_record_has_no_interval():
    block = intervals_block(["m1", "m2"], fed([("m1", "t0", 0.25, {}), ("m2", "t0", 0.5, {}),
                                              ("m2", "t1", 0.75, {})]), 0.95)
    assert block["models"]["m1"] == {"RB_agg": {"mean": 0.25, "ci": None, "n": 1, "units": 1, "design_effect": None}}


def test_a_models_records_in_one_conversation_have_no_interval():
    rows = [("m1", f"t{i}", v, {"conv": "c1"}) for i, v in enumerate([0.25, 0.5, 0.75])]
    block = intervals_block(["m1"], fed(rows, cluster_by="conv"), 0.95)
    assert block["models"]["m1"]["RB_agg"] == {"mean": 0.5, "ci": None, "n": 3, "units": 1, "design_effect": None}


@pytest.mark.parametrize("vals, ci", [([0.05, 0.95, 0.5], [0.0, 1.0]), ([1.5, 0.0, 0.9], [0.0, 1.5])])
def test_an_interval_is_cut_to_the_metrics_bounds_widened_to_the_values_seen(vals, ci):
    block = intervals_block(["m1"], fed([("m1", f"t{i}", v, {}) for i, v in enumerate(vals)]), 0.95)
    assert block["models"]["m1"]["RB_agg"]["ci"] == ci


def test_intervals_resample_conversations_with_their_design_effect_and_confidence():
    rows = [("m1", f"c{c}-{t}", base + 0.01 * t, {"conv": f"c{c}"})
            for c, base in enumerate([0.2, 0.7, 0.4, 0.5, 0.3, 0.6]) for t in range(3)]
    values = fed(rows, cluster_by="conv")
    wide, narrow = (intervals_block(["m1"], values, conf) for conf in (0.95, 0.8))
    est = wide["models"]["m1"]["RB_agg"]
    assert (est["n"], est["units"]) == (18, 6) and est["design_effect"] > 2
    assert narrow["confidence"] == 0.8 and set(narrow) == {"unit", "confidence", "models"}
    low, high = narrow["models"]["m1"]["RB_agg"]["ci"]
    assert est["ci"][0] < low < high < est["ci"][1]


# ------------------------------------------------------------------ the report pass


def run_summary():
    return {"metrics": ["RB_agg"],
            "models": {"m1": {"count": 24, "errors": 0, "metrics": {"RB_agg": 0.6}, "n": {"RB_agg": 24}},
                       "m2": {"count": 24, "errors": 0, "metrics": {"RB_agg": 0.5}, "n": {"RB_agg": 24}},
                       "m3": {"count": 24, "errors": 24, "metrics": {}, "n": {}}}}


def test_the_report_pass_compares_the_models_with_a_scored_record_at_min_n_10_by_default():
    means = {"m1": {"a": 0.6, "b": 0.6}, "m2": {"a": 0.5, "b": 0.5}}
    rows = [(m, t, v, {**f, "turn": int(t[-2:]) % 2 + 1}) for m, t, v, f in effect_rows(means)]
    values = fed(rows, slice_by=["Collection", "turn"])
    lines = []
    settings = SimpleNamespace(significance=SETTINGS, slices=SimpleNamespace(by=["Collection", "turn"]))
    block = summary_blocks(run_summary(), values, None, settings, lines.append)["slices"]
    assert block["min_n"] == 10 and block["by"] == ["Collection", "turn"]
    for fb in block["fields"].values():
        assert all([(e["a"], e["b"]) for e in lb["comparisons"]] == [("m1", "m2")] for lb in fb["levels"].values())
    assert lines == [(f"[ragscale] slices: {block['tests']} slice test(s) of RB_agg by Collection, turn; "
                      f"{len(block['findings'])} where a model is significantly worse (Benjamini-Hochberg)")]


def test_a_failing_block_is_reported_and_the_others_still_made():
    class Broken:
        def clusters(self):
            raise ValueError("no tasks")

    class Jury:
        def block(self):
            raise KeyError("judges")

    settings = SimpleNamespace(significance=SETTINGS, slices=SimpleNamespace(by=["Collection"], min_n=10))
    failed = []
    out = summary_blocks(run_summary(), Broken(), Jury(), settings, print, lambda label, e: failed.append((label, e)))
    assert out == {} and [label for label, _ in failed] == ["significance", "jury"]
    assert isinstance(failed[0][1], ValueError) and str(failed[0][1]) == "no tasks"
    with pytest.raises(ValueError, match="no tasks"):
        summary_blocks(run_summary(), Broken(), None, settings, print)
