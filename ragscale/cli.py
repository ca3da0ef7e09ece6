"""The ``ragscale`` command: dispatches to its subcommands, one module each in ragscale.commands
(run, scenarios, metrics, report, agree, compare, calibrate, plot, prompts, retrieval). ``ragscale
+scenario=mtrag ...`` (overrides with no command) is ``ragscale run``.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Sequence

from ragscale.commands import run
from ragscale.errors import UserError, did_you_mean

USAGE = """usage: ragscale COMMAND [ARGS]

commands:
  run       evaluate: ragscale run +scenario=mtrag [input=...] [output_dir=...] [key=value ...] [-m for sweeps]
  scenarios the scenarios: what each computes, its steps and its sample
  metrics   the metric catalog: names, aliases, what each needs: ragscale metrics [--family F]
  plot      compare runs: ragscale plot RUN_DIR [RUN_DIR ...] --output FILE.png
  report    (re)write a run's report.html: ragscale report RUN_DIR
  agree     judge-vs-human agreement: ragscale agree RUN_DIR --human FILE --pair human=metric
  compare   paired significance tests between two runs over the same tasks: ragscale compare RUN_A RUN_B
  calibrate human-calibrated (PPI++) means: ragscale calibrate RUN_DIR --human FILE --pair human=metric
  retrieval retrieval results against human qrels (MT-RAG's Recall@k, nDCG@k): ragscale retrieval RESULTS.jsonl --qrels FILE
  prompts   the judge prompts a run would send, tokens and cost (dry run): ragscale prompts +scenario=mtrag [--out FILE]

`ragscale COMMAND --help` for a command's options."""

# words a user tries for a command -> the command and what to say
COMMAND_HINTS = {"evaluate": ("run", "ragscale run evaluates"), "eval": ("run", "ragscale run evaluates"),
                 "score": ("run", "ragscale run evaluates"), "ls": ("metrics", "ragscale metrics lists them"),
                 "list": ("metrics", "ragscale metrics lists them")}


def subcommands() -> dict[str, Callable[[Sequence[str]], int]]:
    """The ``ragscale`` subcommands by name (each takes its arguments, returns its exit code)."""
    from ragscale.commands import agree, calibrate, compare, metrics, plot, prompts, report, retrieval, scenarios

    return {"run": run.main, "scenarios": scenarios.main, "metrics": metrics.main, "plot": plot.main,
            "report": report.main, "agree": agree.main, "compare": compare.main, "calibrate": calibrate.main,
            "prompts": prompts.main, "retrieval": retrieval.main}


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``ragscale`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        sys.exit(0 if argv else 2)
    try:
        commands = subcommands()
        if argv[0] in commands:
            sys.exit(commands[argv[0]](argv[1:]))
    except BrokenPipeError:  # `ragscale metrics | head`: the reader left, nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except UserError as e:  # e.g. a plugin that fails to load (ragscale.plugins), before any command starts
        print(f"ragscale: error: {e}", file=sys.stderr)
        sys.exit(2)
    if "=" in argv[0] or argv[0].startswith("-"):  # `ragscale +scenario=mtrag ...`: the run command
        sys.exit(run.main(argv, prog="ragscale"))
    if argv[0] in COMMAND_HINTS:
        command, why = COMMAND_HINTS[argv[0]]
        hint = f" (did you mean {command!r}? {why})"
    else:
        hint = f"{did_you_mean(argv[0], commands)}; ragscale --help lists the commands"
    print(f"ragscale: error: unknown command {argv[0]!r}{hint}", file=sys.stderr)
    sys.exit(2)
