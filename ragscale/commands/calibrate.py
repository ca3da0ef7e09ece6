"""``ragscale calibrate RUN_DIR --human FILE [--pair HUMAN=METRIC] [--map HUMAN=A..B:C..D]``
(also ``python -m ragscale.calibrate``)

Human-calibrated estimates of a finished run (ragscale.report.calibration, PPI++): per paired
metric and model the naive judge mean, the human-only mean and the calibrated estimate, each with
its interval, cluster-robust over whole conversations (``--cluster-by``, default conversation_id;
none: every record alone, ppi-python's intervals). Writes RUN_DIR/calibration/calibration.{json,csv,md},
adds the block to summary.json and rewrites leaderboard.md/.csv (ranked by the calibrated mean) and
report.html. Bad input is one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from ragscale.errors import OneLineParser, UserError
from ragscale.report.agreement_io import HUMAN_FILE_HELP


def build_parser() -> argparse.ArgumentParser:
    """The command's arguments."""
    p = OneLineParser(prog="ragscale calibrate",
                      description="Human-calibrated (prediction-powered, PPI++) estimates of a run's model means.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="ragscale output_dir holding records.jsonl and summary.json")
    p.add_argument("--human", required=True, metavar="FILE", help=HUMAN_FILE_HELP)
    p.add_argument("--pair", action="append", default=[], metavar="HUMAN=METRIC",
                   help="calibrate run metric METRIC with human metric HUMAN (repeatable); default: same names")
    p.add_argument("--map", action="append", default=[], metavar="HUMAN=SPEC",
                   help="how HUMAN's labels map onto the metric's scale: A..B:C..D (linear, e.g. 1..4:0..1) "
                        "or v1:m1,v2:m2,... (a table); required when the scales differ")
    p.add_argument("--min-labels", type=int, default=20, help="labels a model needs (default 20)")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of the intervals (default 0.95)")
    p.add_argument("--cluster-by", default="conversation_id",
                   help="the field whose records are one unit of the intervals (default conversation_id; none: each "
                        "record alone)")
    p.add_argument("--no-update", action="store_true",
                   help="only write RUN_DIR/calibration/; leave summary.json, the leaderboard and report.html alone")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Calibrates the run and says what it wrote; 0, or 2 for bad input."""
    args = build_parser().parse_args(argv)
    try:
        paths = calibrate_run(args)
    except (UserError, OSError) as exc:
        print(f"ragscale calibrate: error: {exc}", file=sys.stderr)
        return 2
    print(f"\n[ragscale] wrote {', '.join(paths)}")
    report = os.path.join(args.run_dir, "report.html")
    if not args.no_update and os.path.isfile(report):
        print(f"[ragscale] open the report: {os.path.abspath(report)}")
    return 0


def calibrate_run(args: argparse.Namespace) -> list[str]:
    """Compute, print and write the calibration of ``args.run_dir``; returns the paths written."""
    from ragscale.config import CalibrationConf, SignificanceConf
    from ragscale.report.calibration import calibrate, read_summary, to_markdown, write_outputs
    from ragscale.report.calibration_settings import check_settings
    from ragscale.report.leaderboard import model_lines, write_leaderboard
    from ragscale.report.slices import cluster_field

    settings = CalibrationConf(human=args.human, pairs=list(args.pair), map=list(args.map),
                               min_labels=args.min_labels, confidence=args.confidence)
    check_settings(settings, prefix="--")
    summary = read_summary(args.run_dir)
    significance = SignificanceConf(**{k: v for k, v in (summary.get("significance") or {}).items()
                                       if k in ("alpha", "correction")})
    block = calibrate(args.run_dir, args.human, settings.pairs, settings.map, settings, significance, summary,
                      cluster_field(args.cluster_by))
    print(to_markdown(block))
    written = sorted(write_outputs(block, os.path.join(args.run_dir, "calibration")).values())
    if args.no_update:
        return written
    summary["calibration"] = block
    path = os.path.join(args.run_dir, "summary.json")
    with open(path, "w") as fh:
        json.dump(summary, fh, indent=2)
    written.append(path)
    written += [p for k, p in sorted(write_leaderboard(summary, args.run_dir).items())]
    print("\n".join(model_lines(summary)))
    report = os.path.join(args.run_dir, "report.html")
    if os.path.isfile(report):
        from ragscale.report.html import write_report

        written.append(write_report(args.run_dir))
    return written


if __name__ == "__main__":
    sys.exit(main())
