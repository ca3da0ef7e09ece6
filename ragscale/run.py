"""``python -m ragscale.run +scenario=mtrag [input=...] [output_dir=...] [-m ...]``: the run
command (the same as ``ragscale run``; ragscale.commands.run). ``execute``, ``compose`` and
``plan_run`` are importable from here as before."""

from __future__ import annotations

import sys

from ragscale.plan import compose, plan_run
from ragscale.driver import execute

validate = plan_run  # the name of earlier releases

__all__ = ["compose", "execute", "plan_run", "validate", "main"]


def main() -> None:
    """Entry point of ``python -m ragscale.run``."""
    from ragscale.commands.run import main as run_main

    sys.exit(run_main(sys.argv[1:], prog="python -m ragscale.run"))


if __name__ == "__main__":
    main()
