"""``ragscale scenarios``: each scenario, what it computes, its steps and its bundled sample."""

from __future__ import annotations

import os
import sys
from typing import Any, Sequence

from ragscale.commands.text import table
from ragscale.errors import OneLineParser


def scenario_config(name: str) -> Any:
    """A scenario's yaml merged over the scenarios it extends (its defaults list)."""
    from omegaconf import OmegaConf

    from ragscale.overrides import CONF_DIR

    cfg = OmegaConf.load(os.path.join(CONF_DIR, "scenario", f"{name}.yaml"))
    parents = [d for d in cfg.get("defaults") or [] if isinstance(d, str) and d != "_self_"]
    return OmegaConf.merge(*[scenario_config(p) for p in parents], cfg)


def main(argv: Sequence[str] | None = None) -> int:
    """``ragscale scenarios``: prints the table; 0."""
    from ragscale.overrides import group_options

    OneLineParser(prog="ragscale scenarios", description="The scenarios a run picks with +scenario=NAME: what "
                  "each computes, its steps and the sample it runs without input=.").parse_args(argv)
    rows = []
    for name, description in group_options("scenario").items():
        cfg = scenario_config(name)
        steps = ", ".join(cfg.get("steps") or []) or "none"
        rows += [(name, description), ("", f"steps: {steps}; sample: {cfg.get('sample')}")]
    print("\n".join(table(rows, indent="")))
    print("\nrun one: ragscale run +scenario=NAME [input=...] (ragscale metrics lists their metrics)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
