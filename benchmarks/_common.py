"""Shared by the benchmarks: JSON output to stdout and, optionally, a file."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, Callable


def emit(result: dict, out: str | None) -> None:
    """Print ``result`` as indented JSON and write it to ``out`` when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as fh:
            fh.write(text + "\n")


def run_cli(doc: str, add_cli_args: Callable[[argparse.ArgumentParser], None], main: Callable[[Any], Any]) -> None:
    """A benchmark's command line: its docstring as the help, its arguments, then ``main(args)``."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cli_args(parser)
    main(parser.parse_args())


def judge_cli(doc: str, input_default: str, records: int, judges: list[str],  # noqa: ANN201
              more: list[str] = (), rounds: bool = False):
    """The judge benchmarks' shared command line: input, records, judge config and overrides,
    judges (default ``judges``; ``more`` may be chosen too), batch size, output file.
    Returns (parser, parsed args)."""
    import argparse

    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=input_default)
    ap.add_argument("--records", type=int, default=records)
    ap.add_argument("--judge", default="local", help="a conf/judge/*.yaml name")
    ap.add_argument("--set", action="append", default=[], help="Hydra override, e.g. judge.model=/path")
    ap.add_argument("--judges", nargs="+", default=judges, choices=[*judges, *more])
    ap.add_argument("--batch-size", type=int, default=32, help="records per judge-actor call (cluster.judge.batch_size)")
    ap.add_argument("--out", default=None)
    if rounds:
        ap.add_argument("--rounds", action="store_true",
                        help="the judge actor's round path even for an engine that streams (vLLM), one batch at a time")
    return ap, ap.parse_args()


def judge_engine(scenario: str, args) -> tuple:  # noqa: ANN001
    """(composed config, resolved engine kwargs) of ``--judge`` and ``--set`` for a scenario."""
    from omegaconf import OmegaConf

    from ragscale.actors.engines import resolve
    from ragscale.run import compose

    cfg = compose([f"+scenario={scenario}", f"judge={args.judge}", *args.set])
    return cfg, resolve(OmegaConf.to_container(cfg.judge, resolve=True),
                        OmegaConf.to_container(cfg.cluster.judge, resolve=True))
