"""``ragscale agree RUN_DIR --human FILE [--pair HUMAN=METRIC ...]`` (also ``python -m ragscale.agree``)

Judge-vs-human agreement of a run's per-record metrics (ragscale.report.agreement): Spearman,
Kendall, Cohen's kappa and accuracy with bootstrap confidence intervals, per model and overall;
the bootstrap resamples whole conversations (``--cluster-by``, default conversation_id; none: each
record alone). Writes agreement.{json,csv,md,png} (default RUN_DIR/agreement/) and prints the table. Bad input is
one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from ragscale.errors import OneLineParser, UserError
from ragscale.report.agreement_io import HUMAN_FILE_HELP


def build_parser() -> argparse.ArgumentParser:
    """The command's arguments."""
    p = OneLineParser(prog="ragscale agree",
                description="Agreement between a ragscale run's metrics and human ratings or labels.")
    p.add_argument("run_dir", metavar="RUN_DIR",
                   help="ragscale output_dir holding records.jsonl, or an open-rag-eval results CSV")
    p.add_argument("--human", required=True, metavar="FILE", help=HUMAN_FILE_HELP)
    p.add_argument("--pair", action="append", default=[], metavar="HUMAN=METRIC",
                   help="compare human metric HUMAN with run metric METRIC (repeatable); default: same names")
    p.add_argument("--output", "-o", default=None,
                   help="output folder (default RUN_DIR/agreement; for a results CSV, <its name>/agreement beside it)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap replicates (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--cluster-by", default="conversation_id",
                   help="the field whose records are resampled together (default conversation_id; none: each "
                        "record alone)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Computes, writes and prints the agreement; 0, or 2 for bad input."""
    args = build_parser().parse_args(argv)
    if args.bootstrap < 0:
        print("ragscale agree: error: --bootstrap must be >= 0", file=sys.stderr)
        return 2
    try:
        from ragscale.report.agreement import agreement, to_markdown, write_outputs
        from ragscale.report.slices import cluster_field

        result = agreement(args.run_dir, args.human, args.pair, n_boot=args.bootstrap, seed=args.seed,
                           cluster_by=cluster_field(args.cluster_by))
        default = args.run_dir if os.path.isdir(args.run_dir) else os.path.splitext(args.run_dir)[0]
        paths = write_outputs(result, args.output or os.path.join(default, "agreement"))
    except UserError as exc:
        print(f"ragscale agree: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. an unreadable records.jsonl or an output folder that cannot be written
        print(f"ragscale agree: error: {exc}", file=sys.stderr)
        return 2
    print(to_markdown(result))
    print(f"\nwrote {', '.join(sorted(paths.values()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
