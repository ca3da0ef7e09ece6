"""Config -> a frozen run plan: everything checked before Ray starts.

``compose`` builds the Hydra config as the CLI does; ``plan_run`` validates it (steps,
metrics, inputs, expectations, agreement pairs, significance settings) and asks the workers' own modules to plan
their part: the encoder (ragscale.actors.encoder.plan_encoder), HHEM
(ragscale.actors.nli.plan_nli), the judges (ragscale.actors.judge_plan.plan_judges) and answer
relevancy's embeddings endpoint (ragscale.actors.embeddings_http.plan_embeddings; the encoder is
not planned for answer relevancy alone when an endpoint embeds). Every problem is a one-line
UserError.

``plan_run`` is the only reader of the raw config: the plan carries what the driver, run.json and
the tracking read later (``RunOptions``, and the config's snapshot, redacted as it is taken), and the
judges are planned from a typed ``JudgeSettings`` (ragscale.config's frozen views).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from typing import Any

from ragscale.columns import mapped
from ragscale.config import JudgeSettings, RunOptions, TrackingSettings
from ragscale.errors import UserError
from ragscale.extras import check_extras
from ragscale.overrides import CONF_DIR, compose  # noqa: F401 - compose: the CLI's, re-exported for the API and tests

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
SELECTED = "metrics"  # the scenario name of a run that chose its metrics by name and no scenario


@dataclass(frozen=True)
class RunPlan:
    """What a run does, decided once from the config (the driver only executes it)."""

    scenario: str
    steps: tuple[str, ...]
    metrics: tuple[str, ...]
    stages: frozenset[str]
    files: tuple
    encoder_conf: dict
    encoder_kwargs: dict = field(default_factory=dict)  # ragscale.actors.encoder.Encoder arguments
    baseline: dict | None = None
    judge_conf: dict = field(default_factory=dict)
    judge_kwargs: dict = field(default_factory=dict)  # ragscale.actors.judge.JudgeActor arguments
    panel_confs: tuple = ()
    panel_kwargs: tuple = ()  # one JudgeActor's arguments per panel member
    nli_kwargs: dict = field(default_factory=dict)  # ragscale.actors.nli.NLIActor arguments (HHEM found)
    nli_unavailable: str | None = None  # why hhem will be null
    expectations: Any = None  # ragscale.io.expectations.Expectations (custom.expectations)
    relevancy_kwargs: dict = field(default_factory=dict)  # EmbeddingsClient arguments; {}: the encoder embeds
    cluster: dict = field(default_factory=dict)
    consistency: dict = field(default_factory=dict)  # plan_consistency's (step consistency)
    nugget_bank: dict = field(default_factory=dict)  # nuggets.* (ragscale.io.nugget_bank), with the nuggets judge
    reports: Any = None  # ragscale.report.sinks.ReportSettings: what the report pass writes
    hallucination_conf: dict = field(default_factory=dict)  # hallucination.*, resolved (run.json's models)
    options: RunOptions = field(default_factory=RunOptions)  # how the driver runs it (not fingerprinted)
    config: dict = field(default_factory=dict)  # the resolved config, secrets redacted: run.json's ``config``

    @property
    def columns(self) -> dict[str, str]:
        """The user's column names by field (``columns.<field>``; the same for every input file)."""
        return self.files[0].column_map if self.files else {}

    def panel_columns(self) -> list[str]:
        """The per-panel-judge metrics (``<metric>@<judge name>``) reported next to their median."""
        from ragscale.judges import JUDGES

        return [f"{m}@{k['tag']}" for k in self.panel_kwargs for j in k["judges"] for m in JUDGES[j].metrics]

    def fingerprint(self) -> dict:
        """What must not change between a run and its resumption in the same output_dir."""
        enc = {k: self.encoder_conf[k] for k in ("name", "model", "num_layers", "rescale_with_baseline", "baseline", "max_length")}
        if self.encoder_conf.get("dtype", "fp32") != "fp32":  # absent at fp32: old fingerprints hold
            enc["dtype"] = self.encoder_conf["dtype"]
        judge = {k: self.judge_conf.get(k) for k in ("engine", "model", "seed")} if "judge" in self.stages else None
        if judge is not None and self.judge_conf.get("protocol", "constrained") != "constrained":
            judge["protocol"] = self.judge_conf["protocol"]  # likewise absent for the default
        out = {"scenario": self.scenario, "steps": list(self.steps), "metrics": list(self.metrics), "encoder": enc,
               "judge": judge, "inputs": [f.path for f in self.files]}
        if self.expectations is not None:
            out["expectations_sha256"] = self.expectations.sha256
        if self.judge_kwargs.get("options"):
            out["judge_options"] = self.judge_kwargs["options"]
        from ragscale.metrics.registry import embedded

        if self.relevancy_kwargs and embedded(self.metrics):  # absent offline: old fingerprints hold
            out["relevancy_embeddings"] = {k: self.relevancy_kwargs[k] for k in ("model", "base_url")}
        nb = self.nugget_bank
        if nb and (nb.get("bank") != "auto" or nb.get("bank_file")):  # absent by default: old fingerprints hold
            out["nuggets"] = {"bank": nb.get("bank"), "bank_file": nb.get("bank_file")}
        from ragscale.io.qrels import qrels_sha256, run_qrels

        q = run_qrels(self.reports)
        if q:  # the records' own figures (details.qrels) are the qrels': absent without them, old fingerprints hold
            out["qrels"] = {"sha256": qrels_sha256(q["file"]), "k": list(q["k"]), "measures": list(q["measures"]),
                            "keep_identical_ids": bool(q.get("keep_identical_ids"))}
        if self.panel_kwargs:
            out["judge_panel"] = [{k: c.get(k) for k in ("name", "engine", "model", "seed")}
                                  | ({"protocol": c["protocol"]} if c.get("protocol", "constrained") != "constrained" else {})
                                  for c in self.panel_confs]
        return out


def _metrics(cfg: Any) -> tuple[list[str], list[str]]:
    """(steps, metrics) enabled by the config, checked against the metric catalog."""
    from ragscale.metrics.registry import expand_k, resolve_metrics, select, validate_steps

    if cfg.select:  # metrics by name: the steps they belong to, and what they are computed from
        steps, names = select(list(cfg.select))
    elif not cfg.scenario_name:
        raise UserError("nothing to compute: choose metrics (metrics=[faithfulness,RougeL]; `ragscale metrics` lists "
                        "them) or a scenario (+scenario=mtrag; `ragscale scenarios` lists them)")
    else:
        steps = validate_steps(list(cfg.steps))
        names = [m for step in steps for m in cfg.metrics[step]]
    names = expand_k(names, list(cfg.trec.k_values))
    if "hallucination" in steps and cfg.hallucination.judge_fallback and "factual_consistency_judge" not in names:
        names.insert(names.index("hhem") + 1 if "hhem" in names else len(names), "factual_consistency_judge")
    metrics = resolve_metrics(names, steps)
    if not metrics and "consistency" not in steps and not cfg.qrels.file:  # qrels alone: retrieval against them
        raise UserError("no metrics enabled for the chosen steps")
    return steps, metrics


def run_options(cfg: Any) -> RunOptions:
    """The run keys of a config (output_dir, limit, resume, progress, tracking, ...), checked and frozen."""
    if cfg.limit is not None and cfg.limit < 0:
        raise UserError(f"limit must be >= 0, got {cfg.limit}")
    from ragscale.pipeline.progress import MODES

    if cfg.progress not in MODES:
        raise UserError(f"progress must be one of {', '.join(MODES)}, got {cfg.progress!r}")
    t = cfg.tracking
    return RunOptions(output_dir=cfg.output_dir, limit=cfg.limit, resume=bool(cfg.resume), overwrite=bool(cfg.overwrite),
                      progress=cfg.progress, progress_interval_s=cfg.progress_interval_s,
                      ray_progress_bars=bool(cfg.ray_progress_bars), verbose=bool(cfg.verbose),
                      print_summary=bool(cfg.print_summary),
                      tracking=TrackingSettings(name=t.name, uri=t.uri, experiment=t.experiment, run_name=t.run_name))


def judge_settings(cfg: Any) -> JudgeSettings:
    """What the judges' plan (ragscale.actors.judge_plan.plan_judges) reads of a config, as plain values."""
    from omegaconf import OmegaConf

    return JudgeSettings(judge=OmegaConf.to_container(cfg.judge, resolve=True),
                         panel=tuple(OmegaConf.to_container(cfg.judge_panel, resolve=True) or ()),
                         panel_metrics=tuple(cfg.panel_metrics), taxonomy_k=cfg.taxonomy.k,
                         overwrite=bool(cfg.overwrite))


def config_snapshot(cfg: Any) -> dict:
    """The resolved config as run.json and the tracking record it, redacted as it is taken
    (ragscale.provenance.redact): no secret that reached the config enters the plan's copy."""
    from omegaconf import OmegaConf

    from ragscale.provenance import redact

    return redact(OmegaConf.to_container(cfg, resolve=True))


def _inputs(cfg: Any) -> list:
    """The input files: ``input`` (a file, glob, directory or list), else the scenario's bundled sample."""
    from omegaconf import OmegaConf

    from ragscale.io.inputs import resolve_inputs

    spec = cfg.input
    if spec is None:
        if not cfg.sample:
            raise UserError("no input: set input=PATH (a file, a glob, a directory or a list)")
        spec = os.path.join(DATA_DIR, cfg.sample)
    elif not isinstance(spec, (str, int, float)):
        spec = list(OmegaConf.to_container(spec))
    return resolve_inputs(spec, mapped(OmegaConf.to_container(cfg.columns)))


def _expectations(cfg: Any, metrics: list[str]) -> Any:
    """The custom fact checks (custom.expectations; a bare name is looked up in ragscale/data)."""
    fact_metrics = [m for m in metrics if m in ("fact_score", "rules_coverage", "is_correct")]
    if cfg.custom.expectations:
        from ragscale.io.expectations import load_expectations

        path = cfg.custom.expectations
        if not os.path.isabs(path) and not os.path.exists(path) and os.path.exists(os.path.join(DATA_DIR, path)):
            path = os.path.join(DATA_DIR, path)
        return load_expectations(path)
    if fact_metrics:
        raise UserError(f"{', '.join(fact_metrics)} need custom.expectations=FILE.yaml (per-question fact checks; "
                        "see docs/metrics.md), or leave them out of metrics.custom")
    return None


def plan_nugget_bank(conf: dict) -> dict:
    """``nuggets.*`` checked: the bank mode, the window, and a readable ``bank_file``."""
    from ragscale.io.nugget_bank import MODES, read

    if conf.get("bank") not in MODES:
        raise UserError(f"nuggets.bank must be one of {', '.join(MODES)}, got {conf.get('bank')!r}")
    w = conf.get("window")
    if isinstance(w, bool) or not isinstance(w, int) or w < 1:
        raise UserError(f"nuggets.window must be a positive integer, got {w!r}")
    if conf.get("bank_file"):
        conf["bank_file"] = os.path.abspath(str(conf["bank_file"]))
        read(conf["bank_file"])  # a one-line error now, not after Ray started
        if conf["bank"] == "per_record":
            raise UserError("nuggets.bank_file needs nuggets.bank=per_query or auto (per_record builds no bank)")
    return conf


def _consistency_encoder(spec: str, run_encoder: dict) -> dict:
    """The encoder config that ``consistency.encoder`` names: ragscale/conf/encoder/SPEC.yaml,
    else a local model folder or a model id in the local Hugging Face cache, taken whole (its
    last layer, as torchmetrics' BERTScore in open-rag-eval) and unrescaled; never downloaded."""
    from omegaconf import OmegaConf

    from ragscale.config import EncoderConf
    from ragscale.weights import resolve_model_path

    enc_dir = os.path.join(CONF_DIR, "encoder")
    if os.path.isfile(os.path.join(enc_dir, f"{spec}.yaml")):
        conf = OmegaConf.merge(OmegaConf.structured(EncoderConf), OmegaConf.load(os.path.join(enc_dir, f"{spec}.yaml")))
        conf = OmegaConf.to_container(conf, resolve=True)
        try:
            resolve_model_path(conf["model"])
        except UserError:
            raise UserError(f"consistency.encoder={spec}: the weights of {conf['model']!r} are not available locally "
                            "(models are never downloaded): put them in the local Hugging Face cache, or set "
                            "consistency.encoder to a local model folder") from None
        return conf
    try:
        path = resolve_model_path(spec, "consistency.encoder")
    except UserError:
        names = sorted(f[:-5] for f in os.listdir(enc_dir) if f.endswith(".yaml"))
        raise UserError(f"consistency.encoder={spec!r} is neither an encoder config ({', '.join(names)}) nor a "
                        "local model folder or a model in the local Hugging Face cache (models are never "
                        "downloaded)") from None
    try:
        with open(os.path.join(path, "config.json")) as fh:
            layers = int(json.load(fh)["num_hidden_layers"])
    except (OSError, ValueError, KeyError, TypeError):
        raise UserError(f"consistency.encoder={spec!r}: {path}/config.json names no num_hidden_layers; write an "
                        "encoder config (ragscale/conf/encoder/NAME.yaml) with num_layers instead") from None
    return {**run_encoder, "name": spec, "model": path, "num_layers": layers,
            "rescale_with_baseline": False, "baseline": None, "max_length": None}


def plan_consistency(c: Any, run_encoder: dict, run_plan: dict, cluster: dict) -> dict:
    """consistency.* checked before any work: ``min_runs`` >= 2 and the BERTScore encoder
    (null: the run's, ``run_plan``'s kwargs and baseline), its weights found locally. Returns
    what ragscale.pipeline.consistency.run_consistency reads, ``encoder`` being what summary.json
    records of it."""
    from ragscale.actors.encoder import plan_encoder

    if not isinstance(c.min_runs, int) or c.min_runs < 2:
        raise UserError(f"consistency.min_runs must be an integer >= 2 (a pair of runs), got {c.min_runs!r}")
    if c.encoder:
        conf = _consistency_encoder(str(c.encoder), run_encoder)
        try:
            kwargs, baseline = plan_encoder(conf, cluster)
        except UserError as e:  # a config without its baseline values
            raise UserError(f"consistency.encoder={c.encoder}: {e}") from None
    else:
        conf, kwargs, baseline = run_encoder, run_plan["encoder_kwargs"], run_plan["baseline"]
    encoder = {"name": conf["name"], "model_path": kwargs["model_path"], "num_layers": conf["num_layers"],
               "rescale_with_baseline": baseline is not None, "baseline": baseline}
    return {"min_runs": c.min_runs, "encoder": encoder, "encoder_kwargs": kwargs, "baseline": baseline}


def _plain(node: Any) -> Any:
    """A config block as a plain object (its structured config's dataclass: every block given here
    is typed in ragscale/config.py), not the config's node."""
    from omegaconf import OmegaConf

    return OmegaConf.to_object(node)


def _reports(cfg: Any, metrics: list[str]) -> Any:
    """What the report pass writes (ragscale.report.sinks.ReportSettings), checked before any work:
    significance (its unit of resampling and slices), calibration, agreement, retrieval against qrels."""
    from omegaconf import OmegaConf

    from ragscale.report.sinks import ReportSettings, check_reports
    from ragscale.report.slices import check_slices, cluster_field

    reports = ReportSettings(significance=_plain(cfg.significance), calibration=_plain(cfg.calibration),
                             agreement=_plain(cfg.agreement), export_csv=bool(cfg.trec.export_csv),
                             html_report=bool(cfg.html_report), cluster_by=cluster_field(cfg.cluster_by),
                             slices=check_slices(_plain(cfg.slices)),
                             qrels=_qrels(OmegaConf.to_container(cfg.qrels, resolve=True)))
    check_reports(reports, metrics)
    return reports


def _qrels(conf: dict) -> dict:
    """qrels.*, with the qrels file's path (or each collection's) made absolute; a bare name that is
    no file here is looked up in ragscale/data (a scenario's bundled qrels)."""
    def where(path: str) -> str:
        bundled = os.path.join(DATA_DIR, path)
        return os.path.abspath(bundled if os.sep not in path and not os.path.exists(path) and os.path.exists(bundled)
                               else path)

    f = conf.get("file")
    if isinstance(f, dict):
        conf["file"] = {str(k): where(str(v)) for k, v in f.items()}
    elif f:
        conf["file"] = where(str(f))
    return conf


def plan_run(cfg: Any) -> RunPlan:
    """Check the config, inputs and model paths and decide the run; every problem is a one-line UserError."""
    from omegaconf import OmegaConf

    from ragscale.metrics.registry import embedded, stages_for
    from ragscale.tracking import check_tracking

    steps, metrics = _metrics(cfg)
    options = run_options(cfg)
    check_tracking(options.tracking)
    files = _inputs(cfg)
    from ragscale.io.check import check_fields
    from ragscale.metrics.registry import field_needs, needs_field

    check_fields(files, field_needs(metrics), needs_field(metrics, "answer"))  # answers, what the metrics need
    reports = _reports(cfg, metrics)
    expectations = _expectations(cfg, metrics)
    from ragscale.actors.embeddings_http import plan_embeddings

    relevancy_kwargs = plan_embeddings(OmegaConf.to_container(cfg.relevancy, resolve=True),
                                       used=bool(embedded(metrics)))
    encoder_embeds = bool(embedded(metrics)) and not relevancy_kwargs  # answer relevancy's sentence embeddings
    stages = stages_for(metrics) | {"lexical"}
    check_extras(cfg, steps, metrics, encoder_embeds)  # the extras the run needs are installed (ragscale/extras.py)
    cluster = OmegaConf.to_container(cfg.cluster, resolve=True)
    encoder_conf = OmegaConf.to_container(cfg.encoder, resolve=True)
    plan: dict[str, Any] = {}
    if "encoder" in stages or ("consistency" in steps and not cfg.consistency.encoder) or encoder_embeds:
        from ragscale.actors.encoder import plan_encoder

        plan["encoder_kwargs"], plan["baseline"] = plan_encoder(encoder_conf, cluster)
    if "consistency" in steps:
        plan["consistency"] = plan_consistency(cfg.consistency, encoder_conf, plan, cluster)
    if "nli" in stages:
        from ragscale.actors.nli import plan_nli

        plan["nli_kwargs"], plan["nli_unavailable"] = plan_nli(OmegaConf.to_container(cfg.hallucination), cluster)
    if "judge" in stages:
        from ragscale.actors.judge_plan import plan_judges

        judges = plan_judges(judge_settings(cfg), metrics, cluster)
        if judges.pop("needs_derive"):
            stages.add("derive")  # the panel's median
        plan.update(judges)
    run = RunPlan(
        scenario=cfg.scenario_name or SELECTED, steps=tuple(steps), metrics=tuple(metrics), stages=frozenset(stages),
        files=tuple(files), encoder_conf=encoder_conf, judge_conf=OmegaConf.to_container(cfg.judge, resolve=True),
        expectations=expectations, cluster=cluster, relevancy_kwargs=relevancy_kwargs, reports=reports,
        hallucination_conf=OmegaConf.to_container(cfg.hallucination, resolve=True), options=options,
        config=config_snapshot(cfg), **plan,
    )
    from ragscale.pipeline.graph import build_stages

    build_stages(run)  # the stage graph, checked: a missing producer is a one-line error here
    from ragscale.pipeline.nugget_bank import bank_judges

    if bank_judges(run):  # the nuggets judge runs: its bank settings (nuggets.*)
        run = replace(run, nugget_bank=plan_nugget_bank(OmegaConf.to_container(cfg.nuggets, resolve=True)))
    return run
