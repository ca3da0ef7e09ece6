"""File names for model ids (ragscale.report.safe.file_name, issue 37) and the console's model name:
an id made of letters, digits, ``.``, ``_``, ``-`` is its own name; any other id gets ``_`` for the
rest, at most MAX_STEM characters, and the first 8 hex of its sha1; a name taken (without case) gets
a longer digest until it is free; the console cuts a long id at CONSOLE_WIDTH with an ellipsis."""

from __future__ import annotations

import hashlib

from ragscale.report import safe


def sha(name: str) -> str:
    return hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()


def test_file_names():
    taken: set[str] = set()
    assert safe.file_name("gpt-4o_mini.v2", taken) == "gpt-4o_mini.v2.csv" and taken == {"gpt-4o_mini.v2"}
    assert safe.file_name("org/model x", taken, ".md") == f"org_model_x-{sha('org/model x')[:8]}.md"
    assert safe.file_name("GPT-4o_mini.v2", taken) == f"GPT-4o_mini.v2-{sha('GPT-4o_mini.v2')[:8]}.csv"
    assert safe.file_name("..hidden-", set()) == f"hidden-{sha('..hidden-')[:8]}.csv"
    assert safe.file_name("///", set()) == f"model-{sha('///')[:8]}.csv"
    long = "m" * 100
    assert safe.file_name(long, set()) == f"{'m' * safe.MAX_STEM}-{sha(long)[:8]}.csv"
    assert safe.file_name("\ud800", set()) == f"model-{sha(chr(0xD800))[:8]}.csv"
    assert safe.file_name("XL-model-X", set()) == "XL-model-X.csv"  # only dots, dashes and underscores are trimmed


def test_a_taken_digest_grows_until_free():
    name = "a/b"
    taken = {f"a_b-{sha(name)[:8]}".casefold(), f"a_b-{sha(name)[:16]}".upper().casefold()}
    assert safe.file_name(name, taken) == f"a_b-{sha(name)[:24]}.csv"
    assert f"a_b-{sha(name)[:24]}" in taken


def test_console_names():
    assert safe.console_name("m" * safe.CONSOLE_WIDTH) == "m" * safe.CONSOLE_WIDTH
    assert safe.console_name("m" * (safe.CONSOLE_WIDTH + 1)) == "m" * (safe.CONSOLE_WIDTH - 1) + "…"
    assert safe.console_name("a\nb", limit=3) == "a\\…"
    assert safe.console_name("a\u202eb") == "a\\u202eb"
