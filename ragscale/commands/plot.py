"""``ragscale plot RUN_DIR [RUN_DIR ...] --output FILE.png [--metrics m1,m2] [--by-model]`` (also
``python -m ragscale.plot``): boxplots comparing runs, one subplot per metric (ragscale.report.plots).
Bad input is reported as one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from ragscale.errors import OneLineParser, UserError


def build_parser() -> argparse.ArgumentParser:
    """The command's arguments."""
    p = OneLineParser(prog="ragscale plot",
                description="Compare ragscale runs: one boxplot per metric, one box per run dir.")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="ragscale output_dir(s) holding records.jsonl, or open-rag-eval results CSVs")
    p.add_argument("--output", "-o", default="metrics_comparison.png",
                   help="image to write (.png, .svg, .pdf; default metrics_comparison.png)")
    p.add_argument("--metrics", default=None,
                   help="comma-separated metric names (default: the summary metrics with numeric values)")
    p.add_argument("--by-model", action="store_true", help="one box per run x model instead of per run")
    p.add_argument("--cluster-by", default="conversation_id",
                   help="the field whose records the intervals resample together (default conversation_id; none: each alone)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Writes the plot and says what it holds; 0, or 2 for bad input."""
    args = build_parser().parse_args(argv)
    metrics = None
    if args.metrics is not None:
        metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
        if not metrics:
            print("ragscale plot: error: --metrics is empty", file=sys.stderr)
            return 2
    try:
        from ragscale.report.plots import plot_runs
        from ragscale.report.slices import cluster_field

        stats = plot_runs(args.run_dirs, args.output, metrics=metrics, by_model=args.by_model,
                          cluster_by=cluster_field(args.cluster_by))
    except UserError as exc:
        print(f"ragscale plot: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.output} ({len(stats)} metrics: {', '.join(stats)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
