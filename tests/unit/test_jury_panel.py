"""Judge juries (issue "Judge juries"): any judged metric can be run by a judge panel. The plan puts a
judge on the panel whole (every member writes all of its metrics with ``@<tag>``), names resolve
through the catalog (aliases, ``all``), and the derive stage takes each metric's verdict as the
catalog says (MetricSpec.jury: median, mean or majority; a vector per passage), so that derived
metrics read the jury's values. Plans, verdicts and derive are called directly: no Ray, no model."""

from __future__ import annotations

import copy
import json

import pytest
from rows import rows_of, table, worker_row  # tests/rows.py

from ragscale.actors.judge_plan import panel_judges, panel_metrics, plan_judges
from ragscale.config import JudgeSettings
from ragscale.errors import UserError
from ragscale.judges import JUDGED, JUDGES
from ragscale.metrics.registry import JURY_LEVELS, MetricSpec, jury_level, jury_verdict, lookup
from ragscale.pipeline import graph
from ragscale.pipeline.cpu_stages import derive, panel_details
from ragscale.plan import compose, plan_run

PAIR = ("smollm2-a", "smollm2-b")


def plan(*overrides: str):
    return plan_run(compose(["+judge_panel=local-pair", *overrides]))


def stages(p) -> dict:
    """name or ``judge@tag`` -> the stage."""
    return {st.name + (f"@{st.kwargs['tag']}" if st.kwargs.get("tag") else ""): st for st in graph.build_stages(p)}


# -- the plan ------------------------------------------------------------------------------------


def test_a_multi_metric_judge_goes_on_the_panel_whole_named_by_an_alias():
    p = plan("+scenario=trec", "panel_metrics=[vital_nuggetizer_score]")  # nuggets_vital's alias
    assert p.judge_kwargs["judges"] == ["umbrela", "citation", "no_answer"]
    assert [k["judges"] for k in p.panel_kwargs] == [["nuggets"], ["nuggets"]]
    nuggets = JUDGES["nuggets"].metrics
    st = stages(p)
    assert list(st) == ["nli", "judge", *(f"judge@{t}" for t in PAIR), "derive"]  # members after the main judge
    for t in PAIR:
        member = st[f"judge@{t}"]
        made = {m for m in nuggets if m in p.metrics}
        assert member.produces == {f"{m}@{t}" for m in made} | {f"details:nuggets@{t}"}
        assert member.needs == {"umbrela_scores"}  # the main judge's grades, produced earlier
        assert member.writes == tuple(f"{m}@{t}" for m in nuggets)
    d = st["derive"]
    assert d.kwargs["panel"] == {m: list(PAIR) for m in nuggets}
    assert set(nuggets) <= d.produces  # every metric of the panel's judges, as the main judge writes them all
    assert d.needs == {f"{m}@{t}" for m in nuggets if m in p.metrics for t in PAIR} | {"umbrela_scores"}  # P@k's
    assert p.panel_columns() == [f"{m}@{t}" for t in PAIR for m in nuggets]
    assert set(p.panel_columns()) <= set(graph.row_metrics(p))


def test_umbrela_on_the_panel_takes_the_judge_that_reads_its_grades_along():
    p = plan("+scenario=trec", "panel_metrics=[umbrela]")  # umbrela_mean's alias
    assert p.panel_kwargs[0]["judges"] == ["umbrela", "nuggets"] and p.judge_kwargs["judges"] == ["citation", "no_answer"]
    st = stages(p)
    assert st["judge@smollm2-a"].needs == frozenset()  # each member's nuggets read its own grades
    assert {"umbrela_scores", "umbrela_mean", "nuggets_vital"} <= st["derive"].produces


def test_all_puts_every_judged_metric_of_the_run_on_the_panel():
    p = plan("+scenario=mtrag", "panel_metrics=[all]")
    assert p.judge_kwargs["judges"] == [] and all(k["judges"] == ["idk", "ragas_faithfulness", "radbench"]
                                                  for k in p.panel_kwargs)
    st = stages(p)
    assert "judge" not in st and list(st)[-1] == "derive"  # no main judge pool when it has nothing to run
    assert st["derive"].kwargs["panel"] == {"idk_eval": list(PAIR), "RL_F": list(PAIR), "RB_llm": list(PAIR)}
    assert {"RB_llm_idk", "HMean_idk", "idk_eval", "RL_F", "RB_llm"} <= st["derive"].produces
    # answer relevancy stays with the main judge: the relevancy stage embeds its details
    r = plan("+scenario=ragas", "panel_metrics=[all]")
    assert r.judge_kwargs["judges"] == ["ragas_answer_relevancy"]
    assert r.panel_kwargs[0]["judges"] == ["ragas_faithfulness", "ragas_context_precision", "ragas_context_recall"]
    assert stages(r)["relevancy"].needs <= stages(r)["judge"].produces


def test_the_default_panel_is_rb_llm_alone_and_taxonomy_members_get_their_top_k():
    p = plan("+scenario=mtrag")
    assert [k["judges"] for k in p.panel_kwargs] == [["radbench"], ["radbench"]]
    assert p.judge_kwargs["judges"] == ["idk", "ragas_faithfulness"]
    assert stages(p)["derive"].kwargs["panel"] == {"RB_llm": list(PAIR)}
    assert all("options" not in k for k in p.panel_kwargs)
    t = plan("+scenario=taxonomy", "panel_metrics=[all]", "taxonomy.k=3")
    assert all(k["options"] == {"taxonomy_retrieval": {"k": 3}, "taxonomy_grounding": {"k": 3}} for k in t.panel_kwargs)
    assert "options" not in t.judge_kwargs


def test_names_resolve_through_the_catalog():
    metrics = ["Recall", "idk_eval", "RL_F", "RB_llm", "answer_relevancy"]
    assert panel_metrics(["faithfulness", "ALL", "idk_eval"], metrics) == ["RL_F", "idk_eval", "RB_llm"]
    assert panel_metrics(["citation_f1_score"], metrics) == []  # judged, but not in this run
    assert panel_judges(["RB_llm", "faithfulness"], metrics) == ["ragas_faithfulness", "radbench"]  # run order


@pytest.mark.parametrize("names, message", [
    (["nope"], "panel_metrics: unknown metric 'nope'"),
    (["RougeL"], "panel_metrics: 'RougeL' is not a judged metric; a panel scores judged metrics (this run's: "
                 "idk_eval, RL_F, RB_llm) or all"),
    (["response_relevancy"], "panel_metrics: 'response_relevancy' cannot go on a judge panel"),
    (["umbrela_scores"], "judge_panel is set but this run computes none of panel_metrics (umbrela_scores)"),
])
def test_refused_names_are_one_line_errors(names, message):
    settings = JudgeSettings(judge={}, panel=({"name": "a"},), panel_metrics=tuple(names))
    with pytest.raises(UserError) as e:
        plan_judges(settings, ["Recall", "idk_eval", "RL_F", "RB_llm", "answer_relevancy"], {})
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_a_run_without_a_panel_plans_no_verdict():
    p = plan_run(compose(["+scenario=trec"]))
    st = graph.build_stages(p)
    assert p.panel_kwargs == () and [s.kwargs.get("tag") for s in st if s.name == "judge"] == [None]
    (d,) = [s for s in st if s.name == "derive"]
    assert d.kwargs["panel"] == {} and d.needs == {"umbrela_scores"}


# -- the catalog fact --------------------------------------------------------------------------------


def test_every_judged_metric_has_a_jury_and_its_level():
    expected = {"RB_llm": "median", "factual_consistency_judge": "median", "umbrela_scores": "median",
                "nuggets_count": "median", "idk_eval": "majority", "answered": "majority",
                "underspecified_eval": "majority", "SufficiencyHit@K": "majority", "GroundingPresenceRate": "majority",
                "RL_F": "mean", "nuggets_vital": "mean", "citation_f1": "mean", "umbrela_mean": "mean",
                "TopicalPrecision@K": "mean", "context_recall": "mean"}
    assert {m: lookup(m).jury for m in expected} == expected
    assert all(lookup(m).jury in JURY_LEVELS for m in JUDGED)
    assert [jury_level(m) for m in ("idk_eval", "RB_llm", "umbrela_scores", "RL_F")] == [
        "nominal", "ordinal", "ordinal", "interval"]
    assert jury_level("RB_llm@smollm2-a") == "ordinal" and jury_level("MRR@K@a") == "interval"
    assert jury_level("not_a_metric") == "interval"
    assert MetricSpec("f", "judge", "x", dtype="bool").jury == "majority"
    assert MetricSpec("g", "judge", "x", dtype="int").jury == "median"
    with pytest.raises(ValueError, match="jury 'mean' is not majority, median or mean \\(a mean of a float\\)"):
        MetricSpec("h", "judge", "x", dtype="int", jury="mean")
    with pytest.raises(ValueError, match="jury 'mode'"):
        MetricSpec("h", "judge", "x", jury="mode")


def test_the_verdict_per_shape():
    # median of a rating (MT-RAG's list shape): the mean of the two middle values, nulls left out
    assert jury_verdict("RB_llm", [[0.6], [0.8]]) == ([pytest.approx(0.7)], 0)
    assert jury_verdict("RB_llm", [[0.2], None, [0.9], [None], [0.5]]) == ([0.5], 0)
    assert jury_verdict("RB_llm", [None, [None], []]) == (None, 0)  # nobody scored: null, not [null]
    # mean of a share; a scalar metric
    assert jury_verdict("RL_F", [[0.5], [1.0], [0.0]]) == ([0.5], 0)
    assert jury_verdict("citation_f1", [0.25, None, 0.75]) == (0.5, 0)
    assert jury_verdict("citation_f1", [None, None]) == (None, 0)
    # majority of a flag / label; a tie has no verdict
    assert jury_verdict("idk_eval", [[1.0], [1.0], [0.5]]) == ([1.0], 0)
    assert jury_verdict("idk_eval", [[1.0], [0.0]]) == (None, 1)
    assert jury_verdict("idk_eval", [[1.0], [0.0], None]) == (None, 1)
    assert jury_verdict("answered", [1.0, 0.0, 0.0]) == (0.0, 0)
    assert jury_verdict("answered", [1.0, None]) == (1.0, 0)
    # an integer metric's median stays an integer: the lower middle value
    assert jury_verdict("nuggets_count", [3, 4]) == (3, 0)
    # a per-passage vector: passage by passage, a passage nobody graded stays null
    assert jury_verdict("umbrela_scores", [[3, 1, None, 0], [2, 2, None, None], [3, 0, None, 2]]) == ([3, 1, None, 0], 0)
    assert jury_verdict("umbrela_scores", [[3, 2], None]) == ([3, 2], 0)
    assert jury_verdict("umbrela_scores", [[2, 3]] * 2 + [[0, 0]] * 2) == ([0, 0], 0)  # lower middle: never rounded up
    with pytest.raises(ValueError, match="umbrela_scores values differ in length"):
        jury_verdict("umbrela_scores", [[3, 2], [1]])


# -- derive reads the jury ---------------------------------------------------------------------------


def run(rows: list[dict], metrics: list[str], panel: dict) -> list[dict]:
    return rows_of(derive(table(rows, metrics + list(panel)), metrics=metrics, panel=panel))


def test_idk_conditioning_reads_the_jurys_values():
    panel = {"idk_eval": ["a", "b", "c"], "RB_llm": ["a", "b", "c"]}
    m = {"idk_eval@a": [1.0], "idk_eval@b": [1.0], "idk_eval@c": [0.0],
         "RB_llm@a": [0.4], "RB_llm@b": [0.8], "RB_llm@c": None}
    answerable, unanswerable = (worker_row(answerability=a, metrics=dict(m)) for a in ("ANSWERABLE", "UNANSWERABLE"))
    out = run([answerable, unanswerable], ["idk_eval", "RB_llm", "RB_llm_idk"], panel)
    assert [r["metrics"]["idk_eval"] for r in out] == [[1.0], [1.0]]
    assert out[0]["metrics"]["RB_llm"] == [pytest.approx(0.6)]
    assert [r["metrics"]["RB_llm_idk"] for r in out] == [[0.0], [1.0]]  # a full IDK by the majority
    assert out[0]["metrics"]["idk_eval@c"] == [0.0] and out[0]["judge_errors"] == []  # the members' values stay


def test_a_split_majority_is_null_with_its_reason():
    panel = {"idk_eval": ["a", "b"], "RB_llm": ["a", "b"]}
    r = worker_row(answerability="ANSWERABLE",
                   metrics={"idk_eval@a": [1.0], "idk_eval@b": [0.0], "RB_llm@a": [0.5], "RB_llm@b": [0.5]})
    (out,) = run([r], ["idk_eval", "RB_llm", "RB_llm_idk"], panel)
    assert out["metrics"]["idk_eval"] is None and out["metrics"]["RB_llm_idk"] is None and out["error"] is None
    assert [json.loads(e) for e in out["judge_errors"]] == [
        {"judge": "idk", "stage": "derive", "undefined": True, "reason": "judge panel split on idk_eval: no majority"}]


def test_retrieval_scores_read_the_jurys_grades():
    panel = {"umbrela_scores": ["a", "b", "c"], "umbrela_mean": ["a", "b", "c"]}
    r = worker_row(metrics={"umbrela_scores@a": [0, 3, 2], "umbrela_scores@b": [1, 3, 1], "umbrela_scores@c": [0, 2, None],
                            "umbrela_mean@a": 5 / 3, "umbrela_mean@b": 5 / 3, "umbrela_mean@c": 1.0})
    (out,) = run([r], ["umbrela_scores", "umbrela_mean", "P@1", "P@2", "MRR"], panel)
    m = out["metrics"]
    assert m["umbrela_scores"] == [0, 3, 1]  # per passage: median, the lower middle of an even count
    assert m["umbrela_mean"] == pytest.approx(13 / 9)
    assert (m["P@1"], m["P@2"], m["MRR"]) == (0.0, 0.5, 0.5)  # relevant (grade >= 2): the second passage only


def test_derived_metrics_read_a_panel_judges_details_from_its_first_member():
    """The reference protocol's IDK label "unknown" (idk_eval null) keeps the raw metric: read from
    the first member that left details, the record's own details unchanged."""
    unknown = json.dumps({"label": "unknown"})
    panel = {"idk_eval": ["a", "b"]}
    r = worker_row(answerability="UNANSWERABLE", details={"idk@b": unknown},
                   metrics={"idk_eval@a": None, "idk_eval@b": None, "RB_llm": [0.7]})
    (out,) = run([r], ["idk_eval", "RB_llm", "RB_llm_idk"], panel)
    assert out["metrics"]["idk_eval"] is None and out["metrics"]["RB_llm_idk"] == [0.7]
    assert out["details"] == {"idk@b": unknown}
    assert panel_details({"idk@a": "1", "idk@b": "2"}, {"idk": ["a", "b"]})["idk"] == "1"
    assert panel_details({"idk": "0", "idk@a": "1"}, {"idk": ["a"]})["idk"] == "0"
    assert panel_details(None, {"idk": ["a"]}) is None


# -- a member's judges read its own values -------------------------------------------------------------


def test_a_members_nuggets_read_its_own_umbrela_grades(monkeypatch, tmp_path):
    import ragscale.actors.judge as judge_mod
    from test_judge_streaming import FakeEngine, trec_respond, trec_rows

    monkeypatch.setattr(judge_mod, "build", lambda kwargs: FakeEngine(trec_respond))
    main = judge_mod.JudgeActor({}, ["umbrela", "nuggets"], str(tmp_path / "main.sqlite"), streaming=False)
    member = judge_mod.JudgeActor({}, ["umbrela", "nuggets"], str(tmp_path / "a.sqlite"), tag="a", streaming=False)
    plain, tagged = trec_rows(), trec_rows()
    main.process(plain)
    member.process(tagged)
    for p, t in zip(plain, tagged):
        assert not any(k in t["metrics"] for k in ("umbrela_scores", "nuggets_count"))  # nothing untagged
        for name in ("umbrela_scores", "nuggets_count", "nuggets_vital"):
            assert t["metrics"][f"{name}@a"] == p["metrics"][name], name
    assert tagged[0]["metrics"]["nuggets_count@a"] == 2 and "nuggets@a" in tagged[0]["details"]
    row = copy.deepcopy(tagged[0])
    assert main.own_view(row) is row and member.own_view(row)["metrics"]["umbrela_scores"] == row["metrics"]["umbrela_scores@a"]


@pytest.mark.parametrize("name", ["gpt-4o@azure", "@", "a@"])
def test_a_judge_name_with_the_column_separator_is_refused(name):
    """``<metric>@<judge>`` is read back at its last ``@`` (a metric's name may hold one: P@5), so a judge
    named ``gpt-4o@azure`` would score a metric ``RB_llm@gpt-4o``: refused when the run is planned."""
    settings = JudgeSettings(judge={}, panel=({"name": "a"}, {"name": name}), panel_metrics=("RB_llm",))
    with pytest.raises(UserError) as e:
        plan_judges(settings, ["RB_llm"], {})
    assert str(e.value) == (f"judge_panel: a judge name may not contain '@' (it separates metric and judge in the "
                            f"<metric>@<judge> columns), got {name!r}")


@pytest.mark.parametrize("names, metrics, message", [
    (["nope"], None, "panel_metrics: unknown metric 'nope'; `ragscale metrics` lists every metric with its aliases"),
    (["faithfulness", "nope"], None, "panel_metrics: unknown metric 'nope'; `ragscale metrics` lists every metric "
                                     "with its aliases"),
    (["RougeL"], None, "panel_metrics: 'RougeL' is not a judged metric; a panel scores judged metrics (this run's: "
                       "idk_eval, RL_F, RB_llm) or all"),
    (["RougeL"], ["Recall"], "panel_metrics: 'RougeL' is not a judged metric; a panel scores judged metrics (this "
                             "run's: none) or all"),
    (["response_relevancy"], None, "panel_metrics: 'response_relevancy' cannot go on a judge panel: the relevancy "
                                   "stage computes it from embeddings of its judge's generated questions, not from a "
                                   "judge's score"),
    (["umbrela_scores"], None, "judge_panel is set but this run computes none of panel_metrics (umbrela_scores); its "
                               "judged metrics: idk_eval, RL_F, RB_llm, answer_relevancy (or panel_metrics=[all])"),
    (["umbrela_scores", "RB_llm"], ["Recall", "RL_F"], "judge_panel is set but this run computes none of "
                                                       "panel_metrics (umbrela_scores, RB_llm); its judged metrics: "
                                                       "RL_F (or panel_metrics=[all])"),
    (["RB_llm"], ["Recall"], "judge_panel is set but this run computes none of panel_metrics (RB_llm); its judged "
                             "metrics: none (or panel_metrics=[all])"),
])
def test_a_panel_that_cannot_be_planned_says_why_in_full(names, metrics, message):
    settings = JudgeSettings(judge={}, panel=({"name": "a"},), panel_metrics=tuple(names))
    with pytest.raises(UserError) as e:
        plan_judges(settings, metrics or ["Recall", "idk_eval", "RL_F", "RB_llm", "answer_relevancy"], {})
    assert str(e.value) == message
