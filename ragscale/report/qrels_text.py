"""The tables of retrieval against qrels (rendering): one results file's or model's figures per
collection and weighted, and UMBRELA's agreement lines, as markdown. ``ragscale retrieval`` prints
them; a run writes them to retrieval.md (ragscale.report.qrels_sink)."""

from __future__ import annotations

from typing import Any

from ragscale.report.safe import md_cell


def tables(name: str, block: dict[str, Any], more: str = "--json") -> list[str]:
    """The markdown of one results file's or model's figures: the table against the human qrels,
    then, when filled, the table against the filled qrels and UMBRELA's agreement lines. ``more``:
    where the full list of the tasks without qrels is."""
    lines = table(md_cell(name), block, more)
    if block.get("without_ids"):
        lines.insert(-1, f"{block['without_ids']} record(s) without passage ids (contexts[].document_id): not scored")
    filled = block.get("filled")
    if "filled" in block and filled is None:
        lines += ["no UMBRELA grades in the records (step retrieval): the qrels were not filled", ""]
    elif filled is not None:
        lines += table(f"{md_cell(name)}, qrels filled by UMBRELA", filled, more) + fill_lines(filled)
    return lines


def table(name: str, block: dict[str, Any], more: str = "--json") -> list[str]:
    """One table: a row per collection (tasks, scored tasks, each figure), the weighted "all" row,
    and the tasks without qrels by id."""
    figures = block["measures"]
    lines = [f"## {name}", "", "| collection | tasks | scored | " + " | ".join(figures) + " |",
             "|---|---:|---:|" + "---:|" * len(figures)]

    def cells(row: dict) -> str:
        return " | ".join("–" if row[f] is None else f"{row[f]:.4f}" for f in figures)

    for coll, row in block["collections"].items():
        lines.append(f"| {md_cell(coll)} | {row['count']} | {row['scored']} | {cells(row)} |")
    lines.append(f"| all (weighted by tasks) | {block['all']['count']} | {block['all']['scored']} | {cells(block['all'])} |")
    missing = [q for row in block["collections"].values() for q in row["without_qrels"]]
    if missing:
        shown = ", ".join(md_cell(q) for q in missing[:5]) + (f" and {len(missing) - 5} more ({more})" if len(missing) > 5 else "")
        lines += ["", f"{len(missing)} task(s) without qrels, not scored: {shown}"]
    no_qrels = [c for c, row in block["collections"].items() if not row["qrels"]]
    if no_qrels:
        lines.append(f"no qrels for collection(s) {', '.join(map(md_cell, no_qrels))}: give COLLECTION=FILE")
    return lines + [""]


def _share(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def fill_lines(block: dict) -> list[str]:
    """UMBRELA's agreement with the human judgments and the holes it filled, in two lines."""
    f, a = block["fill"], block["agreement"]
    kappa = "undefined" if a["kappa"] is None else f"{a['kappa']:.3f}"
    binary = "undefined" if a["kappa_binary"] is None else f"{a['kappa_binary']:.3f}"
    return [f"UMBRELA against the human qrels on {a['pairs']} passage(s) both judged: Cohen's kappa {kappa} "
            f"(labels as they are), {binary} (relevant: human >= {a['human_relevant_from']}, "
            f"UMBRELA >= {a['umbrela_relevant_from']}); UMBRELA finds {_share(a['relevant_found'])} of the "
            f"human-relevant passages relevant and {_share(a['nonrelevant_found'])} of the others non-relevant",
            f"{f['holes']} hole(s) filled by UMBRELA ({f['holes_relevant']} relevant)"
            + (f"; {f['records_without_grades']} record(s) without UMBRELA grades" if f["records_without_grades"] else ""),
            ""]
