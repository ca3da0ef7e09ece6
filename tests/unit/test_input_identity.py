"""What resume compares of an input file (ragscale.io.output.input_identity, issue 37): the content's
sha256 (streamed in chunks: the same digest as hashing the file at once), the size, the modification
time recorded; and for an earlier size, the hash of that prefix and whether the earlier content ended
its last line, which together tell records appended to the file from any other change. A resume
state that is not one is refused in one line."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from ragscale.errors import UserError
from ragscale.io import output


def test_the_identity_of_a_file(tmp_path, monkeypatch):
    monkeypatch.setattr(output, "HASH_CHUNK", 7)  # many chunks: the streamed digest is the whole file's
    data = b'{"a": 1}\n{"b": 2}\n' * 5
    path = tmp_path / "in.jsonl"
    path.write_bytes(data)
    got = output.input_identity(str(path))
    assert got == {"path": str(path), "size": len(data), "mtime_ns": os.stat(path).st_mtime_ns,
                   "sha256": hashlib.sha256(data).hexdigest()}


@pytest.mark.parametrize("earlier, line_end", [(9, True), (18, True), (5, False), (0, True)])
def test_an_earlier_size_gives_its_prefix_hash_and_whether_a_line_ended_there(tmp_path, monkeypatch, earlier, line_end):
    monkeypatch.setattr(output, "HASH_CHUNK", 4)
    data = b'{"a": 1}\n{"b": 2}\n{"c": 3}\n'
    path = tmp_path / "in.jsonl"
    path.write_bytes(data)
    got = output.input_identity(str(path), prefix=earlier)
    assert got["prefix_sha256"] == hashlib.sha256(data[:earlier]).hexdigest()
    assert got["sha256"] == hashlib.sha256(data).hexdigest() and got["size"] == len(data)
    assert got["line_end"] is line_end


def test_a_new_line_end_after_an_unended_last_line_counts(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c": 3}')  # the earlier file lacked its last line end
    assert output.input_identity(str(path), prefix=8)["line_end"] is True  # "}\n": the new bytes begin a line
    assert output.input_identity(str(path), prefix=7)["line_end"] is False


@pytest.mark.parametrize("earlier", [None, -1, 27, 30])
def test_no_prefix_when_the_earlier_size_is_not_smaller(tmp_path, earlier):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c": 3}\n')
    got = output.input_identity(str(path), prefix=earlier)
    assert "prefix_sha256" not in got and "line_end" not in got


def test_a_resume_state_that_is_not_one_is_refused(tmp_path):
    state = tmp_path / "state.json"
    assert output._previous_state(str(state)) is None
    state.write_text(json.dumps({"fingerprint": {}}))
    assert output._previous_state(str(state)) == {"fingerprint": {}}
    state.write_text("[1, 2]")
    with pytest.raises(UserError) as e:
        output._previous_state(str(state))
    assert str(e.value) == (f"{state} is not a ragscale resume state: re-run with overwrite=true, or use another "
                            "output_dir")
    state.write_text("{not json")
    with pytest.raises(UserError) as e:
        output._previous_state(str(state))
    assert str(e.value) == (f"{state} cannot be read (JSONDecodeError): re-run with overwrite=true, or use another "
                            "output_dir")
