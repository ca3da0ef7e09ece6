"""``ragscale prompts [KEY=VALUE ...] [--out FILE] [--price-in USD --price-out USD]`` (also
``python -m ragscale.dryrun``): the dry run (ragscale.dryrun) writes every prompt a run would send
to its judge engine as JSONL and prints per judge the prompts, tokens and cost; docs/prompts.md.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Sequence

from ragscale.dryrun import dry_run, format_table
from ragscale.errors import OneLineParser, UserError


def build_parser() -> OneLineParser:
    """The command's arguments."""
    p = OneLineParser(prog="ragscale prompts",
                      description="Dry run: write every prompt a run would send to its judge engine (after the judge "
                                  "cache) as JSONL, and print per judge the prompts, tokens and cost. No engine is "
                                  "loaded, no Ray started.")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="Hydra overrides, as for ragscale run")
    p.add_argument("--out", default="prompts.jsonl", metavar="FILE", help="the JSONL file to write (default prompts.jsonl)")
    p.add_argument("--price-in", type=float, default=None, metavar="USD", help="USD per million prompt tokens")
    p.add_argument("--price-out", type=float, default=None, metavar="USD", help="USD per million completion tokens")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``ragscale prompts`` / ``python -m ragscale.dryrun``: 0 done, 2 bad config or input."""
    args = build_parser().parse_intermixed_args(argv)
    prog = "ragscale prompts"
    try:
        if (args.price_in is None) != (args.price_out is None):
            raise UserError("--price-in and --price-out go together (USD per million prompt and completion tokens)")
        for name in ("price_in", "price_out"):
            value = getattr(args, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise UserError(f"--{name.replace('_', '-')} must be a number >= 0, got {value}")
        from ragscale.overrides import check_overrides

        cfg = check_overrides(args.overrides)  # secrets refused, a bad override is one line
        path = os.path.abspath(args.out)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                result = dry_run(cfg, fh)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    except UserError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    print(f"[ragscale] {result.records} records; judge cache: {', '.join(result.cache_paths) or 'none'}")
    if not result.judges:
        print("[ragscale] this configuration runs no LLM judge: no prompts to send")
    else:
        print("\n".join(format_table(result, args.price_in, args.price_out)))
    print(f"[ragscale] open the prompts: {path} ({result.prompts} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
