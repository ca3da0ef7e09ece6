"""``ragscale compare RUN_A RUN_B [--metrics M1,M2] [--json]`` (also ``python -m ragscale.compare``)

Whether two separate runs over the same tasks differ (ragscale.report.compare: their records paired
by task, the same paired tests as a sweep's significance block). Prints the comparison (``--json``:
the block as summary.json would hold it). Bad input is one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from ragscale.errors import OneLineParser, UserError


def build_parser() -> argparse.ArgumentParser:
    """The command's arguments."""
    p = OneLineParser(prog="ragscale compare",
                      description="Paired significance tests between two ragscale runs over the same tasks.")
    p.add_argument("run_a", metavar="RUN_A", help="a ragscale output_dir holding records.jsonl, or an open-rag-eval results CSV")
    p.add_argument("run_b", metavar="RUN_B", help="another run over the same tasks (an output_dir or a results CSV)")
    p.add_argument("--metrics", default=None,
                   help="comma-separated metric names (default: the leaderboard's headline and its components)")
    p.add_argument("--json", action="store_true", help="print the significance block as JSON")
    p.add_argument("--resamples", type=int, default=None, help="bootstrap resamples and sign flips (default 10000)")
    p.add_argument("--confidence", type=float, default=None, help="confidence of the intervals (default 0.95)")
    p.add_argument("--alpha", type=float, default=None, help="significance level (default 0.05)")
    p.add_argument("--correction", default=None, help="holm (default), bonferroni, none or bh (Benjamini-Hochberg)")
    p.add_argument("--seed", type=int, default=None, help="resampling seed (default 0)")
    p.add_argument("--cluster-by", default="conversation_id",
                   help="the field whose records are resampled together (default conversation_id; none: each task alone)")
    p.add_argument("--slices", default=None,
                   help="comma-separated fields to slice by (e.g. Collection,answerability,turn): where a run loses")
    p.add_argument("--min-n", type=int, default=10, help="the fewest paired tasks a slice needs to be tested (default 10)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Compares the runs and prints the block; 0, or 2 for bad input."""
    args = build_parser().parse_args(argv)
    prog = "ragscale compare"
    try:
        from ragscale.config import SignificanceConf
        from ragscale.report.compare import compare_runs
        from ragscale.report.significance import check_settings, markdown_lines

        settings = SignificanceConf()
        for key in ("resamples", "confidence", "alpha", "correction", "seed"):
            if getattr(args, key) is not None:
                setattr(settings, key, getattr(args, key))
        check_settings(settings, prefix="--")
        metrics = None
        if args.metrics is not None:
            metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
            if not metrics:
                raise UserError("--metrics is empty")
        from ragscale.config import SlicesConf
        from ragscale.report.slices import check_slices, cluster_field

        slices = check_slices(SlicesConf(by=[f.strip() for f in (args.slices or "").split(",") if f.strip()],
                                         min_n=args.min_n))
        block = compare_runs(args.run_a, args.run_b, metrics=metrics, settings=settings,
                             cluster_by=cluster_field(args.cluster_by), slices=slices)
    except UserError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(block, indent=2))
    else:
        from ragscale.report.slices import markdown_lines as slice_lines

        print("\n".join(markdown_lines({"significance": block}) + ["", *slice_lines(block)]).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
