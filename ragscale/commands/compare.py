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
    p.add_argument("run_a", metavar="RUN_A", help="a ragscale output_dir holding records.jsonl")
    p.add_argument("run_b", metavar="RUN_B", help="another output_dir over the same tasks")
    p.add_argument("--metrics", default=None,
                   help="comma-separated metric names (default: the leaderboard's headline and its components)")
    p.add_argument("--json", action="store_true", help="print the significance block as JSON")
    p.add_argument("--resamples", type=int, default=None, help="bootstrap resamples and sign flips (default 10000)")
    p.add_argument("--confidence", type=float, default=None, help="confidence of the intervals (default 0.95)")
    p.add_argument("--alpha", type=float, default=None, help="significance level (default 0.05)")
    p.add_argument("--correction", default=None, help="holm (default), bonferroni or none")
    p.add_argument("--seed", type=int, default=None, help="resampling seed (default 0)")
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
        block = compare_runs(args.run_a, args.run_b, metrics=metrics, settings=settings)
    except UserError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(block, indent=2))
    else:
        print("\n".join(markdown_lines({"significance": block})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
