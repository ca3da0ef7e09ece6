"""``ragscale run`` / ``python -m ragscale.run``: Hydra's command line over ragscale.driver.

The overrides are checked before Hydra sees them (ragscale.overrides): secrets refused in every
mode, and a bad override is one line in the user's words (exit code 2) for a single run and for
each value of a sweep, before Hydra writes ``.hydra/`` or ``multirun.yaml``.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

from ragscale.commands.text import table
from ragscale.errors import UserError

# the keys a user sets most, as `ragscale run --help` shows them (docs/configuration.md: all of them)
MAIN_KEYS = (
    ("+scenario=NAME", "what to compute (the scenarios above); optional with metrics=[...]"),
    ("input=PATH", "your data: a file, a glob, a directory or [a,b] (default: the scenario's sample)"),
    ("output_dir=DIR", "where the run writes (default outputs/<scenario>/<time>); the same DIR resumes"),
    ("limit=N", "the first N records of the run (all inputs, whole tasks first: every model's answer to a task)"),
    ("metrics=[a,b]", "metrics by name or alias (ragscale metrics lists them)"),
    ("columns.<field>=NAME", "your column for a field (or input.columns.<field>=NAME), a field one of\n{fields}"),
    ("judge=NAME", "the judge engine (above); judge.model=PATH_OR_ID its model"),
    ("steps=[a,b]", "run only these steps of the scenario (ragscale scenarios lists them)"),
    ("overwrite=true", "start afresh in an output_dir that holds a previous run"),
    ("cluster=NAME", "where the work runs (above)"),
    ("encoder=NAME", "the BERTScore encoder (ragscale/conf/encoder/)"),
    ("+judge_panel=NAME", "a jury of judges for RB_llm, or any judged metric with panel_metrics=[...] (ragscale/conf/judge_panel/)"),
    ("tracking=mlflow", "log the run to MLflow"),
    ("progress=lines", "auto, bars, lines or off"),
)

# Hydra's flags: those that take no value are moved before the overrides (so that `-m` may stand
# anywhere on the line: argparse rejects overrides on both sides of a flag); those with a value
# travel with it
_BARE_FLAGS = ("-m", "--multirun", "-r", "--run", "--resolve", "-h", "--help", "--hydra-help", "--version")
_VALUE_FLAGS = ("-c", "--cfg", "-p", "--package", "-cp", "--config-path", "-cn", "--config-name", "-cd",
                "--config-dir", "--experimental-rerun", "-sc", "--shell-completion")
_INFO_FLAGS, _INFO_VALUES = ("-i", "--info"), ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")
# Hydra runs in one of these modes (one at a time)
_MODE_FLAGS = ("-r", "--run", "-m", "--multirun", "-c", "--cfg", "-i", "--info", "-sc", "--shell-completion")
# flags that read another config, or print Hydra's own information: the overrides are not composed here
_NO_COMPOSE = ("-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir", "--experimental-rerun",
               "-sc", "--shell-completion", "--hydra-help", "--version", *_INFO_FLAGS)


def split_flags(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(Hydra's flags with their values, the overrides) of a ``ragscale run`` command line."""
    flags: list[str] = []
    overrides: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        name = a.split("=", 1)[0] if a.startswith("--") else a
        if a in _BARE_FLAGS or (name in _VALUE_FLAGS + _INFO_FLAGS and "=" in a):
            flags.append(a)
        elif a in _VALUE_FLAGS or a in _INFO_FLAGS:
            takes = a in _VALUE_FLAGS or (i + 1 < len(argv) and argv[i + 1] in _INFO_VALUES)
            flags.extend(argv[i:i + 2] if takes else [a])
            i += 1 if takes else 0
        elif a.startswith("-") and "=" not in a:
            raise UserError(f"unknown option {a!r} (ragscale run --help lists the options)")
        else:
            overrides.append(a)
        i += 1
    return flags, overrides


def run_help(prog: str = "ragscale run") -> str:
    """``ragscale run --help``: what a user picks (scenarios, judges, clusters) and the main keys."""
    from ragscale.columns import FIELDS
    from ragscale.overrides import group_options

    keys = [(k, d.format(fields=", ".join(FIELDS))) for k, d in MAIN_KEYS]
    return "\n".join([
        f"usage: {prog} [+scenario=NAME] [metrics=[a,b]] [input=PATH] [output_dir=DIR] [key=value ...] [-m]", "",
        "Evaluates the answers in input with a scenario's metrics or the metrics you name; any key=value",
        "overrides the configuration, -m runs one job per value of a sweep (limit=10,100 judge=local,openai).", "",
        "scenarios (+scenario=NAME; ragscale scenarios shows their steps and samples):",
        *table(list(group_options("scenario").items())), "",
        "judge engines (judge=NAME, default local):", *table(list(group_options("judge").items())), "",
        "cluster profiles (cluster=NAME, default local):", *table(list(group_options("cluster").items())), "",
        "main keys:", *table(keys), "",
        "metrics: ragscale metrics lists every metric (name, aliases, family, what it needs).",
        "every key and the override syntax: docs/configuration.md; other flags: --hydra-help.",
    ])


def _job(cfg: Any, prog: str) -> int:
    """One Hydra job: a run in its own output directory (a sweep's ``<output_dir>/<job number>``)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import open_dict

    from ragscale.exitcodes import INTERRUPTS
    from ragscale.driver import execute

    hc = HydraConfig.get()
    if hc.mode == RunMode.MULTIRUN:
        with open_dict(cfg):
            cfg.output_dir = hc.runtime.output_dir
        print(f"[ragscale] job {hc.job.num}: {' '.join(hc.overrides.task)} -> {cfg.output_dir}", flush=True)
    try:
        code = execute(cfg)
    except UserError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - one job's crash must not end a sweep
        print(f"{prog}: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if code in INTERRUPTS:  # a signal stops the whole command: a sweep starts no further job
        raise _Stopped(code)
    return code


class _Stopped(BaseException):
    """A job stopped by a signal (its code in ``args[0]``); a BaseException, which Hydra lets through."""


def _checked(flags: Sequence[str], overrides: Sequence[str]) -> str | None:
    """Checks a command line's overrides (ragscale.overrides); a UserError for a bad line. Returns the
    output_dir of a single run, locked here (ragscale.io.lock), else None."""
    from ragscale.io.lock import acquire, planned_dir
    from ragscale.overrides import check_overrides, check_sweep, refuse_secrets

    modes = [f for f in flags if f.split("=")[0] in _MODE_FLAGS]
    if len(modes) > 1:
        raise UserError(f"{' and '.join(modes)} cannot be combined: give one of -m, --cfg, --info")
    if any(f.split("=")[0] in _NO_COMPOSE for f in flags):
        refuse_secrets(overrides)
    elif "-m" in flags or "--multirun" in flags:
        check_sweep(overrides)
    else:  # one run: its output_dir locked before Hydra writes .hydra/ there (ragscale.io.lock)
        lock_dir = planned_dir(check_overrides(overrides))
        if lock_dir:
            acquire(lock_dir)
        return lock_dir
    return None


def main(argv: Sequence[str] | None = None, prog: str = "ragscale run") -> int:
    """Runs the command line's job(s). Returns 0 when every job scored every record, else the worst
    job's code (ragscale.exitcodes.worst); 2 for a bad command line."""
    import hydra

    from ragscale.config import register
    from ragscale.exitcodes import worst
    from ragscale.io.lock import release
    from ragscale.overrides import CONF_DIR, normalize

    try:
        flags, overrides = split_flags(list(sys.argv[1:] if argv is None else argv))
        if "-h" in flags or "--help" in flags:
            print(run_help(prog))
            return 0
        lock_dir = _checked(flags, overrides)
    except UserError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    register()
    codes: list[int] = []

    @hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
    def _task(cfg: Any) -> None:
        codes.append(_job(cfg, prog))

    saved = sys.argv
    sys.argv = [prog, *flags, *normalize(overrides)]
    try:
        _task()
    except _Stopped as e:
        codes.append(e.args[0])
    except SystemExit as e:  # Hydra's own exits (--cfg, --info, a sweeper's error)
        return e.code if isinstance(e.code, int) else 1
    finally:
        sys.argv = saved
        if lock_dir:
            release(lock_dir)
    if len(codes) > 1:
        failed = sum(c != 0 for c in codes)
        print(f"[ragscale] {len(codes)} jobs, {failed} failed", flush=True)
    return worst(codes)  # ragscale.exitcodes.SEVERITY: a refused job outranks a crash, a crash failed records


if __name__ == "__main__":
    sys.exit(main(prog="python -m ragscale.commands.run"))
