"""The dry run: the judge stages of a run, dry, over the run's records in its batches; the prompts
they would send written as JSONL and totalled per judge (tokens, cost)."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from typing import IO, Any, Mapping, Sequence

from ragscale.dryrun.actor import DryActor

@dataclass
class JudgeTotals:
    """One judge's (of one judge engine) prompts to send and their tokens."""

    label: str  # the judge's name, ``<judge>@<panel judge>`` on a judge panel
    engine: str
    model: str
    token_basis: str  # how prompt tokens are counted
    exact_tokens: bool
    prompts: int = 0
    estimated: int = 0  # prompts of rounds rendered from synthetic answers
    prompt_tokens: int = 0
    estimated_prompt_tokens: int = 0
    completion_tokens: float = 0.0
    completion_basis: str = "estimate"  # "cache, n outputs" when the judge cache's usage was used
    not_estimated: int = 0  # judge runs whose estimate stopped (a synthetic answer the judge could not use)

    def cost(self, price_in: float, price_out: float) -> float:
        """USD for ``price_in`` / ``price_out`` per million prompt / completion tokens."""
        return cost(self.prompt_tokens, self.completion_tokens, price_in, price_out)


def cost(prompt_tokens: float, completion_tokens: float, price_in: float, price_out: float) -> float:
    """USD of ``prompt_tokens`` and ``completion_tokens`` at prices per million tokens."""
    return (prompt_tokens * price_in + completion_tokens * price_out) / 1e6


@dataclass
class DryRun:
    """What ``dry_run`` found: per judge totals (in the order of the judge stages), the simulated
    ``judge_work`` (run.json's counters as the actor would count them), the records read, and
    every prompt asked when ``keep_lookups`` (its cache key, round, attempt, whether cached)."""

    judges: list[JudgeTotals]
    work: dict
    records: int
    lookups: list[dict] | None = None
    cache_paths: list[str] = field(default_factory=list)

    @property
    def prompts(self) -> int:
        return sum(j.prompts for j in self.judges)


class DryJudges:
    """The judge stages of a run (their ``JudgeActor`` kwargs, as ``plan_judges`` makes them), dry:
    ``process`` takes a batch of pipeline rows through each stage in order, as the pipeline does,
    and writes the prompts they would send to ``out``; ``result`` totals them."""

    def __init__(self, judge_kwargs: Sequence[Mapping[str, Any]], out: IO[str], keep_lookups: bool = False):
        self.out = out
        self.actors = [DryActor.create(kw) for kw in judge_kwargs]
        self.totals: dict[str, JudgeTotals] = {}
        self.stats: dict[str, float] = {}
        for actor in self.actors:
            actor.lookups = [] if keep_lookups else None
            for name in actor.judge_names:
                self.totals[actor.label(name)] = JudgeTotals(
                    actor.label(name), actor.engine_name, actor.model_name, actor.recorder.counter.basis,
                    actor.recorder.counter.exact)

    def process(self, rows: list[dict]) -> None:
        from ragscale.pipeline.stage import process_rows, sum_stats

        for actor in self.actors:
            process_rows(actor, "judge", rows)  # the pipeline's per-record failure isolation
            for line in actor.sent:
                if actor.tag:
                    line["panel_judge"] = actor.tag
                t = self.totals[actor.label(line["judge"])]
                t.prompts += 1
                t.prompt_tokens += line["prompt_tokens"]
                t.completion_tokens += line["expected_completion_tokens"]
                if line["estimated"]:
                    t.estimated += 1
                    t.estimated_prompt_tokens += line["prompt_tokens"]
                self.out.write(json.dumps(line, ensure_ascii=False) + "\n")
            actor.sent = []
        sum_stats(rows, self.stats)

    def result(self, records: int) -> DryRun:
        """The totals; a judge that met outputs of its own in the judge cache expects completions
        of their mean length."""
        from ragscale.provenance import judge_work

        for actor in self.actors:
            for judge, values in actor.cached_usage.items():
                t = self.totals[actor.label(judge)]
                t.completion_tokens = t.prompts * sum(values) / len(values)
                t.completion_basis = f"cache, {len(values)} outputs"
            for judge, n in actor.failed_estimates.items():
                self.totals[actor.label(judge)].not_estimated = n
            if actor.cache is not None and actor.cache.disk is not None:
                actor.cache.disk.close()
        kept = all(a.lookups is not None for a in self.actors)
        lookups = [x for a in self.actors for x in a.lookups] if kept else None
        return DryRun(list(self.totals.values()), judge_work(self.stats) or {}, records, lookups,
                      [a.cache_path for a in self.actors if a.cache_path])


def dry_run(cfg: Any, out: IO[str], keep_lookups: bool = False) -> DryRun:
    """Write the prompts the run of ``cfg`` would send to ``out`` (JSONL, one per line) and return
    the totals. Every problem of the config or inputs is a one-line UserError, as for the run."""
    from ragscale.pipeline.graph import build_stages
    from ragscale.pipeline.cpu_stages import load_and_lexical, pointer_table
    from ragscale.plan import plan_run
    from ragscale.driver import scan_records

    plan = plan_run(cfg)
    stages = [st for st in build_stages(plan) if st.name == "judge"]
    judges = DryJudges([st.kwargs for st in stages], out, keep_lookups)
    with tempfile.TemporaryDirectory(prefix="ragscale-prompts-") as tmp:
        plan, pointers, _, _ = scan_records(plan, tmp)  # the run's records, in its order (CSV inputs normalized in tmp)
        if stages:
            size = int(stages[0].pool.get("batch_size", stages[0].batch_size))  # the judge pool's batches
            for i in range(0, len(pointers), size):
                judges.process(load_and_lexical(pointer_table(pointers[i:i + size]), files=list(plan.files),
                                                metrics=list(plan.metrics), expectations=plan.expectations).to_pylist())
    return judges.result(len(pointers))


def format_table(result: DryRun, price_in: float | None = None, price_out: float | None = None) -> list[str]:
    """The per-judge table: prompts to send (estimated ones among them), prompt tokens, expected
    completion tokens, and the cost when prices are given; then what the marks mean."""
    priced = price_in is not None and price_out is not None

    def usd(prompt_tokens: float, completion_tokens: float) -> list[str]:
        if not priced:
            return []
        return [f"{cost(prompt_tokens, completion_tokens, price_in, price_out):.4f}"]  # type: ignore[arg-type]

    head = ["judge", "engine", "prompts", "estimated", "prompt tokens", "completion tokens", *(["cost USD"] * priced)]
    rows = [[j.label, j.engine, f"{j.prompts:,}", f"{j.estimated:,}",
             f"{j.prompt_tokens:,}" + ("" if j.exact_tokens else " (estimate)"),
             f"{round(j.completion_tokens):,} ({j.completion_basis})", *usd(j.prompt_tokens, j.completion_tokens)]
            for j in result.judges]
    pt = sum(j.prompt_tokens for j in result.judges)
    ct = sum(j.completion_tokens for j in result.judges)
    rows.append(["total", "", f"{result.prompts:,}", f"{sum(j.estimated for j in result.judges):,}", f"{pt:,}",
                 f"{round(ct):,}", *usd(pt, ct)])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
             for r in [head, *rows]]
    for basis in dict.fromkeys(f"{j.model} ({j.engine}): {j.token_basis}" for j in result.judges):
        lines.append(f"[ragscale] prompt tokens of {basis}")
    if any(j.estimated for j in result.judges):
        lines.append("[ragscale] estimated: prompts of rounds that need outputs not generated yet, rendered from "
                     "synthetic answers (docs/prompts.md); their count and tokens are estimates")
    stopped = [f"{j.label} ({j.not_estimated})" for j in result.judges if j.not_estimated]
    if stopped:
        lines.append(f"[ragscale] later rounds not estimated for some records: {', '.join(stopped)}")
    lines.append("[ragscale] completion tokens: 'cache' = the mean of the judge's outputs in the judge cache; "
                 "'estimate' = docs/prompts.md's per-judge figure")
    if priced:
        lines.append(f"[ragscale] cost at {price_in} / {price_out} USD per million prompt / completion tokens")
    return lines
