"""Per-model leaderboard of a run: ``leaderboard.md`` and ``leaderboard.csv``.

Laid out like MT-RAG's generation tables (Katsis et al., 2025, Table 5): one row per
model, ranked by a headline metric, with the metrics broken down by question
answerability and by turn. Built from the summary that ``summary.finalize`` accumulates
in its one pass over records.jsonl, so nothing reads the records again and memory is a
few numbers per (model, cell, metric).

- **Headline** (the ranking, :mod:`ragscale.report.headline`): the first of ``HMean_idk``,
  ``HMean``, ``RB_agg_idk``, ``RB_agg`` that the run computed, else the run's first metric with
  a per-record mean (``Length`` and counts skipped); when it is undefined on every record of a
  model, the next one, with the reason (:func:`fallback_lines`). The direction is the catalog's
  ``higher_is_better`` (the taxonomy's error rates rank lower first). Models without a value
  come last; ties share a rank.
- **Overall table**: every metric's mean, the record count and the errored records.
- **Breakdown tables**: the headline, and for an H-Mean its three components, and the
  answerability accuracy when the IDK judge ran; columns are All, each answerability class
  present (ANSWERABLE, PARTIAL, UNANSWERABLE, CONVERSATIONAL, UNDERSPECIFIED, then others,
  UNKNOWN last; left out when no record has a class) and Turn 1 / Turn >1 (MT-RAG's first
  turn vs later turns; left out when no record has a ``turn``). Each cell is
  ``mean (n)``, ``n`` the records with a value.
- **CSV**: every metric for every (model, cell): ``rank, model_id, breakdown, cell, count,
  errors``, the means, ``answerability_accuracy``, then ``n_<metric>`` per metric and
  ``answerability_n``.
- **Significance** (when summary.json has the block, ragscale.report.significance): a section
  of leaderboard.md, and significance.csv beside leaderboard.csv, one row per metric and pair.
"""

from __future__ import annotations

import os
from typing import Iterable

from ragscale.exitcodes import failed
from ragscale.metrics.registry import label
from ragscale.report.headline import fallback, headline, higher_is_better, missing, table_metrics
from ragscale.report.ranking import ANS_ACC, breakdown_metrics, cell, cells, mean_n, ranking, standings
from ragscale.report.safe import console_name, csv_writer, md_cell, visible
from ragscale.report.text import metric_value, with_interval
from ragscale.report.wording import is_judged, own_values


def _md_table(head: list[str], rows: Iterable[list[str]], right_from: int) -> list[str]:
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---:" if i >= right_from or i == 0 else "---" for i in range(len(head))) + "|"]
    lines += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows]
    return lines


def _calibrated_cells(summary: dict, metric: str, model: str) -> list[str]:
    """The leaderboard's calibration columns of a model: calibrated [CI], uncalibrated (the judge's, for
    a judge metric) [CI], labels."""
    r = summary["calibration"]["metrics"][metric]["models"].get(model) or {}
    cal = with_interval(metric, r.get("calibrated")) if r.get("calibrated") else (r.get("message") or "–")
    return [cal, with_interval(metric, r.get("naive")), str(r.get("n_labeled", 0))]


def format_markdown(summary: dict) -> str:
    head = headline(summary)
    metrics = table_metrics(summary)
    order = standings(summary)
    basis, calibrated = ranking(summary)
    cols = cells(summary)
    acc = any(d.get("answerability_n") for d in summary["models"].values())
    n_records = sum(d["count"] for d in summary["models"].values())
    direction = "lower is better" if higher_is_better(head) is False else "higher is better"
    out = ["# Leaderboard", ""]
    if head is None:
        out += ["No per-record metric to rank by.", ""]
    elif calibrated:
        cal = summary["calibration"]
        conf = f"{100 * cal['confidence']:g}%"
        out += [f"{len(order)} model(s), {n_records} records, ranked by the **calibrated** mean of **{label(basis)}** "
                f"({'lower' if higher_is_better(basis) is False else 'higher'} is better): human labels "
                f"({cal['metrics'][basis]['human']}) correct the {'judge' if is_judged(basis) else 'metric'}'s bias by "
                "prediction-powered inference "
                f"(PPI++), {conf} intervals; calibration/calibration.md has every calibrated metric. Other "
                "means are uncalibrated, leaving out records without a value.", ""]
    else:
        out += [f"{len(order)} model(s), {n_records} records, ranked by mean **{label(head)}** ({direction}). "
                "Means leave out records without a value; per-target metrics use the first target, "
                "per-passage metrics the best passage (summary.json).", ""]
        out += [*(f"- {line}" for line in fallback_lines(summary)), ""] if fallback(summary) else []
    out += ["## Overall", ""]
    shown = ([head] if head else []) + [m for m in metrics if m != head]
    cal_head = [f"{basis} calibrated", f"{basis} {own_values(basis)}", "labels"] if calibrated else []
    rows = []
    for rank, model, d in order:
        vals = _calibrated_cells(summary, basis, model) if calibrated else []
        vals += [metric_value(m, d["metrics"].get(m)) for m in shown]
        if acc:
            vals.append(metric_value(ANS_ACC, d.get("answerability_accuracy")))
        rows.append(["–" if rank is None else str(rank), model, str(d["count"]), str(failed(d)), *vals])
    out += _md_table(["#", "model", "n", "errors", *cal_head, *shown, *([ANS_ACC] if acc else [])], rows, 2)
    from ragscale.report.slices import markdown_lines as slice_lines

    lost = slice_lines(summary)
    out += ([""] + lost[:-1]) if lost else []  # where a model loses: first after the ranking
    if len(cols) > 1:
        dims = [label for label, present in (("answerability", any(b == "answerability" for b, _, _ in cols)),
                                             ("turn (Turn 1: first turn; Turn >1: later turns)",
                                              any(b == "turn" for b, _, _ in cols))) if present]
        out += ["", "## By " + " and by ".join(dims), "",
                "Each cell: mean (n records with a value). "
                + ("AnsAcc: the share of records whose answerability the response handled right "
                   "(an IDK for UNANSWERABLE and CONVERSATIONAL questions, an answer otherwise). " if acc else "")
                + "leaderboard.csv has every metric for every cell."]
        for m in breakdown_metrics(summary, head):
            rows = []
            for rank, model, d in order:
                vals = []
                for b, key, _ in cols:
                    v, n = mean_n(cell(d, b, key), m)
                    vals.append(f"{metric_value(m, v)} ({n})")
                rows.append(["–" if rank is None else str(rank), model, *vals])
            out += ["", f"### {m}", ""] + _md_table(["#", "model", *[label for _, _, label in cols]], rows, 2)
    from ragscale.report.significance import markdown_lines

    sig = markdown_lines(summary)
    if calibrated:
        more = markdown_lines(calibrated_comparisons(summary), title="Significance, calibrated",
                              numbers="calibration/calibration.json")
        sig += ([""] if sig and more else []) + more
    from ragscale.report.jury import markdown_lines as jury_lines

    sig += jury_lines(summary)
    return "\n".join(out + ([""] + sig if sig else [])) + "\n"


def calibrated_comparisons(summary: dict) -> dict:
    """A summary whose ``significance`` block holds the calibration's comparisons (PPI++ paired
    differences), so the significance wording renders them."""
    cal = summary.get("calibration") if isinstance(summary, dict) else None
    if not isinstance(cal, dict) or not isinstance(cal.get("comparisons"), dict):
        return {}
    from ragscale.report.calibration import DIFF_METHOD  # here: calibration loads numpy, the leaderboard not

    block = {k: cal.get(k) for k in ("confidence", "alpha", "correction", "design")}
    block.update(method=DIFF_METHOD, metrics=cal["comparisons"])
    return {"significance": block}


def csv_rows(summary: dict) -> tuple[list[str], list[list]]:
    """leaderboard.csv's header and rows: every (model, cell) with every metric's mean and n."""
    metrics = table_metrics(summary)
    header = ["rank", "model_id", "breakdown", "cell", "count", "errors", *metrics, "answerability_accuracy",
              *[f"n_{m}" for m in metrics], "answerability_n"]
    rows: list[list] = []
    basis, calibrated = ranking(summary)
    if calibrated:
        header += [f"calibrated_{basis}", f"calibrated_{basis}_ci_low", f"calibrated_{basis}_ci_high",
                   f"calibrated_{basis}_labels"]
    for rank, model, d in standings(summary):
        extra: list = []
        if calibrated:
            r = summary["calibration"]["metrics"][basis]["models"].get(model) or {}
            c = r.get("calibrated") or {}
            lo, hi = c.get("ci") or ["", ""]
            extra = [c.get("mean", ""), lo, hi, r.get("n_labeled", 0)]
        for b, key, _ in cells(summary):
            c = cell(d, b, key)
            if c is None:
                continue
            means = ["" if c["metrics"].get(m) is None else f"{c['metrics'][m]:.6g}" for m in metrics]
            a = c.get("answerability_accuracy")
            rows.append(["" if rank is None else rank, model, b, key, c["count"], c["errors"], *means,
                         "" if a is None else f"{a:.6g}", *[c["n"].get(m, 0) for m in metrics],
                         c.get("answerability_n", 0), *(extra if b == "all" else [""] * len(extra))])
    return header, rows


def write_leaderboard(summary: dict, out_dir: str) -> dict[str, str]:
    """Write ``leaderboard.md`` and ``leaderboard.csv`` (and ``significance.csv`` when the summary
    has a significance block) into ``out_dir``; returns their paths."""
    from ragscale.report import significance

    paths = {"markdown": os.path.join(out_dir, "leaderboard.md"), "csv": os.path.join(out_dir, "leaderboard.csv")}
    with open(paths["markdown"], "w", encoding="utf-8") as fh:
        fh.write(format_markdown(summary))
    tables = {"csv": csv_rows(summary)}
    if isinstance(summary.get("significance"), dict):
        paths["significance"] = os.path.join(out_dir, "significance.csv")
        tables["significance"] = (significance.CSV_HEADER, significance.csv_rows(summary["significance"]))
    for key, (header, rows) in tables.items():
        with open(paths[key], "w", newline="", encoding="utf-8") as fh:
            w = csv_writer(fh)
            w.writerow(header)
            w.writerows(rows)
    return paths


def fallback_lines(summary: dict) -> list[str]:
    """Why the ranking is not by the first headline (empty when it is): one line per model that has
    no value of it, then which metric ranks instead."""
    passed = fallback(summary)
    if passed is None:
        return []
    first, why = passed
    head = headline(summary)
    lines = [f"{label(first)} undefined for {visible(model)}: {visible(reason)}" for model, reason in why.items()]
    if head != first:
        lines.append(f"ranked by {label(head)} instead: the next headline metric"
                     + (", defined for the most models" if missing(summary, head) else ""))
    return lines


def model_lines(summary: dict) -> list[str]:
    """One line per model, best first: rank, model, its headline score and n (the end of a run)."""
    head = headline(summary)
    rows = standings(summary)
    basis, calibrated = ranking(summary)
    if head is None or not rows:
        return []
    names = {m: console_name(m) for _, m, _ in rows}
    width = max(len(n) for n in names.values())
    out = []
    for rank, model, d in rows:
        line = f"{rank if rank is not None else '-':>3}. {names[model]:<{width}}  "
        if calibrated:
            cal, judge, labels = _calibrated_cells(summary, basis, model)
            out.append(line + f"{label(basis)} calibrated {cal}  ({own_values(basis)} {judge}, {labels} labels)")
            continue
        v, n = mean_n(d, head)
        out.append(line + f"{label(head)} {metric_value(head, v)}  (n={n})")
    return out
