"""The nugget banks of a run (``nuggets.bank=per_query``), built before the record pipeline.

In the run's Ray session, before the records stream: every record is read once on the driver and
pooled per task id (ragscale.io.nugget_bank.pool); the banks not reusable (``nuggets.bank_file``,
or a resumed run's ``nuggets.jsonl`` with the same key) go through a pool of judge actors running
UMBRELA on the pooled passages and the nuggets judge's bank rounds (ragscale.judges.nuggets
``build_bank``); ``nuggets.jsonl`` is written; and the plan's nuggets judges get the banks as their
``bank`` option, so every record's answer is assigned against its query's bank. The judge is the
run's judge (``judge``); a panel's members assign against the same banks. UMBRELA's prompts of a
pooled passage are those of the records' own grades, so the judge cache answers the pipeline's.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Callable, Iterator

from ragscale.io import nugget_bank as nb
from ragscale.judges.nugget_prompts import VERSION

JUDGE = "nuggets"
BATCH = 8  # bank rows per actor call


def bank_judges(plan: Any) -> list[dict]:
    """The JudgeActor kwargs of the plan that run the nuggets judge (the run's judge, panel members)."""
    if "judge" not in plan.stages:
        return []
    return [k for k in (plan.judge_kwargs, *plan.panel_kwargs) if JUDGE in (k.get("judges") or ())]


def read_rows(plan: Any, pointers: Any, chunk: int = 4096) -> Iterator[dict]:
    """Every record of the run, read as the pipeline's first stage reads it (``Record.to_row``),
    with only the fields pooling reads; a record repeating an earlier one's (model, task, run) is
    left out."""
    from ragscale.io.inputs import Pointer, read_raw
    from ragscale.pipeline.cpu_stages import pointer_table
    from ragscale.record import read_record

    files = list(plan.files)
    for i in range(0, len(pointers), chunk):
        ps = [Pointer(**p) for p in pointer_table(pointers[i:i + chunk]).to_pylist()]
        for p, raw in zip(ps, read_raw(files, ps)):
            if p.first < 0:
                f = files[p.file_idx]
                row = read_record(raw, key=p.key(files), model_id=f.stem, task_id=p.task, source_file=f.path,
                                  source_line=p.line, need_targets=False, columns=f.column_map).to_row()
                yield {k: row[k] for k in nb.POOLED}


def build_banks(plan: Any, pointers: Any, out_dir: str, printer: Callable[[str], None],
                cpu_scale: float = 1.0) -> tuple[Any, dict | None]:
    """(the plan with the banks in its nuggets judges' options, run.json's ``nugget_bank``) in a
    Ray session; (plan, None) when the run has no nuggets judge or keeps one bank per record."""
    judges = bank_judges(plan)
    if not judges:
        return plan, None
    conf = plan.nugget_bank
    rows = list(read_rows(plan, pointers))
    models = {r["model_id"] for r in rows if not r.get("error")}
    mode = nb.mode(conf["bank"], len(models))
    if mode == "per_record":
        return plan, {"mode": mode, "asked": conf["bank"], "models": len(models)}
    pooled = nb.pool(rows)
    del rows
    main = plan.judge_kwargs
    judge_id = {**{k: plan.judge_conf.get(k) for k in ("engine", "model", "seed")},
                "protocol": main.get("protocol", "constrained"), "window": conf["window"], "version": VERSION}
    given = nb.read(conf["bank_file"]) if conf.get("bank_file") else {}
    path = os.path.join(out_dir, nb.FILE)
    earlier = nb.read(path) if os.path.exists(path) and not conf.get("bank_file") else {}
    entries, todo = nb.reuse(pooled, [nb.bank_key(row, judge_id) for row in pooled], given, earlier)
    printer(f"[ragscale] nugget banks (nuggets.bank={conf['bank']}: {mode}, {len(models)} model(s)): "
            f"{len(pooled)} queries, {len(pooled) - len(todo)} reused, {len(todo)} to build with {judge_id['model']}")
    entries += _judge(main, [r for r, _ in todo], [k for _, k in todo], conf["window"], plan.cluster, cpu_scale,
                      printer, float(plan.options.progress_interval_s or 10.0))
    nb.write(path, entries)
    banks = nb.banks(entries)
    failed = sum(1 for e in entries if e.get("failed"))
    if failed:
        printer(f"[ragscale] warning: {failed} of {len(entries)} nugget banks failed; their records' nuggets "
                f"metrics are null (the reasons: {path})")
    plan = replace(plan, judge_kwargs=_with_bank(plan.judge_kwargs, banks),
                   panel_kwargs=tuple(_with_bank(k, banks) for k in plan.panel_kwargs))
    return plan, {"mode": mode, "asked": conf["bank"], "models": len(models), "file": nb.FILE,
                  "queries": len(entries), "built": len(todo), "reused": len(entries) - len(todo), "failed": failed,
                  "bank_file": conf.get("bank_file")}


def _with_bank(kwargs: dict, banks: dict) -> dict:
    """JudgeActor kwargs whose nuggets judge assigns against ``banks``."""
    if JUDGE not in (kwargs.get("judges") or ()):
        return kwargs
    options = {k: dict(v) for k, v in (kwargs.get("options") or {}).items()}
    options.setdefault(JUDGE, {})["bank"] = banks
    return {**kwargs, "options": options}


def _judge(kwargs: dict, rows: list[dict], keys: list[str], window: int, cluster: dict, cpu_scale: float,
           printer: Callable[[str], None], every_s: float) -> list[dict]:
    """Build the banks of ``rows`` on a pool of judge actors: ``nuggets.jsonl``'s entries. A line
    every ``every_s`` seconds says how many are built."""
    if not rows:
        return []
    import time

    import ray
    from ray.util import ActorPool

    from ragscale.pipeline.resources import scaled

    pool = cluster.get("judge") or {}
    actor_kwargs = {k: v for k, v in kwargs.items() if k not in ("judges", "options", "tag")}
    actor_kwargs.update(judges=["umbrela", JUDGE], options={JUDGE: {"build_bank": True, "window": window}})
    remote = ray.remote(_BankJudge).options(num_cpus=scaled(float(pool.get("num_cpus", 1.0)), cpu_scale),
                                            num_gpus=float(pool.get("num_gpus", 0.0)))
    actors = [remote.remote(actor_kwargs) for _ in range(max(1, min(int(pool.get("size", 1)), len(rows))))]
    try:
        batches = list(enumerate(rows[i:i + BATCH] for i in range(0, len(rows), BATCH)))
        judged: dict[int, list[dict]] = {}
        t0 = last = time.time()
        for k, out in ActorPool(actors).map_unordered(lambda a, b: a.run.remote(*b), batches):
            judged[k] = out
            n = sum(len(v) for v in judged.values())
            if time.time() - last >= every_s or n == len(rows):
                last = time.time()
                printer(f"[ragscale] nugget banks: {n}/{len(rows)} built · {last - t0:.0f}s")
        done = [r for k in sorted(judged) for r in judged[k]]
    finally:
        for a in actors:
            ray.kill(a)
    return [nb.entry(row, key, *_outcome(out)) for row, key, out in zip(rows, keys, done)]


def _outcome(row: dict) -> tuple[dict | None, str | None]:
    """(the bank's details, None) of a judged bank row, or (None, why it has none)."""
    from ragscale.row import detail, judge_error_entries

    got = detail(row.get("details"), JUDGE)
    if isinstance(got, dict) and got.get("nuggets"):
        return got, None
    reasons = [f"{e.get('judge')}: {e.get('reason')}" for e in judge_error_entries(row)]
    return None, "; ".join(reasons) or "no bank"


class _BankJudge:
    """A Ray actor around ragscale.actors.judge.JudgeActor: bank rows in, judged rows out."""

    def __init__(self, kwargs: dict):
        from ragscale.actors.judge import JudgeActor

        self.actor = JudgeActor(**kwargs)

    def run(self, k: int, rows: list[dict]) -> tuple[int, list[dict]]:
        self.actor.process(rows)
        return k, rows
