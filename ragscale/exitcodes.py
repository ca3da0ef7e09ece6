"""The exit codes of ``ragscale run`` (and of every job of a ``-m`` sweep), defined once here:
the driver returns them, the CLI exits with them, run.json's ``status`` names them, the console
and report.html word them (:func:`outcome`), docs/exit-codes.md tabulates them. A CI job can
trust them: 0 is returned only when every input record was scored.
"""

from __future__ import annotations

import re
import signal
from typing import Iterable

OK = 0  # every record was scored
FAILED = 1  # the run stopped before it finished (a crash, records missing): re-run to resume
USAGE = 2  # a bad command line, config or input, refused before any work
RECORD_ERRORS = 3  # the run finished, but some records failed (each with its error in records.jsonl)
NOTHING_SCORED = 4  # the run finished with no scored record: the input held none, or every record failed
INCOMPLETE = 5  # every record was scored, but an output (an export, the report, agreement...) failed wholly or partly

# a run stopped by a signal (Ctrl-C, SIGTERM as Kubernetes, Slurm and `ray job stop` send, SIGHUP as a
# closed terminal sends) exits with 128 + the signal's number, as a shell reports a process the signal
# killed (130, 143, 129); run.json's status is ``interrupted`` and its failure ``interrupted by SIGTERM``
INTERRUPTS = {128 + int(s): s.name for s in (signal.SIGINT, getattr(signal, "SIGTERM", None),
                                              getattr(signal, "SIGHUP", None)) if s is not None}
INTERRUPTED = "interrupted"

MEANING = {
    OK: "every record was scored",
    FAILED: "the run stopped before it finished; re-run the same command to resume",
    USAGE: "bad command line, config or input; nothing was run",
    RECORD_ERRORS: "the run finished, but some records failed",
    NOTHING_SCORED: "the run finished, but no record was scored (empty input, or every record failed)",
    INCOMPLETE: "the records were scored, but an output was not written (wholly or partly)",
    **{code: f"the run was stopped by {name}; re-run the same command to resume" for code, name in INTERRUPTS.items()},
}
# run.json's ``status`` of a run that ended with each code (a refused run writes no run.json)
STATUS = {OK: "ok", FAILED: "failed", RECORD_ERRORS: "record_errors", NOTHING_SCORED: "nothing_scored",
          INCOMPLETE: "outputs_incomplete", **{code: INTERRUPTED for code in INTERRUPTS}}
STOPPED = ("failed", INTERRUPTED)  # the statuses of a run that stopped before it finished: re-run to resume
# the worst first: what a sweep (``-m``) exits with when its jobs ended differently
SEVERITY = (*INTERRUPTS, USAGE, FAILED, NOTHING_SCORED, INCOMPLETE, RECORD_ERRORS, OK)


def finished(records_in: int, errored: int) -> int:
    """The exit code of a run that finished: OK, RECORD_ERRORS or NOTHING_SCORED."""
    if records_in == 0 or errored >= records_in:
        return NOTHING_SCORED
    return RECORD_ERRORS if errored else OK


def interrupted(signum: int) -> str:
    """run.json's ``failure`` of a run stopped by signal ``signum``: ``interrupted by SIGTERM``."""
    return f"{INTERRUPTED} by {signal.Signals(signum).name}"


def of_run(failure: str | None, records: dict, outputs_failed: Iterable[str] | None = None) -> int:
    """The exit code of a run from run.json's ``failure`` and ``records`` counts (``in``,
    ``errored``, ``missing``): 128 + the signal for a run a signal stopped (:func:`interrupted`),
    FAILED when it stopped otherwise or left records out, else :func:`finished`, or INCOMPLETE when
    an output failed (``outputs_failed``, run.json's: what failed) and some record was scored."""
    m = re.fullmatch(rf"{INTERRUPTED} by (SIG\w+)", failure or "")
    if m and m.group(1) in INTERRUPTS.values():
        return next(code for code, name in INTERRUPTS.items() if name == m.group(1))
    if failure or records.get("missing"):
        return FAILED
    code = finished(int(records.get("in") or 0), int(records.get("errored") or 0))
    # an output not written (run.json ``outputs_failed``): INCOMPLETE, unless nothing was scored to write
    return INCOMPLETE if outputs_failed and code != NOTHING_SCORED else code


def worst(codes: Iterable[int]) -> int:
    """The most severe of several jobs' codes (SEVERITY order: USAGE > FAILED > NOTHING_SCORED >
    INCOMPLETE > RECORD_ERRORS > OK); a code outside the table counts as FAILED; OK for no job."""
    rank = {code: i for i, code in enumerate(SEVERITY)}
    return min((c if c in rank else FAILED for c in codes), key=lambda c: rank[c], default=OK)


def failed(d: dict) -> int:
    """A model's (or the run's) failed records in summary.json: an error, or a judge engine that gave
    no output after its retries (``errors`` + ``judge_failed``). What the per-model error columns,
    the status line and the exit code count (docs/exit-codes.md)."""
    return int(d.get("errors") or 0) + int(d.get("judge_failed") or 0)


def outcome(code: int, records_in: int, errored: int, judge_failed: int = 0) -> str:
    """How the console's last lines and report.html's status line word a finished run's code:
    "ok" only when every record was scored. ``judge_failed``: how many of the ``errored``
    records failed because their judge engine did (run.json's ``records.judge_failed``)."""
    why = f" (the judge engine failed on {judge_failed})" if judge_failed else ""
    if code == OK:
        return "ok"
    if code == RECORD_ERRORS:
        return f"{errored} of {records_in} records failed{why}"
    if code == NOTHING_SCORED:
        return ("nothing scored: the input held no record" if records_in == 0
                else f"nothing scored: all {records_in} records failed{why}")
    if code == INCOMPLETE:
        return "outputs incomplete: an output was not written (run.json's outputs_failed says which)" \
            + (f"; {errored} of {records_in} records failed{why}" if errored else "")
    return STATUS.get(code, "failed")
