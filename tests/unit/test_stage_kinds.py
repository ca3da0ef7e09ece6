"""Stage kinds register their builders next to their workers; the graph runs them in order with no
branch per kind (ragscale.stage_kinds, ragscale.pipeline.graph)."""

from __future__ import annotations

import ast
import inspect
from dataclasses import replace

import pytest

import ragscale.stage_kinds as stage_kinds
from ragscale.errors import UserError
from ragscale.pipeline import graph
from ragscale.plan import compose, plan_run
from ragscale.stage_kinds import Stage, stage_kind


def test_the_bundled_kinds_run_in_their_declared_order_each_next_to_its_worker():
    kinds = {k.name: k for k in stage_kinds.stage_kinds()}
    assert [k.name for k in stage_kinds.stage_kinds()] == ["encoder", "hhem_unavailable", "nli", "judge", "relevancy",
                                                           "derive"]
    where = {name: k.build.__module__ for name, k in kinds.items()}
    assert where == {"encoder": "ragscale.actors.encoder", "relevancy": "ragscale.actors.encoder",
                     "nli": "ragscale.actors.nli", "judge": "ragscale.actors.judge_plan",
                     "hhem_unavailable": "ragscale.pipeline.cpu_stages", "derive": "ragscale.pipeline.cpu_stages"}


def test_graph_has_no_branch_per_kind():
    """build_stages is a loop over the registered kinds: no ``if`` naming a stage, no worker imported."""
    tree = ast.parse(inspect.getsource(graph.build_stages))
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.If)]
    source = inspect.getsource(graph)
    for worker in ("EncoderActor", "RelevancyActor", "NLIActor", "JudgeActor", "null_metric", "derive,"):
        assert worker not in source


def test_a_new_kind_joins_the_graph_with_no_file_of_the_pipeline_touched(monkeypatch):
    plan = plan_run(compose(["+scenario=mtrag", "metrics.idk=[]", "metrics.ragas=[]", "metrics.radbench=[]",
                             "metrics.idk_condition=[]", "metrics.hmean=[]"]))
    monkeypatch.setattr(stage_kinds, "_KINDS", dict(stage_kinds._KINDS))

    @stage_kind("shout", order=35)
    def shout(p):
        return [Stage("shout", object, {"n": len(p.metrics)}, produces=frozenset({"RB_llm"}), batch_size=None)]

    names = [st.name for st in graph.build_stages(plan)]
    assert names == ["encoder", "shout", "derive"]
    assert "RB_llm" in graph.row_metrics(plan)


def test_a_kind_registered_twice_by_two_builders_is_refused(monkeypatch):
    monkeypatch.setattr(stage_kinds, "_KINDS", dict(stage_kinds._KINDS))

    def encoder_stages(plan):  # same name, another module's function
        return []

    with pytest.raises(UserError, match="stage kind 'encoder' is registered twice"):
        stage_kind("encoder", order=10)(encoder_stages)


def test_the_hhem_pool_or_its_null_stage_never_both():
    plan = plan_run(compose(["+scenario=trec"]))
    without = replace(plan, nli_kwargs={}, nli_unavailable="HHEM unavailable: gone")
    (null,) = [st for st in graph.build_stages(without) if st.name == "nli"]
    assert null.pool is None and null.kwargs["reason"] == "HHEM unavailable: gone"
    if plan.nli_kwargs:
        (pool,) = [st for st in graph.build_stages(plan) if st.name == "nli"]
        assert pool.pool is not None and pool.restart_counter == "nli_actor_restarts"


def test_a_judge_pool_may_write_every_metric_of_its_judges():
    plan = plan_run(compose(["+scenario=mtrag", "+judge_panel=local-pair"]))
    judges = [st for st in graph.build_stages(plan) if st.name == "judge"]
    assert len(judges) == len(plan.panel_kwargs) + (1 if plan.judge_kwargs.get("judges") else 0)
    tagged = [st for st in judges if st.kwargs.get("tag")]
    assert tagged and all(all(m.endswith("@" + st.kwargs["tag"]) for m in st.writes) for st in tagged)
    assert set().union(*(st.writes for st in judges)) <= set(graph.row_metrics(plan))


def test_each_stage_produces_and_needs_exactly_its_catalog_metrics():
    """A stage produces the run's metrics the catalog computes in it, and needs what they require
    from earlier stages: nothing more (the graph check would pass over a stage claiming everything)."""
    from ragscale.metrics.registry import lookup

    plan = plan_run(compose(["+scenario=mtrag"]))
    stages = {st.name: st for st in graph.build_stages(plan)}
    of = {s: {m for m in plan.metrics if lookup(m).stage == s} for s in ("encoder", "derive")}
    assert of["encoder"] and stages["encoder"].produces == of["encoder"]
    assert of["derive"] and stages["derive"].produces == of["derive"]
    required = {r for m in of["derive"] for r in lookup(m).requires} - of["derive"]
    assert required and stages["derive"].needs == required


def test_the_kinds_are_listed_by_name_in_order_then_name(monkeypatch):
    monkeypatch.setattr(stage_kinds, "_KINDS", {})

    def build(plan):
        return []

    for name, order in (("late", 50), ("b", 10), ("a", 10)):
        assert stage_kind(name, order=order)(build) is build
    assert [(k.name, k.order, k.build) for k in stage_kinds.stage_kinds()] == [
        ("a", 10, build), ("b", 10, build), ("late", 50, build)]
