"""Which CSVs are open-rag-eval's (ragscale.io.table_csv.is_orag_header): a header naming
``passage_id`` or ``query_run`` (one row per retrieved passage); every other CSV, an empty one
included, is a table of one record per row."""

from __future__ import annotations

import pytest

from ragscale.io.table_csv import is_orag_header


@pytest.mark.parametrize("text, orag", [
    ("query_id,query,query_run,generated_answer\nq1,q,1,a\n", True),
    ("query_id,query,passage_id,passage\nq1,q,[1],p\n", True),
    ("\n\n query_run ,x\n", True),
    ("question,answer,run\nq,a,1\n", False),
    ("question,answer\nquery_run,passage_id\n", False),
    ("", False),
    ("\n\n,,\n", False),
])
def test_open_rag_evals_header_names_passage_id_or_query_run(tmp_path, text, orag):
    p = tmp_path / "in.csv"
    p.write_text(text)
    assert is_orag_header(str(p)) is orag
