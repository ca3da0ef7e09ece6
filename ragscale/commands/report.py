"""``ragscale report RUN_DIR [--output PATH] [--worst N]`` (also ``python -m ragscale.report``): write
the run's HTML report (default ``RUN_DIR/report.html``, ragscale.report.html) and print its path.
Bad input: one line on stderr, exit code 2."""

from __future__ import annotations

import sys
from typing import Sequence

from ragscale.errors import OneLineParser, UserError


def main(argv: Sequence[str] | None = None) -> int:
    """Writes the report and prints its path; 0, or 2 for bad input."""
    p = OneLineParser(prog="ragscale report", description="Write a self-contained HTML report of a ragscale run.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a ragscale output_dir holding records.jsonl")
    p.add_argument("--output", "-o", default=None, help="report path (default RUN_DIR/report.html)")
    p.add_argument("--worst", type=int, default=5, metavar="N", help="lowest-scoring records shown per metric (default 5)")
    args = p.parse_args(argv)
    try:
        from ragscale.report.html import write_report

        path = write_report(args.run_dir, args.output, worst_n=args.worst)
    except UserError as exc:
        print(f"ragscale report: error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
