"""The HTML report's templates: the page order (the leaderboard first, provenance last and
collapsed), the leaderboard (ranking order, the mean with its interval, the models each is
significantly better than), every metric's mean grouped by family in tables of bounded width,
the breakdowns by answerability and turn, the significance section rendered from a hand-written
summary.json block (significant and not, the better model first, catalog labels and decimals,
escaped model ids), a malformed summary rendered as far as it reads, and the template
environment (autoescape, every template compiles). The calibrated leaderboard:
tests/unit/test_html_calibration.py; the scan: tests/unit/test_plots.py; in a browser:
tests/integration/test_report_chromium.py."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from ragscale.report import html as report
from ragscale.report.html_context import MEAN_COLUMNS

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
    assert text.index('id="summary"') < text.index('id="means"') < text.index('id="significance"') \
        < text.index('id="distributions"')
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


# ---------------------------------------------------------------- page order, leaderboard, grouped means

class Tables(HTMLParser):
    """Each table of a page as (id of the nearest h2/h3 before it, rows of cell texts: all the text of a
    cell, spans included, whitespace collapsed)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[tuple[str | None, list[list[str]]]] = []
        self.heading: str | None = None
        self.cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("h2", "h3") and a.get("id"):
            self.heading = a["id"]
        elif tag == "table":
            self.tables.append((self.heading, []))
        elif tag == "tr":
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1][1][-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)

    def under(self, heading: str) -> list[list[list[str]]]:
        return [rows for h, rows in self.tables if h == heading]


RUN = {"status": "ok", "ragscale_version": "0.1.0", "config": {"scenario_name": "trec", "steps": ["trec"]},
       "versions": {"ragscale": "0.1.0"}}


def test_page_order_answer_first_provenance_last_and_collapsed(tmp_path):
    sink = report.HtmlSink(str(tmp_path), ["hhem", "Length"])
    for i in range(4):
        sink.add({"model_id": "m", "query": "q", "metrics": {"hhem": 0.2 * i, "Length": 3.0}, "error": None,
                  "ragscale": {"record_key": f"r{i}"}})
    text = open(sink.finish(_summary(SIG), RUN, str(tmp_path / "r.html")), encoding="utf-8").read()
    ids = ["summary", "means", "significance", "distributions", "worst", "judges", "errors", "provenance"]
    at = [text.index(f'id="{i}"') for i in ids]
    assert at == sorted(at)
    nav = re.search(r"<nav>(.*?)</nav>", text, re.S).group(1)
    assert re.findall(r'href="#([\w-]+)"', nav) == ids
    # one line under the title; the provenance table only inside a closed <details> after the answer
    assert re.search(r'<h1>ragscale report: [^<]+</h1>\n<p class="sub"><span class="ok">ok</span> · 3 models · '
                     r"\d+ records · ranked by the mean of HHEM \(higher is better\)</p>", text)
    details = text.index("<details><summary>run: status, scenario")
    assert text.index('id="summary"') < text.index('id="provenance"') < details
    assert text.index('<table class="kv">') > details and "<details open" not in text
    assert "The run failed" not in text


def test_a_failed_run_says_so_up_top(tmp_path):
    run = {**RUN, "status": "failed", "failure": "judge engine <crashed>", "records": {"missing": 3}}
    text = render_run(tmp_path, _summary(None), run)
    assert text.index('<p class="warn">The run failed: judge engine &lt;crashed&gt;</p>') < text.index('id="summary"')
    run = {**RUN, "status": "failed", "failure": None, "records": {"in": 5, "missing": 3}}
    assert '<p class="warn">The run failed: in: 5; missing: 3</p>' in render_run(tmp_path, _summary(None), run)


def render_run(tmp_path, summary: dict | None, run: dict | None) -> str:
    sink = report.HtmlSink(str(tmp_path), ["hhem", "Length"])
    return open(sink.finish(summary, run, str(tmp_path / "r.html")), encoding="utf-8").read()


def test_leaderboard_ranks_with_intervals_and_significance(tmp_path):
    summary = _summary(SIG)
    sink = report.HtmlSink(str(tmp_path), ["hhem", "Length"])
    for model, low in (("model-A", 0.45), ("model-B", 0.15), (EVIL, 0.3)):
        summary["models"][model]["metrics"]["hhem"] = low + 0.25
        for i in range(6):
            sink.add({"model_id": model, "metrics": {"hhem": low + 0.1 * i, "Length": 10.0}, "error": None,
                      "ragscale": {"record_key": f"{model}-{i}"}})
    page = Tables(open(sink.finish(summary, None, str(tmp_path / "r.html")), encoding="utf-8").read())
    (board,) = page.under("summary")
    assert board[0] == ["#", "model", "records", "errors", "hhem [95%, unadjusted]", "significantly better than"]
    # ranking order; summary.json's mean in the catalog's decimals with the t-interval of the records' values
    # (6 values 0.1 apart: sd 0.1871, t(0.975, 5) = 2.5706, half-width 0.1963)
    assert [r[:4] for r in board[1:]] == [["1", "model-A", "30", "0"], ["2", EVIL, "30", "0"],
                                          ["3", "model-B", "30", "0"]]
    assert [r[4] for r in board[1:]] == ["0.7000 [0.5037, 0.8963]", "0.5500 [0.3537, 0.7463]",
                                         "0.4000 [0.2037, 0.5963]"]
    assert [r[5] for r in board[1:]] == ["model-B", "model-B", "—"]  # SIG: A > B and EVIL > B on hhem


def test_no_significance_column_without_comparisons_of_the_ranking_metric(tmp_path):
    page = Tables(render(tmp_path, _summary({"metrics": {"Length": SIG["metrics"]["Length"]}})))
    (board,) = page.under("summary")
    assert board[0] == ["#", "model", "records", "errors", "hhem [95%, unadjusted]"]


def test_summary_missing_leaderboard_from_the_records(tmp_path):
    text = render(tmp_path, None)
    assert "summary.json is missing: means computed from records.jsonl." in text
    page = Tables(text)
    (board,) = page.under("summary")
    assert [r[1] for r in board[1:]] == sorted(["model-A", "model-B", EVIL])  # a tie: by name
    assert all(r[0] == "1" and r[2] == "6" and r[4] == "0.2500 [0.0537, 0.4463]" for r in board[1:])
    (means,) = page.under("means")
    assert means[1] == ["model", "hhem", "Length"] and means[2][1:] == ["0.2500", "12.5"]


def wide_summary(models: list[str], metrics: list[str]) -> dict:
    blocks = {m: {"count": 10, "errors": 0, "metrics": {k: 0.1 * (i + 1) for k in metrics},
                  "n": {k: 10 for k in metrics}} for i, m in enumerate(models)}
    return {"reduction": "test", "metrics": metrics, "models": blocks,
            "overall": {"count": 10 * len(models), "errors": 0, "metrics": {k: 0.5 for k in metrics},
                        "n": {k: 10 * len(models) for k in metrics}}}


WIDE = ["Recall", "RougeL_stemFalse", "BertscoreP", "BertscoreR", "BertKPrec", "Extractiveness_RougeL", "Length",
        "RB_agg", "RB_llm", "RL_F", "HMean", "nuggets_all", "nuggets_vital", "nuggets_weighted", "nuggets_strict_all",
        "nuggets_strict_vital", "nuggets_strict_weighted", "nuggets_assignment_mean", "nuggets_count",
        "citation_precision", "citation_recall", "citation_f1", "hhem", "umbrela_mean", "my_own_metric"]


def test_means_grouped_by_family_in_tables_of_bounded_width(tmp_path):
    models = ["m1", "m2", "m3"]
    sink = report.HtmlSink(str(tmp_path), WIDE)
    for m in models:
        sink.add({"model_id": m, "metrics": {k: 0.5 for k in WIDE}, "error": None, "ragscale": {"record_key": m}})
    text = open(sink.finish(wide_summary(models, WIDE), None, str(tmp_path / "r.html")), encoding="utf-8").read()
    tables = Tables(text).under("means")
    assert len(tables) >= 4
    seen = []
    for families, head, *rows in tables:
        assert head[0] == "model" and 1 <= len(head) - 1 <= MEAN_COLUMNS
        assert [r[0] for r in rows] == ["m3", "m2", "m1", "ALL models"]  # ranked by RB_agg (the headline)
        seen += head[1:]
    assert seen[:8] == WIDE[:8]  # the catalog's families in the run's order: algorithmic first
    assert sorted(seen) == sorted(WIDE)  # every metric once
    assert any("other" in t[0] and "my_own_metric" in t[1] for t in tables)  # not in the catalog
    # a header cell per family spanning its columns; the 8 nuggets metrics do not fit one table: split evenly
    spans = re.findall(r'<table class="means small"><tr><th class="corner"></th>(.*?)</tr>', text)
    assert spans[0] == '<th class="family" colspan="8">algorithmic</th>'
    assert re.findall(r'colspan="(\d+)">nuggets<', "".join(spans)) == ["4", "4"]
    assert 'class="wide"' not in text and "overflow-x" not in text  # no sideways scrolling


def breakdown_summary() -> dict:
    def cell(mean: float, n: int, acc: float | None = None) -> dict:
        return {"count": n, "errors": 0, "metrics": {"RB_agg": mean}, "n": {"RB_agg": n},
                "answerability_accuracy": acc, "answerability_n": n if acc is not None else 0}

    models = {}
    for model, base in (("small", 0.3), ("big", 0.6)):
        models[model] = {**cell(base, 10, 0.5), "by_answerability": {"ANSWERABLE": cell(base + 0.1, 6, 1.0),
                                                                     "UNANSWERABLE": cell(base - 0.1, 4, 0.25)},
                         "by_turn": {"1": cell(base + 0.05, 4), ">1": cell(base - 0.05, 6)}}
    return {"reduction": "test", "metrics": ["RB_agg"], "models": models, "overall": None}


def test_breakdowns_by_answerability_and_turn(tmp_path):
    sink = report.HtmlSink(str(tmp_path), ["RB_agg"])
    text = open(sink.finish(breakdown_summary(), None, str(tmp_path / "r.html")), encoding="utf-8").read()
    assert text.index('id="distributions"') < text.index('id="breakdowns"') < text.index('id="worst"')
    assert '<h2 id="breakdowns">By answerability and by turn</h2>' in text and "By answerability class" not in text
    tables = [rows for h, rows in Tables(text).tables if h == "breakdowns"]
    head = ["#", "model", "All", "ANSWERABLE", "UNANSWERABLE", "Turn 1", "Turn >1"]
    assert tables[0] == [head, ["1", "big", "0.6000 (10)", "0.7000 (6)", "0.5000 (4)", "0.6500 (4)", "0.5500 (6)"],
                         ["2", "small", "0.3000 (10)", "0.4000 (6)", "0.2000 (4)", "0.3500 (4)", "0.2500 (6)"]]
    assert tables[1][1] == ["1", "big", "0.5000 (10)", "1.0000 (6)", "0.2500 (4)", "– (0)", "– (0)"]  # AnsAcc
    assert len(tables) == 2


def test_worst_records_metrics_wrap_as_a_list(tmp_path):
    sink = report.HtmlSink(str(tmp_path), WIDE)
    sink.add({"model_id": "m", "metrics": {k: 0.5 for k in WIDE}, "error": None, "ragscale": {"record_key": "r"}})
    text = open(sink.finish(None, None, str(tmp_path / "r.html")), encoding="utf-8").read()
    assert text.count('<div class="card"') == 1  # one record: one card, however many scores it is low on
    card = text[text.index('<div class="card" id="low-1">'):]
    card = card[:card.index("</div>\n", card.index('<dl class="mvals">'))]
    assert '<div class="hl"><dt>Recall</dt><dd>0.5000</dd></div>' in card
    assert card.count("<dt>") == len(WIDE) and "<table" not in card[card.index("<h4>Metrics</h4>"):]


@pytest.mark.parametrize("bad", [
    {"models": {"a": None, "b": {"metrics": "x", "n": None, "count": "3"}}, "metrics": ["hhem"]},
    {"models": {"a": {"metrics": {"hhem": "high"}, "by_answerability": {"X": 3}, "by_turn": []}}, "metrics": "hhem"},
    {"models": {"a": {"metrics": {"hhem": 0.5}}}, "metrics": ["hhem"], "overall": 3, "significance": {"metrics": 1},
     "calibration": {"ranked_by": "hhem", "metrics": {"hhem": {"models": {"a": {"calibrated": {"mean": "x"}}}}}}},
])
def test_a_malformed_summary_renders(tmp_path, bad):
    text = render(tmp_path, json.loads(json.dumps(bad)))
    assert '<h2 id="summary">' in text and 'id="provenance"' in text
