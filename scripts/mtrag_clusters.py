"""MT-RAG's human-rated subset as a study of cluster-aware inference (docs/statistics.md).

    python scripts/mtrag_clusters.py reference_subset_with_human_evaluations.json [--resamples 10000] [--out DIR]

The subset's 159 tasks are turns of 20 conversations, each answered by three responders (the
reference, gpt-4o, llama-3.1-405b-instruct). Turns of one conversation share a topic, documents
and difficulty, so they are not independent: an interval that resamples tasks is too narrow and a
p-value too small. Through ragscale's own path (``ragscale.report.significance.PairedValues`` fed one
record per rated response, ``compare`` on every pair with the default SignificanceConf, and
``ragscale.report.slices.intervals_block``) it runs the tests twice, resampling tasks
(``cluster_by=None``) and whole conversations (``cluster_by="conversation_id"``), on the authors'
per-response values of RB_agg, RougeL, BERTScore recall, RL_F and RB_llm, and reports per metric and
pair of models: the width of the difference's interval both ways and their ratio, the design effect
(the CR1 cluster-robust variance of the mean difference over the naive s**2/n), z = mean / SE both
ways, p and adjusted p both ways and whether the verdict changes; per model and metric the width of
the mean's interval both ways. Beside them, as a check, RB_agg as ragscale derives it from the
authors' own components (the authors' rb_agg agrees with that only roughly).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from typing import Any

import numpy as np

MODELS = ("reference", "gpt-4o", "llama-3.1-405b-instruct")
# ragscale's metric name <- the annotation's name in the authors' file
METRICS = {"RB_agg": "rb_agg", "RougeL_stemFalse": "RougeL", "BertscoreR": "Bert-Rec", "RL_F": "rl_f",
           "RB_llm": "rb_llm"}
SEP = "<::>"
# a check beside them: RB_agg as ragscale derives it (ragscale.metrics.aggregate.rb_agg) from the authors'
# own components (Bert-Rec, RougeL, Bert-KPrec); the authors' rb_agg agrees with it only roughly
RECOMPUTED = "RB_agg_recomputed"


def _value(annotation: Any) -> float | None:
    """The authors' value of one metric of one response: its ``composite`` value (rb_agg, rl_f,
    rb_llm), else its ``system`` one (RougeL, Bert-Rec, Bert-KPrec are stored that way)."""
    if not isinstance(annotation, dict):
        return None
    for key in ("composite", "system"):
        v = annotation.get(key)
        if isinstance(v, dict) and v.get("value") is not None:
            return float(v["value"])
    return None


def load(path: str) -> list[dict]:
    """One ragscale record per rated response: task_id, conversation_id (the task id before
    ``<::>``), turn (after it), model_id and the metrics in ragscale's list shape ``[v]``."""
    from ragscale.metrics.aggregate import rb_agg

    with open(path) as fh:
        data = json.load(fh)
    out = []
    for ev in data["evaluations"]:
        task = str(ev["task_id"])
        conv, _, turn = task.partition(SEP)
        ann = ev.get("annotations") or {}
        metrics = {}
        for name, src in METRICS.items():
            v = _value(ann.get(src))
            if v is not None and math.isfinite(v):
                metrics[name] = [v]
        parts = {name: _value(ann.get(src)) for name, src in
                 (("BertscoreR", "Bert-Rec"), ("RougeL_stemFalse", "RougeL"), ("BertKPrec", "Bert-KPrec"))}
        if all(v is not None and math.isfinite(v) for v in parts.values()):
            metrics[RECOMPUTED] = [rb_agg({k: [v] for k, v in parts.items()})[0]]
        out.append({"task_id": task, "conversation_id": conv, "turn": int(turn) if turn.isdigit() else turn,
                    "model_id": str(ev["model_id"]), "metrics": metrics, "error": None})
    return out


def _values(records: list[dict], cluster_by: str | None):
    from ragscale.report.significance import PairedValues

    values = PairedValues([*METRICS, RECOMPUTED], cluster_by=cluster_by)
    for rec in records:
        values.add(rec)
    return values


def _z(diffs: np.ndarray, codes: np.ndarray) -> dict:
    """Mean / SE of the paired differences: naive (sd / sqrt(n)) and cluster-robust (CR1)."""
    from ragscale.stats.clustered import cluster_mean

    n = len(diffs)
    mean = float(diffs.mean())
    sd = float(diffs.std(ddof=1))
    se_naive = sd / math.sqrt(n)
    est = cluster_mean(diffs, codes)
    de = est["design_effect"] if est else None
    se_cl = None if de is None else se_naive * math.sqrt(de)
    return {"se_naive": se_naive, "se_conversation": se_cl,
            "z_naive": mean / se_naive if se_naive > 0 else None,
            "z_conversation": mean / se_cl if se_cl else None, "design_effect_cr1": de}


def _width(ci: Any) -> float | None:
    return None if not ci else float(ci[1] - ci[0])


def study(path: str, resamples: int = 10000) -> dict[str, Any]:
    """The comparisons and intervals both ways (module docstring)."""
    from ragscale.config import SignificanceConf
    from ragscale.report.significance import compare
    from ragscale.report.slices import intervals_block

    records = load(path)
    models = [m for m in MODELS if any(r["model_id"] == m for r in records)]
    models += sorted({r["model_id"] for r in records} - set(models))
    settings = SignificanceConf(resamples=resamples)
    naive_v, conv_v = _values(records, None), _values(records, "conversation_id")
    naive, conv = compare(models, naive_v, settings), compare(models, conv_v, settings)
    naive_iv = intervals_block(models, naive_v, settings.confidence)
    conv_iv = intervals_block(models, conv_v, settings.confidence)
    codes = conv_v.clusters()
    sizes = np.bincount(codes)

    pairs: dict[str, list[dict]] = {}
    for metric in [*METRICS, RECOMPUTED]:
        rows = {m: conv_v.row(m, metric) for m in models}
        out = []
        for e0, e1 in zip(naive["metrics"].get(metric, []), conv["metrics"].get(metric, [])):
            a, b = e0["a"], e0["b"]
            both = ~np.isnan(rows[a]) & ~np.isnan(rows[b])
            d = rows[a][both] - rows[b][both]
            w0, w1 = _width(e0["ci"]), _width(e1["ci"])
            row = {"a": a, "b": b, "n": e0["n"], "units": e1.get("units"), "diff": e0["diff"],
                   "ci_naive": e0["ci"], "ci_conversation": e1["ci"], "width_naive": w0, "width_conversation": w1,
                   "width_ratio": (w1 / w0) if w0 and w1 is not None else None,
                   "design_effect": e1.get("design_effect"),
                   "p_naive": e0["p"], "p_conversation": e1["p"],
                   "p_adjusted_naive": e0["p_adjusted"], "p_adjusted_conversation": e1["p_adjusted"],
                   "significant_naive": e0["significant"], "significant_conversation": e1["significant"],
                   "better_naive": e0["better"], "better_conversation": e1["better"]}
            row.update(_z(d, codes[both]))
            row["verdict_changes"] = (e0["significant"] != e1["significant"]) or (e0["better"] != e1["better"])
            out.append(row)
        pairs[metric] = out

    means: dict[str, dict[str, dict]] = {}
    for m in models:
        for metric in METRICS:
            i0 = (naive_iv or {}).get("models", {}).get(m, {}).get(metric)
            i1 = (conv_iv or {}).get("models", {}).get(m, {}).get(metric)
            if not i0 or not i1:
                continue
            w0, w1 = _width(i0["ci"]), _width(i1["ci"])
            means.setdefault(metric, {})[m] = {
                "mean": i1["mean"], "n": i1["n"], "units": i1["units"], "ci_naive": i0["ci"],
                "ci_conversation": i1["ci"], "width_naive": w0, "width_conversation": w1,
                "width_ratio": (w1 / w0) if w0 and w1 is not None else None,
                "design_effect": i1["design_effect"]}

    check = {RECOMPUTED: pairs.pop(RECOMPUTED)}
    des = [r["design_effect"] for rs in pairs.values() for r in rs if r["design_effect"] is not None]
    return {"records": len(records), "models": models, "metrics": list(METRICS), "resamples": resamples,
            "tasks": conv_v.unit()["tasks"], "conversations": conv_v.unit()["units"],
            "turns_per_conversation": {"min": int(sizes.min()), "median": float(statistics.median(sizes)),
                                       "max": int(sizes.max())},
            "unit_naive": naive["unit"]["text"], "unit_conversation": conv["unit"]["text"],
            "correction": settings.correction, "alpha": settings.alpha, "confidence": settings.confidence,
            "pairs": pairs, "means": means, "check": check,
            "design_effect_range": [min(des), max(des)] if des else None,
            "verdict_changes": sum(r["verdict_changes"] for rs in pairs.values() for r in rs)}


def _f(v: Any, fmt: str = ".3f") -> str:
    return "–" if v is None else format(v, fmt)


def _short(model: str) -> str:
    return {"llama-3.1-405b-instruct": "llama-3.1-405b"}.get(model, model)


def _verdict(sig: bool, better: str | None) -> str:
    return f"{_short(better)} better" if sig and better else ("significant" if sig else "n.s.")


PAIR_HEADER = [("| metric | a − b | diff | width naive | width conv. | ratio | design effect | z naive | z conv. "
                "| p naive (adj.) | p conv. (adj.) | verdict naive | verdict conv. |"),
               "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]


def _pair_row(metric: str, r: dict) -> str:
    change = " **(changes)**" if r["verdict_changes"] else ""
    return (f"| {metric} | {_short(r['a'])} − {_short(r['b'])} | {_f(r['diff'], '+.3f')} | {_f(r['width_naive'])} | "
            f"{_f(r['width_conversation'])} | {_f(r['width_ratio'], '.2f')}× | {_f(r['design_effect'], '.2f')} | "
            f"{_f(r['z_naive'], '+.1f')} | {_f(r['z_conversation'], '+.1f')} | "
            f"{_f(r['p_naive'], '.4f')} ({_f(r['p_adjusted_naive'], '.4f')}) | "
            f"{_f(r['p_conversation'], '.4f')} ({_f(r['p_adjusted_conversation'], '.4f')}) | "
            f"{_verdict(r['significant_naive'], r['better_naive'])} | "
            f"{_verdict(r['significant_conversation'], r['better_conversation'])}{change} |")


def to_markdown(res: dict[str, Any]) -> str:
    t = res["turns_per_conversation"]
    out = [(f"MT-RAG human-evaluation subset: {res['records']} responses, {res['tasks']} tasks in "
            f"{res['conversations']} conversations ({t['min']}-{t['max']} turns each, median {t['median']:g}); "
            f"{len(res['models'])} responders; {res['resamples']} resamples, {res['confidence']:.0%} intervals, "
            f"{res['correction']} per metric at alpha {res['alpha']}; the authors' per-response values."), "",
           f"Naive: {res['unit_naive']}. By conversation: {res['unit_conversation']}.", "",
           ("Paired differences (a − b; widths of the BCa interval naive → by conversation; design effect: CR1 "
            "variance of the mean difference over s²/n; z = mean / SE, naive sd/√n vs CR1):"), "", *PAIR_HEADER]
    for metric, rows in res["pairs"].items():
        out += [_pair_row(metric, r) for r in rows]
    lo_hi = res["design_effect_range"]
    out += ["", (f"Design effects of the differences: {_f(lo_hi[0], '.2f')}–{_f(lo_hi[1], '.2f')}; "
                 f"verdicts that change: {res['verdict_changes']} of {sum(len(v) for v in res['pairs'].values())}. "
                 "(The reference is scored against itself: its RougeL is 1 and its BERTScore recall ≈ 1 on every "
                 "task, so those differences are 1 minus the model's score.)"), "",
            ("Check: RB_agg as ragscale derives it (ragscale.metrics.aggregate.rb_agg) from the authors' components "
             "(Bert-Rec, RougeL, Bert-KPrec) rather than the authors' rb_agg:"), "", *PAIR_HEADER]
    for metric, rows in res.get("check", {}).items():
        out += [_pair_row(metric, r) for r in rows]
    out += ["", "Means (interval width naive → by conversation; design effect of the mean):", "",
            "| metric | model | mean | width naive | width conv. | ratio | design effect |",
            "|---|---|---:|---:|---:|---:|---:|"]
    for metric, by in res["means"].items():
        for m, r in by.items():
            out.append(f"| {metric} | {_short(m)} | {_f(r['mean'])} | {_f(r['width_naive'])} | "
                       f"{_f(r['width_conversation'])} | {_f(r['width_ratio'], '.2f')}× | {_f(r['design_effect'], '.2f')} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("human_json", help="mtrag-human/evaluations/reference_subset_with_human_evaluations.json")
    p.add_argument("--resamples", type=int, default=10000)
    p.add_argument("--out", default=None, help="write mtrag_clusters.{json,md} here")
    args = p.parse_args(argv)
    res = study(args.human_json, args.resamples)
    md = to_markdown(res)
    print(md)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "mtrag_clusters.json"), "w") as fh:
            json.dump(res, fh, indent=2)
        with open(os.path.join(args.out, "mtrag_clusters.md"), "w") as fh:
            fh.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
