"""The stages' CPU requests fitted to the Ray instance (ragscale/pipeline/resources.py): a judge
panel asks 2 cores for 3 CPUs (two judge actors and the read task), and without the fit the
read task is never placed and the run never starts (docs/clusters.md, "CPU requests")."""

from __future__ import annotations

import pytest

from ragscale.errors import UserError
from ragscale.overrides import compose
from ragscale.pipeline.dataset import actor_pool
from ragscale.pipeline.resources import Demand, Fit, demand, fit, scaled
from ragscale.plan import plan_run


def test_a_trec_jury_asks_for_two_actors_and_a_task_slot():
    # HHEM's weights are absent here: its stage is a CPU task that writes the null hhem
    plan = plan_run(compose(["+scenario=trec", "+judge_panel=local-pair", "panel_metrics=[all]",
                             "hallucination.model=/nonexistent"]))
    need = demand(plan)
    assert [p[0] for p in need.pools] == ["judge@smollm2-a", "judge@smollm2-b"]
    assert need.cpus == 3.0 and need.gpus == 0.0 and need.task_cpus == 1.0


def test_pool_sizes_and_gpus_count():
    plan = plan_run(compose(["+scenario=mtrag", "cluster.judge.size=3", "cluster.encoder.num_cpus=2",
                             "cluster.judge.num_gpus=0.5"]))
    need = demand(plan)
    assert dict((p[0], p[1:]) for p in need.pools) == {"encoder": (2.0, 0.0), "judge": (3.0, 1.5)}
    assert need.cpus == 6.0 and need.gpus == 1.5


def test_requests_that_fit_are_kept():
    need = Demand((("encoder", 1.0, 0.0),), 1.0)
    assert fit(need, {"CPU": 2.0}, local=True) == fit(need, {"CPU": 8.0}, local=False)
    assert fit(need, {"CPU": 2.0}, local=True).cpu_scale == 1.0 and fit(need, {"CPU": 2.0}, local=True).notice is None


def test_too_many_cpus_are_scaled_to_fit_and_said():
    need = Demand((("nli", 1.0, 0.0), ("judge@a", 1.0, 0.0), ("judge@b", 1.0, 0.0)), 1.0)
    got = fit(need, {"CPU": 2.0}, local=True)
    assert got.cpu_scale == 0.5
    assert got.notice.startswith("the stages ask for 4 CPUs (nli 1, judge@a 1, judge@b 1, and 1 for a task) "
                                 "and Ray has 2: every stage's CPU request is scaled by 0.5")
    # every scaled request together fits, at Ray's resolution
    assert sum(scaled(c, got.cpu_scale) for c in (1.0, 1.0, 1.0, 1.0)) <= 2.0
    assert scaled(0.1, 1 / 3) == pytest.approx(0.0333) and scaled(1e-5, 0.5) == 1e-4 and scaled(3.0, 1.0) == 3.0


def test_fit_cpus_false_keeps_the_requests_with_a_warning():
    need = Demand((("encoder", 4.0, 0.0),), 1.0)
    got = fit(need, {"CPU": 2.0}, local=False, fit_cpus=False)
    assert got.cpu_scale == 1.0 and got.notice.startswith("warning: the stages ask for 5 CPUs")
    assert "cluster.fit_cpus=false" in got.notice
    # a cluster whose nodes have no CPUs yet (an autoscaler's head): nothing to fit to
    assert fit(need, {}, local=False) == fit(need, {"CPU": 0.0}, local=False) == type(got)()


def test_missing_gpus_refuse_a_local_run_and_warn_a_connected_one():
    need = Demand((("judge", 1.0, 2.0), ("encoder", 1.0, 0.0)), 1.0)
    with pytest.raises(UserError, match=r"the actor pools ask for 2 GPU\(s\) \(judge 2\) and Ray has 0: set the pools' num_gpus"):
        fit(need, {"CPU": 16.0}, local=True)
    got = fit(need, {"CPU": 16.0, "GPU": 1.0}, local=False)
    assert got.cpu_scale == 1.0 and got.notice.startswith("warning: the actor pools ask for 2 GPU(s)")
    assert fit(need, {"CPU": 16.0, "GPU": 2.0}, local=True).notice is None


def test_actor_pools_take_the_scale():
    pool = {"size": 2, "num_cpus": 1.0, "num_gpus": 0.0}
    assert actor_pool(pool, 16)["num_cpus"] == 1.0
    assert actor_pool(pool, 16, cpu_scale=0.25)["num_cpus"] == 0.25


def test_a_pool_without_settings_asks_for_one_actor_of_one_cpu_and_no_gpu(monkeypatch):
    from ragscale.pipeline import graph
    from ragscale.stage_kinds import Stage

    stages = [Stage("encoder", object, pool={}), Stage("judge", object, pool={"size": 3, "num_cpus": 0.5}, kwargs={"tag": "a"}),
              Stage("derive", object, pool=None, num_cpus=0.25)]
    monkeypatch.setattr(graph, "build_stages", lambda plan: stages)
    need = demand(type("Plan", (), {"cluster": {}})())
    assert need.pools == (("encoder", 1.0, 0.0), ("judge@a", 1.5, 0.0)) and need.task_cpus == 1.0
    need = demand(type("Plan", (), {"cluster": {"lexical_num_cpus": 0.2}})())
    assert need.task_cpus == 0.25  # the largest task: derive's


def test_one_cpu_is_fitted_to_and_both_shortfalls_are_said():
    need = Demand((("judge", 1.0, 1.0),), 1.0)
    assert fit(need, {"CPU": 1.0, "GPU": 1.0}, local=True).cpu_scale == 0.5
    both = fit(need, {"CPU": 1.0}, local=False).notice
    assert both == ("warning: the actor pools ask for 1 GPU(s) (judge 1) and Ray has 0: the run waits until the cluster "
                    "has them; the stages ask for 2 CPUs (judge 1, and 1 for a task) and Ray has 1: every stage's CPU "
                    "request is scaled by 0.5 so that all of them run at once (they share the cores; "
                    "cluster.fit_cpus=false keeps the requests)")
    kept = fit(need, {"CPU": 1.0}, local=False, fit_cpus=False).notice
    assert kept.startswith("warning: the actor pools ask for 1 GPU(s)") and kept.endswith(
        "; warning: the stages ask for 2 CPUs (judge 1, and 1 for a task) and Ray has 1: the run waits until the "
        "cluster has them (cluster.fit_cpus=false)")
    with pytest.raises(UserError) as e:
        fit(need, {"CPU": 4.0}, local=True)
    assert str(e.value) == ("the actor pools ask for 1 GPU(s) (judge 1) and Ray has 0: set the pools' num_gpus to 0 "
                            "(cluster=local runs on CPUs), or run on a machine with the GPUs")


def test_a_scale_of_one_or_more_keeps_a_request_as_it_is():
    assert scaled(1 / 3, 1.0) == 1 / 3 and scaled(1 / 3, 1.5) == 1 / 3 and scaled(1 / 3, 0.999) == pytest.approx(0.3329)


def test_requests_within_rays_resolution_of_what_it_has_fit():
    assert fit(Demand((("judge", 1.0, 1.0001),), 1.0), {"CPU": 2.0, "GPU": 1.0}, local=True) == Fit()
    assert fit(Demand((("judge", 0.5, 0.0),), 0.5001), {"CPU": 1.0}, local=True) == Fit()  # 1.0001 CPUs of 1
