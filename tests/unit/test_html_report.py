"""The HTML report's templates: the significance section rendered from a hand-written
summary.json block (significant and not, the better model first, catalog labels and
decimals, escaped model ids), and the template environment (autoescape, every template
compiles). The report's other sections: tests/unit/test_plots.py and, in a browser,
tests/integration/test_report_chromium.py."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from ragscale.report import html as report

EVIL = "<script>alert('model')</script>"


class _Rows(HTMLParser):
    """The text of each table cell, per row, of the section with id="significance"."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.inside = False
        self.rows: list[list[tuple[str, str]]] = []  # [(cell class, cell text)]
        self.cls = ""
        self.after: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id") == "significance":
            self.inside = True
        elif tag in ("h2", "h3") and self.inside:
            self.inside = False
        if self.inside and tag == "tr":
            self.rows.append([])
        if self.inside and tag in ("td", "th"):
            self.cls = a.get("class") or ""
            self.rows[-1].append((self.cls, ""))

    def handle_data(self, data):
        if self.inside and self.rows and self.rows[-1] and self.lasttag in ("td", "th", "b", "span"):
            cls, text = self.rows[-1][-1]
            self.rows[-1][-1] = (cls, " ".join((text + data).split()))
        elif self.inside and self.lasttag == "p":
            self.after.append(data)


def _pair(a, b, diff, ci, p_adj, significant, better, n=30, **extra):
    return {"a": a, "b": b, "n": n, "mean_a": 0.5 + diff, "mean_b": 0.5, "diff": diff, "ci": ci,
            "p": p_adj / 2 if p_adj is not None else None, "p_adjusted": p_adj, "significant": significant,
            "better": better, **extra}


def _summary(significance: dict | None) -> dict:
    models = {m: {"count": 30, "errors": 0, "metrics": {"hhem": 0.5, "Length": 40.0}, "n": {"hhem": 30, "Length": 30}}
              for m in ("model-A", "model-B", EVIL)}
    out = {"reduction": "test", "metrics": ["hhem", "Length"], "models": models, "overall": None}
    if significance is not None:
        out["significance"] = significance
    return out


SIG = {
    "method": "Paired bootstrap over tasks.", "confidence": 0.95, "alpha": 0.05, "correction": "holm",
    "design": "all-pairs",
    "metrics": {
        "hhem": [_pair("model-A", "model-B", 0.04, [0.01, 0.07], 0.012, True, "model-A"),
                 _pair("model-B", EVIL, -0.05, [-0.08, -0.02], 0.0004, True, EVIL),
                 _pair("model-A", EVIL, 0.003, [-0.02, 0.025], 0.61, False, None, n=28)],
        "Length": [_pair("model-A", "model-B", 12.34, None, None, False, None, note="too few tasks")],
    },
}


def render(tmp_path, summary: dict | None) -> str:
    sink = report.HtmlSink(str(tmp_path), ["hhem", "Length"])
    for i in range(6):
        for model in ("model-A", "model-B", EVIL):
            sink.add({"model_id": model, "query": f"q{i}", "metrics": {"hhem": 0.1 * i, "Length": 10.0 + i},
                      "error": None, "ragscale": {"record_key": f"{model}-{i}"}})
    path = sink.finish(summary, None, str(tmp_path / "report.html"))
    return open(path, encoding="utf-8").read()


def test_significance_rows(tmp_path):
    text = render(tmp_path, _summary(SIG))
    parser = _Rows()
    parser.feed(text)
    head, *rows = parser.rows
    assert [t for _, t in head] == ["metric", "models", "difference (95% interval)", "p"]
    cells = [[t for _, t in r] for r in rows]
    # significant: "A > B", the difference with the metric's catalog label and decimals, the adjusted p
    assert cells[0] == ["HHEM", "model-A > model-B", "difference 0.0400 [0.0100, 0.0700]", "adjusted p = 0.012"]
    # the better model first, the difference and interval turned around
    assert cells[1] == [f"{EVIL} > model-B", "difference 0.0500 [0.0200, 0.0800]", "adjusted p < 0.001"]
    # not significant: "A vs B - not distinguishable on these N tasks", difference and p muted
    assert cells[2] == [f"model-A vs {EVIL} — not distinguishable on these 28 tasks",
                        "difference 0.0030 [-0.0200, 0.0250]", "adjusted p = 0.610"]
    assert [c for c, _ in rows[2][1:]] == ["num sub", "num sub"] and [c for c, _ in rows[0][2:]] == ["num", "num"]
    # another metric: its own label and decimals (Length: 1), the note, no interval and no p
    assert cells[3][0] == "Length" and cells[3][2:] == ["difference 12.3", ""]
    assert "not distinguishable on these 30 tasks" in cells[3][1] and "(too few tasks)" in cells[3][1]
    method = " ".join(parser.after)
    assert "Paired bootstrap over tasks." in method and "95% confidence intervals" in method and "holm" in method


def test_significance_escapes_model_ids(tmp_path):
    text = render(tmp_path, _summary(SIG))
    assert not re.search(r"<script\b", text, re.I)
    assert "&lt;script&gt;alert(&#39;model&#39;)&lt;/script&gt; &gt; model-B" in text


def test_significance_placed_after_the_summary_table(tmp_path):
    text = render(tmp_path, _summary(SIG))
    assert text.index('id="summary"') < text.index('id="significance"') < text.index('id="distributions"')
    assert text.index("Hover a cell for its n.") < text.index('id="significance"')
    assert '<a href="#significance">' in text


@pytest.mark.parametrize("block", [None, {"method": "x"}, {"metrics": []}, {"metrics": {"hhem": "bad"}},
                                   {"metrics": {"hhem": [1, None]}}])
def test_no_significance_section_without_a_readable_block(tmp_path, block):
    text = render(tmp_path, _summary(block))
    assert 'id="significance"' not in text and "#significance" not in text
    assert 'id="distributions"' in text


def test_template_environment_escapes_and_compiles():
    env = report._environment()
    assert env.autoescape is True
    names = env.list_templates()
    assert "report.html.j2" in names and "report.css" in names
    for name in names:
        env.get_template(name)  # each compiles
    assert str(env.from_string("{{ x }}").render(x="<b>&'\"")) == "&lt;b&gt;&amp;&#39;&#34;"
