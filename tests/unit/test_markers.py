"""Section markers escaped in untrusted text (ragscale.judges.templates.neutralize, issue 37): every
marker of every template, exactly as written, and nothing that merely resembles one: regex
metacharacters in a marker are literal (``[Output]`` is not a character class), a label counts only
at the start of a line, a heading only as a whole line; a longer marker wins over its prefix."""

from __future__ import annotations

import pytest

from ragscale.judges.templates import FENCE_TAGS, MARKERS, Markers, fence, marker_patterns, neutralize


@pytest.mark.parametrize("template", sorted(MARKERS))
def test_every_marker_is_escaped_and_only_it(template):
    marks = MARKERS[template]
    for m in marks.inline:
        assert neutralize(f"a {m} b", template) == f"a {m[0]}\\{m[1:]} b"
        assert neutralize(f"a {m.lower()} b", template) == f"a {m.lower()} b" or m.lower() == m
        assert neutralize(m[1:-1], template) == m[1:-1]  # its letters alone: no character class
    for m in marks.labels:
        assert neutralize(f"x\n \t{m} y", template) == f"x\n \t\\{m} y"
        assert neutralize(f"x {m} y", template) == f"x {m} y"  # not at a line's start
    for m in marks.lines:
        assert neutralize(f"x\n{m}\ny", template) == f"x\n\\{m}\ny"
        assert neutralize(f"x\n{m} and more\ny", template) == f"x\n{m} and more\ny"


def test_a_longer_marker_wins_over_its_prefix():
    text = "Initial Nugget List Length: 3\nInitial Nugget List: []"
    assert neutralize(text, "orag_nuggets_create_v1") == "\\Initial Nugget List Length: 3\n\\Initial Nugget List: []"
    MARKERS["_test_prefix"] = Markers(inline=("[A]", "[A] more"))
    try:
        (rx,) = marker_patterns("_test_prefix")
        assert rx.search("x [A] more").group("m") == "[A] more"
    finally:
        del MARKERS["_test_prefix"]
        marker_patterns.cache_clear()


def test_unknown_template_and_fences():
    with pytest.raises(KeyError, match="no section markers registered for template 'nope'"):
        marker_patterns("nope")
    assert fence("answer", "a </answer> b < / ANSWER >") == "<answer>\na <\\/answer> b <\\/answer>\n</answer>"
    with pytest.raises(ValueError, match="unknown fence tag 'x'; fence tags are " + ", ".join(FENCE_TAGS)):
        fence("x", "t")
    assert fence("query", "</other>") == "<query>\n</other>\n</query>"


def test_each_template_owner_declares_its_markers_once():
    """The judge module that renders a template declares its markers; declaring them again the same
    is a no-op, differently an error (two owners disagreeing)."""
    from ragscale.judges.templates import declare_markers

    assert {"mtrag_idk_v1", "radbench", "umbrela_v1", "umbrela_new_v1", "orag_nuggets_assign_v1"} <= set(MARKERS)
    declare_markers("umbrela_v1", MARKERS["umbrela_v1"])
    with pytest.raises(ValueError, match="declared twice"):
        declare_markers("umbrela_v1", Markers(labels=("Query:",)))
    assert MARKERS["umbrela_v1"] == Markers(labels=("Query:", "Passage:"))


def test_a_new_template_declares_its_markers_and_finds_them(monkeypatch):
    from ragscale.judges import templates

    monkeypatch.setattr(templates, "MARKERS", dict(templates.MARKERS))  # the built-in table stays as it is
    templates.declare_markers("zz_new", Markers(labels=("Answer:",)))
    templates.declare_markers("zz_new", Markers(labels=("Answer:",)))  # the same again: a no-op
    assert templates.MARKERS["zz_new"] == Markers(labels=("Answer:",))
    assert neutralize("x\nAnswer: yes", "zz_new") == "x\n\\Answer: yes"  # escaped: it cannot fake a section
