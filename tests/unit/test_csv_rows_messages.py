"""The one-line errors of ragscale.io.csv_rows: a CSV that cannot be opened, a header row that cannot
be read or names a column twice, worded for the layout being read (``what``)."""

from __future__ import annotations

import pytest

from ragscale.errors import UserError
from ragscale.io.csv_rows import header_names, open_csv


@pytest.mark.parametrize("what, shown", [((), "CSV"), (("open-rag-eval CSV",), "open-rag-eval CSV")])
def test_a_csv_that_cannot_be_opened_is_one_line_naming_the_layout(tmp_path, what, shown):
    p = str(tmp_path / "missing.csv")
    with pytest.raises(UserError) as e:
        open_csv(p, *what)
    assert str(e.value) == f"{p}: cannot read the {shown} (No such file or directory)"


def test_an_open_csv_reads_bytes(tmp_path):
    p = tmp_path / "t.csv"
    p.write_bytes(b"a,b\r\n")
    with open_csv(str(p)) as fh:
        assert fh.read() == b"a,b\r\n"


@pytest.mark.parametrize("what, message", [
    ("", "t.csv: line 3: the header row is unreadable (unexpected end of data)"),
    ("open-rag-eval CSV", "t.csv: line 3: the header row of the open-rag-eval CSV is unreadable (unexpected end of data)"),
])
def test_an_unreadable_header_row_names_its_line_and_the_layout(what, message):
    with pytest.raises(UserError) as e:
        header_names("t.csv", 3, None, "unexpected end of data", what)
    assert str(e.value) == message


@pytest.mark.parametrize("what, message", [
    ("", "t.csv: column(s) a, b appear twice in the header"),
    ("open-rag-eval CSV", "t.csv: not an open-rag-eval CSV: column(s) a, b appear twice in the header"),
])
def test_a_column_named_twice_is_refused(what, message):
    with pytest.raises(UserError) as e:
        header_names("t.csv", 1, ["b", " a", "a ", "c", "b", "", ""], None, what)
    assert str(e.value) == message


def test_header_names_are_stripped():
    assert header_names("t.csv", 1, [" query ", "answer", ""], None) == ["query", "answer", ""]
