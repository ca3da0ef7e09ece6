"""How ragscale.exitcodes.outcome words a run's exit code on the console's last lines and in
report.html's status line: an incomplete run says which output file to read and how many records
failed, and a code the table has no word for reads as ``failed``."""

from __future__ import annotations

import pytest

from ragscale import exitcodes

INCOMPLETE = "outputs incomplete: an output was not written (run.json's outputs_failed says which)"


@pytest.mark.parametrize("records_in, errored, judge_failed, words", [
    (5, 0, 0, INCOMPLETE),
    (5, 2, 0, f"{INCOMPLETE}; 2 of 5 records failed"),
    (5, 2, 1, f"{INCOMPLETE}; 2 of 5 records failed (the judge engine failed on 1)"),
])
def test_an_incomplete_run_names_run_json_and_its_failed_records(records_in, errored, judge_failed, words):
    assert exitcodes.outcome(exitcodes.INCOMPLETE, records_in, errored, judge_failed) == words


@pytest.mark.parametrize("code", [exitcodes.FAILED, exitcodes.USAGE, 99])
def test_a_stopped_run_and_a_code_outside_the_table_read_as_failed(code):
    assert exitcodes.outcome(code, 5, 0) == "failed"
