"""``ragscale metrics [--family F] [--json]``: every metric a run can compute, and its names
(the rows of ragscale.catalog)."""

from __future__ import annotations

import json
import sys
from typing import Sequence

from ragscale.errors import OneLineParser, UserError


def main(argv: Sequence[str] | None = None, prog: str = "ragscale metrics") -> int:
    """Prints the catalog as a table (``--json``: one object per metric); 0, or 2 for an unknown family."""
    from ragscale.catalog import format_rows, rows

    p = OneLineParser(prog=prog, description="List the metrics ragscale computes: their names and aliases (any of "
                      "them works in metrics=[...] and ragscale.evaluate(metrics=...)), family, whether a judge "
                      "computes them, what they need besides the answer, direction and range.")
    p.add_argument("--family", help="only this family (step), e.g. algorithmic, ragas, custom")
    p.add_argument("--json", action="store_true", help="one JSON object per metric, all columns")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        items = rows(args.family)
    except UserError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        for r in items:
            print(json.dumps(r, ensure_ascii=False))
        return 0
    print(format_rows(items))
    print(f"\n{len(items)} metrics. Choose them by name: ragscale run input=FILE 'metrics=[faithfulness,RougeL]', "
          "or ragscale.evaluate(data, metrics=[...]); docs/metrics.md defines each.")
    return 0


if __name__ == "__main__":
    sys.exit(main(prog="python -m ragscale.commands.metrics"))
