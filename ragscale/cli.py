"""The ``ragscale`` command: ``run`` (Hydra overrides, ``-m`` for sweeps), ``plot``,
``report``, ``agree``, ``compare``, ``calibrate``, ``prompts``. A thin layer over ragscale.runner / ragscale.report: every
subcommand is also ``python -m ragscale.<name>``.

Secrets never reach a file: every ``key=value`` argument, in every mode (``-m`` included,
each value of a sweep), is checked before Hydra writes ``.hydra/`` or ``multirun.yaml``.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Callable, Sequence

from ragscale.errors import UserError

USAGE = """usage: ragscale COMMAND [ARGS]

commands:
  run     evaluate: ragscale run +scenario=mtrag [input=...] [output_dir=...] [key=value ...] [-m for sweeps]
  plot    compare runs: ragscale plot RUN_DIR [RUN_DIR ...] --output FILE.png
  report  (re)write a run's report.html: ragscale report RUN_DIR
  agree   judge-vs-human agreement: ragscale agree RUN_DIR --human FILE --pair human=metric
  compare paired significance tests between two runs over the same tasks: ragscale compare RUN_A RUN_B
  calibrate human-calibrated (PPI++) means: ragscale calibrate RUN_DIR --human FILE --pair human=metric
  prompts the judge prompts a run would send, tokens and cost (dry run): ragscale prompts +scenario=mtrag [--out FILE]

`ragscale COMMAND --help` for a command's options."""

_SWEEP_SPLIT = re.compile(r"[,()\[\]{}\s]+")
# Hydra's flags that take no value: moved before the overrides, so that `-m` may stand
# anywhere on the line (argparse rejects overrides on both sides of a flag).
_BARE_FLAGS = ("-m", "--multirun", "-r", "--run", "--resolve", "-h", "--help", "--hydra-help", "--version")


def secret_override(arg: str) -> str | None:
    """The key of a ``key=value`` argument whose key or value (any value of a sweep) is or
    looks like a secret; None otherwise."""
    from ragscale.config import SECRET_KEY_NAME, looks_like_env_name, looks_like_secret

    if "=" not in arg:
        return None
    key, _, value = arg.partition("=")
    key = key.lstrip("+~")
    name = key.rsplit(".", 1)[-1]
    parts = [value, *(p.strip("'\"") for p in _SWEEP_SPLIT.split(value) if p)]
    if SECRET_KEY_NAME.search(name) and value.strip() not in ("", "null"):
        return key
    if any(looks_like_secret(p) for p in parts):
        return key
    if name == "api_key_env" and value and not all(looks_like_env_name(p) for p in parts[1:] or [value]):
        return key
    return None


def check_overrides(argv: Sequence[str]) -> None:
    """Refuse secrets on the command line (every mode), then, for a single run, compose once
    so that a bad override is a one-line UserError instead of Hydra's report."""
    from ragscale.config import secret_paths

    for a in argv:
        key = secret_override(a)
        if key is not None:  # Hydra would write it to .hydra/ or multirun.yaml before anything could refuse it
            raise UserError(f"refusing {key} on the command line: its value is or looks like a secret (not shown); "
                            "secrets are read from environment variables only (e.g. judge.options.api_key_env=MY_KEY_VAR)")
    if any(a.startswith("-") for a in argv):  # -m, --help, --cfg ...: Hydra composes each job itself
        return
    from omegaconf import OmegaConf

    from ragscale.plan import compose

    try:
        cfg = compose(list(argv))
    except Exception as e:  # noqa: BLE001 - Hydra/OmegaConf raise several exception types
        parts = [str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__]
        cause = e.__cause__ or e.__context__
        if cause is not None and str(cause).strip():
            parts.append(str(cause).strip().splitlines()[0])
        raise UserError("invalid override: " + " ".join(parts)) from None
    leaked = secret_paths(OmegaConf.to_container(cfg, resolve=False))  # a key pasted into a conf/*.yaml file
    if leaked:
        raise UserError(f"refusing to run: config value(s) {', '.join(leaked)} look like secrets (not shown); "
                        "secrets are read from environment variables only")


def _job(cfg: Any) -> int:
    """One Hydra job: a run in its own output directory (a sweep's ``<output_dir>/<job number>``)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import open_dict

    from ragscale.runner import execute

    hc = HydraConfig.get()
    if hc.mode == RunMode.MULTIRUN:
        with open_dict(cfg):
            cfg.output_dir = hc.runtime.output_dir
        print(f"[ragscale] job {hc.job.num}: {' '.join(hc.overrides.task)} -> {cfg.output_dir}", flush=True)
    try:
        return execute(cfg)
    except UserError as e:
        print(f"ragscale: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - one job's crash must not end a sweep
        print(f"ragscale: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


def run_main(argv: Sequence[str], prog: str = "ragscale run") -> int:
    """``ragscale run`` / ``python -m ragscale.run``: Hydra's command line over ragscale.runner.
    Returns 0 when every job succeeded, else the worst job's code (2: bad input or config)."""
    import hydra

    from ragscale.config import register
    from ragscale.plan import CONF_DIR

    register()
    try:
        check_overrides(argv)
    except UserError as e:
        print(f"ragscale: error: {e}", file=sys.stderr)
        return 2
    codes: list[int] = []

    @hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
    def _task(cfg: Any) -> None:
        codes.append(_job(cfg))

    saved = sys.argv
    sys.argv = [prog, *[a for a in argv if a in _BARE_FLAGS], *[a for a in argv if a not in _BARE_FLAGS]]
    try:
        _task()
    except SystemExit as e:  # Hydra's own errors (a bad override in a sweep) and --help
        return e.code if isinstance(e.code, int) else 1
    finally:
        sys.argv = saved
    if len(codes) > 1:
        failed = sum(c != 0 for c in codes)
        print(f"[ragscale] {len(codes)} jobs, {failed} failed", flush=True)
    return max(codes, default=0)


def _subcommands() -> dict[str, Callable[[Sequence[str]], int]]:
    from ragscale import agree, calibrate, compare, plot, prompts
    from ragscale.report import __main__ as report

    return {"run": run_main, "plot": plot.main, "report": report.main, "agree": agree.main, "compare": compare.main,
            "calibrate": calibrate.main, "prompts": prompts.main}


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``ragscale`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        sys.exit(0 if argv else 2)
    commands = _subcommands()
    if argv[0] in commands:
        sys.exit(commands[argv[0]](argv[1:]))
    if "=" in argv[0] or argv[0].startswith("-"):  # `ragscale +scenario=mtrag ...`: the run command
        sys.exit(run_main(argv))
    from ragscale.errors import did_you_mean

    print(f"ragscale: error: unknown command {argv[0]!r}{did_you_mean(argv[0], commands)}\n\n{USAGE}", file=sys.stderr)
    sys.exit(2)
