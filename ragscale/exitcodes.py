"""The exit codes of ``ragscale run`` (and of every job of a ``-m`` sweep), defined once here:
the runner returns them, the CLI exits with them, docs/exit-codes.md tabulates them. A CI job
can trust them: 0 is returned only when every input record was scored.
"""

from __future__ import annotations

OK = 0  # every record was scored
FAILED = 1  # the run stopped before it finished (a crash, an interrupt, records missing): re-run to resume
USAGE = 2  # a bad command line, config or input, refused before any work
RECORD_ERRORS = 3  # the run finished, but some records failed (each with its error in records.jsonl)
NOTHING_SCORED = 4  # the run finished with no scored record: the input held none, or every record failed

MEANING = {
    OK: "every record was scored",
    FAILED: "the run stopped before it finished; re-run the same command to resume",
    USAGE: "bad command line, config or input; nothing was run",
    RECORD_ERRORS: "the run finished, but some records failed",
    NOTHING_SCORED: "the run finished, but no record was scored (empty input, or every record failed)",
}


def finished(records_in: int, errored: int) -> int:
    """The exit code of a run that finished: OK, RECORD_ERRORS or NOTHING_SCORED."""
    if records_in == 0 or errored >= records_in:
        return NOTHING_SCORED
    return RECORD_ERRORS if errored else OK
