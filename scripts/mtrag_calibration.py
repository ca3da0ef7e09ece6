"""MT-RAG's human-rated subset as a calibration study (docs/calibration.md).

    python scripts/mtrag_calibration.py reference_subset_with_human_evaluations.json [--splits 200] [--out DIR]

The authors' RL_F values are the judge; the median human faithfulness (1..4, mapped linearly to
0..1) labels a random half of each model's records. Through ragscale's own path (a run directory
with records.jsonl and summary.json, a labels JSONL, ``ragscale.report.calibration.calibrate``)
it reports per model the naive, human-only and calibrated (PPI++) estimates against the human mean
on the other half; then, over many random splits, how often each interval covers that held-out
mean, its mean width and the mean absolute error. The held-out mean is itself a sample of about
80 records, so no interval can cover it 95% of the time: compare the estimators with each other.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

import numpy as np

ESTIMATES = ("naive", "human_only", "calibrated")


def load(path: str) -> list[dict]:
    """One record per rated response: task_id, model_id, RL_F (the authors') and faithfulness
    (the median of its annotators, as ragscale reads MT-RAG's human-evaluation layout)."""
    from ragscale.report.agreement_io import read_human

    human = read_human(path)
    with open(path) as fh:
        data = json.load(fh)
    out = []
    for ev in data["evaluations"]:
        rlf = ((ev.get("annotations") or {}).get("rl_f") or {}).get("composite", {}).get("value")
        f = human.values.get(("task", str(ev["task_id"]), str(ev["model_id"])), {}).get("faithfulness")
        if rlf is not None and f is not None:
            out.append({"task_id": str(ev["task_id"]), "model_id": str(ev["model_id"]), "RL_F": float(rlf),
                        "faithfulness": f})
    return out


def write_run(rows: list[dict], run_dir: str) -> None:
    """A ragscale run directory of the rows (records.jsonl, summary.json)."""
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "records.jsonl"), "w") as fh:
        for r in rows:
            fh.write(json.dumps({"task_id": r["task_id"], "model_id": r["model_id"], "metrics": {"RL_F": r["RL_F"]},
                                 "error": None}) + "\n")
    models = sorted({r["model_id"] for r in rows})
    summary = {"metrics": ["RL_F"], "models": {}}
    for m in models:
        vals = [r["RL_F"] for r in rows if r["model_id"] == m]
        summary["models"][m] = {"count": len(vals), "errors": 0, "metrics": {"RL_F": float(np.mean(vals))},
                                "n": {"RL_F": len(vals)}}
    with open(os.path.join(run_dir, "summary.json"), "w") as fh:
        json.dump(summary, fh)


def one_split(rows: list[dict], run_dir: str, seed: int) -> dict[str, dict]:
    """Label a random half of each model's records (seeded), calibrate, and compare each estimate
    with the human mean (0..1) of the other half: {model: {estimate: {...}, "held_out": mean}}."""
    from ragscale.config import CalibrationConf
    from ragscale.report.calibration import calibrate

    rng = np.random.default_rng(seed)
    labelled, held = [], {}
    for m in sorted({r["model_id"] for r in rows}):
        mine = [r for r in rows if r["model_id"] == m]
        order = rng.permutation(len(mine))
        half = len(mine) // 2
        labelled += [mine[i] for i in order[:half]]
        held[m] = float(np.mean([(mine[i]["faithfulness"] - 1) / 3 for i in order[half:]]))
    labels = os.path.join(run_dir, f"labels-{seed}.jsonl")
    with open(labels, "w") as fh:
        for r in labelled:
            fh.write(json.dumps({"task_id": r["task_id"], "model_id": r["model_id"],
                                 "faithfulness": r["faithfulness"]}) + "\n")
    settings = CalibrationConf(human=labels, pairs=["faithfulness=RL_F"], map=["faithfulness=1..4:0..1"])
    block = calibrate(run_dir, labels, settings.pairs, settings.map, settings)
    out = {}
    for m, r in block["metrics"]["RL_F"]["models"].items():
        out[m] = {k: r[k] for k in ESTIMATES}
        out[m].update(held_out=held[m], n_labeled=r["n_labeled"], n_records=r["n_records"],
                      lam=r["calibrated"]["lambda"])
    return out


def study(path: str, splits: int = 200, work: str | None = None) -> dict[str, Any]:
    """Split 0 in full, then coverage, width and error of each estimate over ``splits`` splits."""
    rows = load(path)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = work or os.path.join(tmp, "run")
        write_run(rows, run_dir)
        first = one_split(rows, run_dir, 0)
        agg: dict[str, dict[str, dict[str, float]]] = {}
        for seed in range(splits):
            res = first if seed == 0 else one_split(rows, run_dir, seed)
            for m, r in res.items():
                for k in ESTIMATES:
                    lo, hi = r[k]["ci"]
                    a = agg.setdefault(m, {}).setdefault(k, {"covered": 0.0, "width": 0.0, "abs_error": 0.0})
                    a["covered"] += lo <= r["held_out"] <= hi
                    a["width"] += hi - lo
                    a["abs_error"] += abs(r[k]["mean"] - r["held_out"])
    summary = {m: {k: {s: v / splits for s, v in a.items()} for k, a in by.items()} for m, by in agg.items()}
    return {"records": len(rows), "splits": splits, "split0": first, "over_splits": summary}


def to_markdown(res: dict[str, Any]) -> str:
    def est(e: dict) -> str:
        return f"{e['mean']:.3f} [{e['ci'][0]:.3f}, {e['ci'][1]:.3f}]"

    out = [f"Split 0 ({res['records']} responses; half of each model's labelled):", "",
           "| model | labels | naive (RL_F) | human only | calibrated (PPI++) | lambda | held-out human mean |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for m, r in res["split0"].items():
        lam = "–" if r["lam"] is None else f"{r['lam']:.2f}"
        out.append(f"| {m} | {r['n_labeled']} | {est(r['naive'])} | {est(r['human_only'])} | "
                   f"{est(r['calibrated'])} | {lam} | {r['held_out']:.3f} |")
    out += ["", f"Over {res['splits']} random splits (per model: coverage of the held-out human mean / mean "
            "interval width / mean absolute error):", "",
            "| model | naive | human only | calibrated |", "|---|---:|---:|---:|"]
    for m, by in res["over_splits"].items():
        cells = [f"{by[k]['covered']:.0%} / {by[k]['width']:.3f} / {by[k]['abs_error']:.3f}" for k in ESTIMATES]
        out.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("human_json", help="mtrag-human/evaluations/reference_subset_with_human_evaluations.json")
    p.add_argument("--splits", type=int, default=200)
    p.add_argument("--out", default=None, help="write mtrag_calibration.{json,md} here")
    args = p.parse_args(argv)
    res = study(args.human_json, args.splits)
    md = to_markdown(res)
    print(md)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "mtrag_calibration.json"), "w") as fh:
            json.dump(res, fh, indent=2)
        with open(os.path.join(args.out, "mtrag_calibration.md"), "w") as fh:
            fh.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
