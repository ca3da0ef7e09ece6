"""``plan_run`` is the only reader of the raw config (issue 34): the driver, run.json's provenance
and the judges' plan take the frozen plan (its ``RunOptions``, its redacted config snapshot) or a
typed ``JudgeSettings``, never the Hydra config. Checked on the source and on what the plan holds."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os

import pytest
from omegaconf import OmegaConf

from ragscale import driver, provenance
from ragscale.actors.judge_plan import plan_judges
from ragscale.config import JudgeSettings, RunOptions, TrackingSettings
from ragscale.overrides import compose
from ragscale.plan import judge_settings, plan_run

PKG = os.path.dirname(os.path.abspath(driver.__file__))


def _tree(module) -> ast.Module:
    return ast.parse(inspect.getsource(module))


def _functions(tree: ast.AST) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_the_driver_reads_the_config_only_to_plan_it():
    """Only ``execute`` takes a cfg, and its one use is ``plan_run(cfg)``; every other function
    of the driver takes the plan."""
    tree = _tree(driver)
    takes_cfg = [f.name for f in _functions(tree) if any(a.arg == "cfg" for a in f.args.args + f.args.kwonlyargs)]
    assert takes_cfg == ["execute"]
    execute = next(f for f in _functions(tree) if f.name == "execute")
    uses = [n for n in ast.walk(execute) if isinstance(n, ast.Name) and n.id == "cfg"]
    assert len(uses) == 1
    calls = [n for n in ast.walk(execute) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id == "plan_run"]
    assert len(calls) == 1 and isinstance(calls[0].args[0], ast.Name) and calls[0].args[0].id == "cfg"
    assert "omegaconf" not in inspect.getsource(driver).lower()
    assert list(inspect.signature(driver.scan_records).parameters) == ["plan", "out_dir"]
    assert list(inspect.signature(driver.execute_plan).parameters)[0] == "plan"


def test_provenance_builds_run_json_from_the_plan_alone():
    tree = _tree(provenance)
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "cfg"]
    assert not [f.name for f in _functions(tree) if any(a.arg == "cfg" for a in f.args.args + f.args.kwonlyargs)]
    assert "omegaconf" not in inspect.getsource(provenance).lower()
    assert list(inspect.signature(provenance.run_info).parameters)[0] == "plan"


def test_plan_judges_takes_typed_judge_settings():
    params = inspect.signature(plan_judges).parameters
    assert list(params)[0] == "settings" and "cfg" not in params
    src = inspect.getsource(plan_judges)
    assert "OmegaConf" not in src and "cfg" not in src


def test_the_plan_carries_the_run_options_frozen():
    cfg = compose(["+scenario=custom", "limit=3", "resume=false", "overwrite=true", "progress=off",
                   "progress_interval_s=2.5", "ray_progress_bars=true", "verbose=true", "print_summary=false",
                   "output_dir=/tmp/ragscale-boundary", "tracking.experiment=exp"])
    plan = plan_run(cfg)
    assert plan.options == RunOptions(output_dir="/tmp/ragscale-boundary", limit=3, resume=False, overwrite=True,
                                      progress="off", progress_interval_s=2.5, ray_progress_bars=True, verbose=True,
                                      print_summary=False,
                                      tracking=TrackingSettings(name="none", uri=None, experiment="exp", run_name=None))
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.options.limit = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.options.tracking.name = "mlflow"
    assert plan.config == provenance.redact(OmegaConf.to_container(cfg, resolve=True))
    default = plan_run(compose(["+scenario=custom"])).options
    assert (default.limit, default.resume, default.overwrite, default.progress, default.print_summary) == \
        (None, True, False, "auto", True)


def test_judge_settings_are_the_judge_blocks_of_the_config():
    cfg = compose(["+scenario=mtrag", "taxonomy.k=2", "overwrite=true"])
    s = judge_settings(cfg)
    assert isinstance(s, JudgeSettings)
    assert s.judge == OmegaConf.to_container(cfg.judge, resolve=True)
    assert s.panel == () and s.panel_metrics == tuple(cfg.panel_metrics)
    assert s.taxonomy_k == 2 and s.overwrite is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.overwrite = False
    plan = plan_run(cfg)
    judges = plan_judges(s, plan.metrics, plan.cluster)
    assert judges["judge_kwargs"] == plan.judge_kwargs and judges["panel_kwargs"] == plan.panel_kwargs
