#!/usr/bin/env python
r"""Benchmark: the driver's ceiling, the records per second the DRIVER side of a run can take.

Everything the driver does with a record once the pool has scored it, with workers that return at
once, timed per component, on the same records in one run:

- ``pool_to_driver``: a Ray Dataset of what the pipeline's last task hands the driver (each finished
  row's records.jsonl line with its key, error flag and the batch's counters:
  ``ragscale.pipeline.cpu_stages.output_lines``, in blocks of ``--block-rows``, stored in the object
  store before the clock starts) through one ``map_batches`` that returns its batch unchanged,
  iterated as ``ragscale.pipeline.dataset.run_pipeline`` does (``iter_batches(batch_size=None,
  batch_format="pyarrow", prefetch_batches=1)``, ``to_pylist``, the batch counters summed);
- ``write``: the same lines (fetched outside the clock) into records.jsonl through
  ``ragscale.io.output.RecordWriter.write_lines``, as the driver's ``on_rows`` feeds it (record keys
  checked against a ``RecordKeys`` of the run's pointers);
- the report pass of ``ragscale.driver._finish``: ``Outputs(plan, out_dir, printer)`` for the
  ``+scenario=mtrag`` plan (the config's defaults: significance on with 10,000 resamples, the HTML
  report on, no calibration or agreement labels; the open-rag-eval export is for TREC steps), timed as
  ``report_read`` (the one pass over records.jsonl), ``report_finish_summary`` (summary.json/csv,
  records.parquet, the significance block) and ``report_finish_reports`` (leaderboard, report.html).

``workers_format_lines`` is not the driver's: the seconds the workers (Ray tasks on the machine's
cores) take to turn the finished rows into those lines, before the clock of the driver's passes.

The baseline, in the same run: the floor of any pass over the file, records.jsonl read line by
line with ``json.loads`` only. ``driver_loop`` (unless ``--skip-loop``) is the pipeline's own loop,
iterating and writing together as ``run_pipeline`` + ``on_rows`` do (Ray's prefetch thread
overlapping the two), into a second folder. ``fetch_and_convert`` is the part of ``pool_to_driver``
that is not Ray Data's: the same blocks fetched with ``ray.get``, selected and converted.

The rows are the bundled MT-RAG sample's 30 records (``ragscale/data/mtrag_sample.jsonl``, read
by ``read_record``) with the 17 MT-RAG metrics of its golden run (``tests/golden/mtrag_sample.json``),
replicated to N records: ``--models`` models (default 10) answering N / models tasks, every
record its own task id, model and key, its metric values nudged per record and model so that the
summary and the significance tests (10 models: each against the leader) do real work.

    .venv/bin/python benchmarks/driver.py --quick                      # 20,000 records, under a minute
    .venv/bin/python benchmarks/driver.py [--records 100000 1000000] [--out FILE.json]

Prints one JSON object: per N, the seconds and records/s of each component, each component's
ratio to the baseline, the combined driver ceiling (N / the components' summed seconds), the
component that dominates, the driver loop's rate, and the process's peak RSS (``getrusage``; the
sizes run in ascending order, so each size's figure is its own peak), split into its private memory
and the object-store pages it has read (sampled from /proc). docs/performance.md, "The driver's
ceiling", has the figures at 10^5 and 10^6 records.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")
GOLDEN = os.path.join(ROOT, "tests", "golden", "mtrag_sample.json")
SIZES = (100_000, 1_000_000)
QUICK = 20_000
COMPONENTS = ("pool_to_driver", "write", "report_read", "report_finish_summary", "report_finish_reports")
BASELINE = "baseline_json_loads"
TASK_MARK, MODEL_MARK = "@@bench-task@@", "@@bench-model@@"
TAG = "bench"  # the input file's tag: record keys are bench:<line>


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit, run_cli  # noqa: E402


def add_cli_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--records", type=int, nargs="+", default=list(SIZES), help="record counts, run in ascending order")
    ap.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK:,} records")
    ap.add_argument("--models", type=int, default=10, help="models answering each task")
    ap.add_argument("--block-rows", type=int, default=128,
                    help="rows per block reaching the driver (cluster.chunk_size's default)")
    ap.add_argument("--skip-loop", action="store_true", help="no driver_loop pass (iterate and write together)")
    ap.add_argument("--keep", default=None, help="keep the run folders under this folder (default: removed)")
    ap.add_argument("--out", default=None, help="also write the JSON here")


# ---- the rows: the bundled sample, scored, replicated ---------------------------------------------

def base_rows(sample: str = SAMPLE, golden: str = GOLDEN) -> list[dict]:
    """The sample's records as the pipeline's last stage emits them: ``read_record``'s row with the
    golden run's metrics (the golden file keys them ``mtrag_sample:<line>``, lines from 1)."""
    from ragscale.record import read_record

    with open(golden) as fh:
        scored = json.load(fh)["records"]
    stem = os.path.splitext(os.path.basename(sample))[0]
    rows = []
    with open(sample, "rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            obj = json.loads(raw)
            key = f"{stem}:{line_no}"
            row = read_record(raw, key=key, model_id=obj.get("model_id") or stem, task_id=obj.get("task_id"),
                              source_file=sample, source_line=line_no, need_targets=True).to_row()
            row["metrics"] = scored[key]["metrics"]
            row["error"] = scored[key].get("error")
            rows.append(row)
    return rows


def input_template(input_json: str) -> str:
    """The input object's JSON with its task id and model id as marks that ``fill`` replaces."""
    obj = json.loads(input_json)
    obj["task_id"] = TASK_MARK
    if "model_id" in obj:
        obj["model_id"] = MODEL_MARK
    return json.dumps(obj, ensure_ascii=False)


def fill(template: str, task: str, model: str) -> str:
    return (template.replace(json.dumps(TASK_MARK), json.dumps(task, ensure_ascii=False))
            .replace(json.dumps(MODEL_MARK), json.dumps(model, ensure_ascii=False)))


def nudge(value, i: int, j: int, m: int):  # noqa: ANN001, ANN201 - a metric's value, as it came
    """A metric's value for record ``i``, metric ``j``, model ``m``: a score strictly inside (0, 1)
    moved by up to +-0.05 (deterministic in i and j) and down by 0.01 per model, kept inside [0, 1];
    anything else (0, 1, a count, a flag, null) as it was."""
    if type(value) is not float or not 0.0 < value < 1.0:
        return value
    noise = ((i * 40503 + j * 977) % 1009) / 1008 - 0.5
    return round(min(1.0, max(0.0, value + 0.1 * noise - 0.01 * m)), 6)


def nudged(metrics: dict, i: int, m: int) -> dict:
    return {name: [nudge(v, i, j, m) for v in vals] if isinstance(vals, list) else vals
            for j, (name, vals) in enumerate(metrics.items())}


def prepare_base(rows: list[dict]) -> list[list[dict]]:
    """The base rows grouped by task (tasks in order of first appearance, each task's models in
    input order), each with its input template and parsed metrics."""
    tasks: dict[str, list[dict]] = {}
    for r in rows:
        tasks.setdefault(r["task_id"], []).append(
            {**r, "_template": input_template(r["input_json"]), "_metrics": dict(r["metrics"] or {})})
    return list(tasks.values())


def replicate(base: list[list[dict]], i: int, models: int, source_file: str) -> dict:
    """Record ``i`` of the replicated run: model ``i % models`` answering task ``i // models`` (the
    sweep order: a task's models side by side), taken from base task ``task % len(base)`` and that
    task's model ``model % its models``; its own task id, model, key, source line and metric values."""
    m, t = i % models, i // models
    task_rows = base[t % len(base)]
    b = task_rows[m % len(task_rows)]
    task, model = f"{b['task_id']}#{t // len(base)}", f"model-{m:02d}"
    row = {k: v for k, v in b.items() if not k.startswith("_")}
    row.update(key=f"{TAG}:{i}", model_id=model, task_id=task, source_file=source_file, source_line=i,
               input_json=fill(b["_template"], task, model), metrics=nudged(b["_metrics"], i, m),
               stats=None)
    return row


def make_block(base: list[list[dict]], start: int, count: int, models: int, source_file: str):  # noqa: ANN201
    """Records ``start`` .. ``start + count - 1`` as one Arrow table in the row schema of the base
    rows' metrics (ragscale.row); the first row carries the batch's counters (``stats``), as a
    stage's batch does."""
    from ragscale.pipeline.stage import to_table
    from ragscale.row import row_schema

    rows = [replicate(base, i, models, source_file) for i in range(start, start + count)]
    if rows:
        rows[0]["stats"] = json.dumps({"time_derive": 0.001, "records_in": count})
    names = [m for task in base for r in task for m in r["_metrics"]]
    return to_table(rows, row_schema(names), "derive")


def spans(n: int, block: int) -> list[tuple[int, int]]:
    """(start, count) of each block of ``n`` records."""
    return [(s, min(block, n - s)) for s in range(0, n, block)]


# ---- the arithmetic of the result ------------------------------------------------------------------

def summarize(n: int, seconds: dict[str, float]) -> dict:
    """Per component its records/s and ratio to the baseline; the combined ceiling (N / the summed
    component seconds) and the component that dominates."""
    base = seconds[BASELINE]
    parts = {k: seconds[k] for k in COMPONENTS if k in seconds}
    total = sum(parts.values())
    return {
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "records_per_s": {k: round(n / v, 1) if v > 0 else None for k, v in seconds.items()},
        "ratio_to_baseline": {k: round(v / base, 2) if base > 0 else None for k, v in parts.items()},
        "components_s": round(total, 3),
        "driver_ceiling_records_per_s": round(n / total, 1) if total > 0 else None,
        "dominant": max(parts, key=parts.get) if parts else None,
        "dominant_share": round(max(parts.values()) / total, 3) if total > 0 else None,
    }


def significance_seconds(lines: list[str]) -> float | None:
    """The significance block's seconds from the report pass's console line, None if none."""
    for line in lines:
        m = re.search(r"significance: .* in ([0-9.]+)s$", line)
        if m:
            return float(m.group(1))
    return None


def status_kib(text: str) -> dict[str, int]:
    """The ``Rss*`` and ``VmHWM`` lines of a /proc/<pid>/status text, in KiB."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name.startswith("Rss") or name == "VmHWM":
            out[name] = int(rest.split()[0])
    return out


class MemorySampler:
    """The largest private (``RssAnon``) and shared (``RssShmem``: object-store pages this process
    has read) resident memory of this process, sampled every ``every`` seconds from /proc (Linux;
    nothing elsewhere). Shared pages count in ``getrusage``'s peak too, so the two tell the driver's
    own memory from the object store's."""

    def __init__(self, every: float = 0.2):
        import threading

        self.peak = {"RssAnon": 0, "RssShmem": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)

    def sample(self) -> None:
        try:
            with open("/proc/self/status") as fh:
                now = status_kib(fh.read())
        except OSError:
            return
        for k in self.peak:
            self.peak[k] = max(self.peak[k], now.get(k, 0))

    def _run(self, every: float) -> None:
        while not self._stop.wait(every):
            self.sample()

    def __enter__(self) -> "MemorySampler":
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self._stop.set()
        self._thread.join()
        self.sample()

    def mib(self) -> dict[str, float | None]:
        """``peak_rss_private_mib`` and ``peak_rss_shared_mib`` (None where /proc has no figures)."""
        seen = any(self.peak.values())
        return {"peak_rss_private_mib": round(self.peak["RssAnon"] / 1024, 1) if seen else None,
                "peak_rss_shared_mib": round(self.peak["RssShmem"] / 1024, 1) if seen else None}


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (``getrusage``; KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


# ---- the passes -----------------------------------------------------------------------------------

def passthrough(batch):  # noqa: ANN001, ANN201 - a worker that returns at once
    return batch


def _dataset(refs: list):  # noqa: ANN202
    import ray

    return ray.data.from_arrow_refs(refs).map_batches(passthrough, batch_size=None, batch_format="pyarrow")


def _iterate(refs: list, on_rows=None) -> tuple[int, float, dict]:  # noqa: ANN001
    """run_pipeline's loop over the pool's output: (rows, seconds, summed counters); ``on_rows``
    gets each batch's rows as the driver's does."""
    from ragscale.pipeline.stage import sum_stats

    ds, stats, n = _dataset(refs), {}, 0
    t0 = time.perf_counter()
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=1):
        rows = batch.to_pylist()
        sum_stats(rows, stats)
        if on_rows is not None:
            on_rows(rows)
        n += len(rows)
    return n, time.perf_counter() - t0, stats


def _writer(out_dir: str, n: int, source_file: str):  # noqa: ANN202
    """The driver's RecordWriter over a RecordKeys of the run's n pointers (one input file)."""
    import numpy as np

    from ragscale.io.inputs import InputFile, PointerArray
    from ragscale.io.output import RecordKeys, RecordWriter

    files = [InputFile(path=source_file, fmt="jsonl", stem=TAG, tag=TAG)]
    pointers = PointerArray(np.zeros(n, np.int32), np.arange(n, dtype=np.int64), np.zeros(n, np.int64),
                            np.zeros(n, np.int64), np.ones(n, bool))
    os.makedirs(out_dir, exist_ok=True)
    return RecordWriter(out_dir, RecordKeys(files, pointers))


def _write(refs: list, out_dir: str, n: int, source_file: str) -> tuple[float, float]:
    """The rows of every block through the writer as on_rows feeds it: (seconds writing, seconds
    fetching the blocks with ``ray.get`` and converting them as the driver does, without Ray Data)."""
    import ray

    writer, spent, fetch = _writer(out_dir, n, source_file), 0.0, 0.0
    try:
        for ref in refs:
            t0 = time.perf_counter()
            rows = ray.get(ref).to_pylist()
            t1 = time.perf_counter()
            writer.write_lines((r["key"], r["line"], r["errored"]) for r in rows)
            spent += time.perf_counter() - t1
            fetch += t1 - t0
    finally:
        writer.close()
    if writer.written != n:
        raise SystemExit(f"wrote {writer.written} of {n} records ({writer.duplicates} duplicates)")
    return spent, fetch


def _loop(refs: list, out_dir: str, n: int, source_file: str) -> float:
    """Iterate and write in one loop, as run_pipeline + the driver's on_rows do."""
    writer = _writer(out_dir, n, source_file)
    try:
        _, seconds, _ = _iterate(refs, lambda rows: writer.write_lines(
            (r["key"], r["line"], r["errored"]) for r in rows))
    finally:
        writer.close()
    return seconds


def _baseline(path: str) -> float:
    t0 = time.perf_counter()
    with open(path, "rb") as fh:
        for line in fh:
            json.loads(line)
    return time.perf_counter() - t0


def _report(plan, out_dir: str, n: int, stats: dict) -> tuple[dict, list[str]]:  # noqa: ANN001
    """The report pass of ragscale.driver._finish, each part timed; (seconds, the lines it printed)."""
    from ragscale.provenance import run_info
    from ragscale.report.sinks import Outputs

    lines: list[str] = []
    seconds = {}
    t0 = time.perf_counter()
    outputs = Outputs(plan, out_dir, lines.append)
    outputs.read()
    seconds["report_read"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    summary = outputs.finish_summary(None)
    seconds["report_finish_summary"] = time.perf_counter() - t0
    records = {"in": n, "resumed": 0, "written_this_run": n, "out": n, "errored": 0, "judge_failed": 0,
               "missing": 0, "duplicates_dropped": 0}
    info = run_info(plan, t_start=time.time(), failure=None, timings={"pipeline_wall": 0.0}, stats=stats,
                    ray_info={}, records=records)
    t0 = time.perf_counter()
    written = outputs.finish_reports(summary, info)
    seconds["report_finish_reports"] = time.perf_counter() - t0
    if outputs.failed:
        raise SystemExit(f"report pass failed: {outputs.failed}")
    if len(summary["models"]) < 2 or "html_report" not in written:
        raise SystemExit(f"report pass wrote too little: {sorted(summary['models'])}, {written}")
    return seconds, lines


def run_size(n: int, args: argparse.Namespace, base: list[list[dict]], plan, work: str,  # noqa: ANN001
             row_bytes: int) -> dict:
    """One record count: the rows built in the object store by Ray tasks (not timed; the driver
    holds only their references, as in a run), then every pass over them."""
    import ray

    from ragscale.pipeline.cpu_stages import output_lines

    source_file = os.path.join(work, "bench-input.jsonl")  # named in the records' provenance; never read
    make, fmt = ray.remote(make_block), ray.remote(output_lines)
    base_ref = ray.put(base)
    t0 = time.perf_counter()
    rows = [make.remote(base_ref, s, c, args.models, source_file) for s, c in spans(n, args.block_rows)]
    ray.wait(rows, num_returns=len(rows), fetch_local=False)
    build_s = time.perf_counter() - t0
    # the pipeline's last task, in the workers: each row's records.jsonl line (timed, not the driver's)
    t0 = time.perf_counter()
    refs = [fmt.remote(r) for r in rows]
    ray.wait(refs, num_returns=len(refs), fetch_local=False)
    format_s = time.perf_counter() - t0
    del rows
    with MemorySampler() as memory:
        out = _passes(n, args, refs, plan, work, source_file)
    return {**out, "build_rows_s": round(build_s, 1), "row_bytes_in_arrow": row_bytes,
            "workers_format_lines": {"seconds": round(format_s, 3), "records_per_s": round(n / format_s, 1)},
            "peak_rss_mib": peak_rss_mib(), **memory.mib()}


def _passes(n: int, args: argparse.Namespace, refs: list, plan, work: str,  # noqa: ANN001
            source_file: str) -> dict:
    _iterate(refs[:4])  # warm-up, not timed: Ray Data's first execution starts its workers and imports
    got, pool_s, stats = _iterate(refs)
    if got != n:
        raise SystemExit(f"the pool gave {got} of {n} rows")
    run_dir = os.path.join(work, f"run-{n}")
    write_s, fetch_s = _write(refs, run_dir, n, source_file)
    seconds = {"pool_to_driver": pool_s, "write": write_s}
    records_path = os.path.join(run_dir, "records.jsonl")
    seconds[BASELINE] = _baseline(records_path)
    loop = None
    if not args.skip_loop:
        loop_s = _loop(refs, os.path.join(work, f"loop-{n}"), n, source_file)
        loop = {"seconds": round(loop_s, 3), "records_per_s": round(n / loop_s, 1)}
        shutil.rmtree(os.path.join(work, f"loop-{n}"), ignore_errors=True)
    refs.clear()  # the source rows leave the object store before the report pass, as a run's have by then
    report_s, lines = _report(plan, run_dir, n, stats)
    seconds.update(report_s)
    out = {"records": n, "tasks": -(-n // args.models), "models": args.models,
           "records_jsonl_mib": round(os.path.getsize(records_path) / 2**20, 1),
           "record_bytes": round(os.path.getsize(records_path) / n),
           **summarize(n, seconds),
           "driver_loop": loop,
           # the pool_to_driver rows fetched block by block with ray.get, without Ray Data's executor
           "fetch_and_convert": {"seconds": round(fetch_s, 3), "records_per_s": round(n / fetch_s, 1)},
           "significance_s": significance_seconds(lines),
           "report_lines": lines}
    if not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return out


def _init_ray(n_max: int, row_bytes: int) -> None:
    """A local Ray (ragscale.pipeline.dataset.init_ray's settings) whose object store holds the
    source rows with room to spare, so that nothing spills to disk while timed."""
    import logging

    import ray

    from ragscale.pipeline.dataset import init_ray

    need = int(n_max * row_bytes * 1.5) + (1 << 30)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    default = int(0.3 * total)
    if need <= default:
        init_ray({}, verbose=False)
        return
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    ray.init(address="local", include_dashboard=False, logging_level=logging.ERROR, log_to_driver=True,
             object_store_memory=min(need, int(0.6 * total)))


def main(args: argparse.Namespace) -> dict:
    import logging
    import warnings

    import ray
    from ray.data import DataContext

    from ragscale.plan import plan_run
    from ragscale.run import compose

    sizes = sorted([QUICK] if args.quick else args.records)
    plan = plan_run(compose(["+scenario=mtrag", f"output_dir={tempfile.gettempdir()}/ragscale-bench-driver-unused"]))
    base = prepare_base(base_rows())
    probe = make_block(base, 0, args.block_rows, args.models, "probe.jsonl")
    work = args.keep or tempfile.mkdtemp(prefix="ragscale-bench-driver-")
    os.makedirs(work, exist_ok=True)
    row_bytes = probe.nbytes // max(1, probe.num_rows)
    _init_ray(max(sizes), row_bytes)
    try:
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"ray\.data\.context")
            ctx = DataContext.get_current()
        ctx.enable_progress_bars = False  # run_pipeline's settings
        ctx.execution_options.preserve_order = False
        ctx.print_on_execution_start = False
        runs = [run_size(n, args, base, plan, work, row_bytes) for n in sizes]
    finally:
        ray.shutdown()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    result = {"benchmark": "driver", "cpus": os.cpu_count(),
              "rows": {"source": "ragscale/data/mtrag_sample.jsonl (30 records) with its golden run's metrics, "
                                 "replicated", "metrics": list(plan.metrics), "block_rows": args.block_rows},
              "report": {"significance_resamples": plan.reports.significance.resamples,
                         "html_report": plan.reports.html_report, "export_csv": plan.reports.export_csv},
              "baseline": "records.jsonl read line by line with json.loads only",
              "runs": runs}
    emit(result, args.out)
    return result


if __name__ == "__main__":
    run_cli(__doc__, add_cli_args, main)
