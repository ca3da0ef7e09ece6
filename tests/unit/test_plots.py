"""`python -m ragscale.plot` over synthetic TREC-like run dirs, its statistics, and the HTML
report's streaming pieces (no browser: tests/integration/test_report_chromium.py renders it)."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys

import pytest

from ragscale.commands.plot import main as plot_main
from ragscale.report import plots
from ragscale.report.summary import record_scalar

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TREC = ["umbrela_mean", "P@5", "nuggets_vital", "citation_f1", "hhem", "answered", "zero_flag", "BertKPrec"]


def make_run(path: str, n: int, seed: int, models=("alpha-rag", "beta-rag"), errors: int = 1) -> str:
    """A TREC-like run dir: records.jsonl, summary.json (means by record_scalar) and run.json."""
    rng = random.Random(seed)
    os.makedirs(path, exist_ok=True)
    recs = []
    for i in range(n):
        model = models[i % len(models)]
        answered = 1.0 if rng.random() < 0.8 else 0.0
        m = {
            "umbrela_mean": round(rng.uniform(0, 3), 4),
            "P@5": rng.choice([0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
            "nuggets_vital": round(rng.random(), 4) if answered else 0.0,
            "citation_f1": None if i % 7 == 3 else round(rng.random(), 4),
            "hhem": round(rng.betavariate(4, 2), 4),
            "answered": answered,
            "zero_flag": [rng.random() < 0.1],
            "BertKPrec": [round(rng.random(), 3), round(rng.random(), 3)],
        }
        recs.append({"query_id": f"q{i}", "query": f"question {i}?", "generated_answer": f"answer {i} [1]",
                     "model_id": model, "metrics": m, "error": None,
                     "ragscale": {"record_key": f"k{i}", "source_file": "in.csv", "source_line": i + 2,
                                  "warnings": [], "judge_errors": [], "details": {}}})
    for j in range(errors):
        recs.append({"query_id": f"e{j}", "query": "bad", "model_id": models[0], "metrics": {m: None for m in TREC},
                     "error": {"stage": "input", "message": "no passages"},
                     "ragscale": {"record_key": f"e{j}", "warnings": [], "judge_errors": [], "details": {}}})
    with open(os.path.join(path, "records.jsonl"), "w") as fh:
        for r in recs:
            fh.write(json.dumps(r) + "\n")
    models_s = {}
    for model in models:
        mine = [r for r in recs if r["model_id"] == model]
        ok = [r for r in mine if r["error"] is None]
        means = {}
        for name in TREC:
            vals = [v for v in (record_scalar(name, r["metrics"][name]) for r in ok) if v is not None]
            means[name] = sum(vals) / len(vals) if vals else None
        models_s[model] = {"count": len(mine), "errors": len(mine) - len(ok), "metrics": means}
    with open(os.path.join(path, "summary.json"), "w") as fh:
        json.dump({"reduction": "test", "metrics": TREC, "models": models_s, "overall": None}, fh)
    with open(os.path.join(path, "run.json"), "w") as fh:
        json.dump({"status": "ok", "config": {"scenario_name": "trec"}}, fh)
    return path


def values_of(path: str, name: str, model: str | None = None) -> list[float]:
    out = []
    with open(os.path.join(path, "records.jsonl")) as fh:
        for line in fh:
            r = json.loads(line)
            if r["error"] is None and (model is None or r["model_id"] == model):
                v = record_scalar(name, r["metrics"][name])
                if v is not None:
                    out.append(v)
    return out


@pytest.fixture
def runs(tmp_path):
    return make_run(str(tmp_path / "a" / "run"), 40, 1), make_run(str(tmp_path / "b" / "run"), 30, 2)


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# ---------------------------------------------------------------- the figure

def test_plot_png_written_and_not_blank(runs, tmp_path, capsys):
    import matplotlib.image as mpimg
    import numpy as np

    out = str(tmp_path / "cmp.png")
    assert plot_main([*runs, "--output", out]) == 0
    assert "wrote" in capsys.readouterr().out
    assert os.path.getsize(out) > 30_000
    img = mpimg.imread(out)
    assert img.ndim == 3 and img.shape[2] in (3, 4) and img.shape[0] > 500 and img.shape[1] > 1000
    assert float(np.asarray(img[..., :3]).std()) > 0.05


def test_by_model_svg(runs, tmp_path):
    out = str(tmp_path / "cmp.svg")
    stats = plots.plot_runs(list(runs), out, metrics=["hhem"], by_model=True)
    labels = [s.label for s in stats["hhem"]]
    assert labels == ["a/run\nalpha-rag", "a/run\nbeta-rag", "b/run\nalpha-rag", "b/run\nbeta-rag"]
    assert open(out).read().lstrip().startswith(("<?xml", "<svg"))


def test_default_metric_selection(runs):
    data = plots.load_runs(list(runs))
    chosen = plots.select_metrics(data, None)
    # summary order, the boolean flag left out, answered (a bar chart) last
    assert chosen == ["umbrela_mean", "P@5", "nuggets_vital", "citation_f1", "hhem", "BertKPrec", "answered"]
    assert "zero_flag" in data.flags


def test_requested_metrics_and_stats(runs, tmp_path):
    import numpy as np

    stats = plots.plot_runs(list(runs), str(tmp_path / "x.png"), metrics=["citation_f1", "answered", "BertKPrec"])
    assert list(stats) == ["citation_f1", "answered", "BertKPrec"]
    for run, s in zip(runs, stats["citation_f1"]):
        vals = values_of(run, "citation_f1")
        assert s.n == len(vals) and s.n < 40  # nulls and errored records left out
        assert s.mean == pytest.approx(np.mean(vals)) and s.median == pytest.approx(np.median(vals))
        assert s.ci == pytest.approx(plots.t_interval(vals))
    for run, s in zip(runs, stats["answered"]):
        vals = values_of(run, "answered")
        assert s.mean == pytest.approx(100 * sum(vals) / len(vals))
        lo, hi = plots.wilson_interval(int(sum(vals)), len(vals))
        assert s.ci == pytest.approx((100 * lo, 100 * hi))
    # a (registered) per-passage list metric contributes its best passage
    assert stats["BertKPrec"][0].mean == pytest.approx(np.mean(values_of(runs[0], "BertKPrec")))
    assert stats["BertKPrec"][0].mean > np.mean([json.loads(line)["metrics"]["BertKPrec"][0]
                                                    for line in open(os.path.join(runs[0], "records.jsonl"))
                                                    if json.loads(line)["error"] is None])


def test_labels_deduplicated():
    assert plots.label_runs(["/x/a/run", "/y/b/run", "/z/other"]) == ["a/run", "b/run", "other"]
    assert plots.label_runs(["/x/run", "/x/run"]) == ["run", "run (2)"]


# ---------------------------------------------------------------- statistics

def test_t_interval_matches_scipy():
    from scipy import stats
    import numpy as np

    rng = np.random.default_rng(0)
    for n in (2, 3, 7, 30, 500):
        x = rng.normal(0.5, 0.2, n).tolist()
        want = stats.t.interval(0.95, n - 1, loc=np.mean(x), scale=stats.sem(x))
        assert plots.t_interval(x) == pytest.approx(want, rel=1e-9, abs=1e-12)
    for p, df in [(0.975, 1), (0.975, 10), (0.995, 3), (0.9, 2.5), (0.025, 40), (0.975, 2e5)]:
        assert plots.t_ppf(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-12)
    for p in (0.5, 0.975, 1e-6):
        assert plots.norm_ppf(p) == pytest.approx(stats.norm.ppf(p), rel=1e-12)
    with pytest.raises(ValueError, match="0 < p < 1"):
        plots.t_ppf(1.0, 3)


def test_intervals_by_hand():
    # t(0.975, 4) = 2.776445; values 1..5: mean 3, sd sqrt(2.5)
    lo, hi = plots.t_interval([1, 2, 3, 4, 5])
    half = 2.7764451051977987 * math.sqrt(2.5) / math.sqrt(5)
    assert (lo, hi) == pytest.approx((3 - half, 3 + half), rel=1e-9)
    assert plots.t_interval([0.4]) is None
    # Wilson 95% for 8/10 (e.g. Newcombe 1998): 0.4902 .. 0.9433
    assert plots.wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert plots.wilson_interval(0, 0) is None
    # the score interval's closed form (Wilson 1927), also at the edges where it is clipped to [0, 1]
    z = 1.959963984540054
    for k, n in ((0, 10), (10, 10), (37, 120), (1, 1)):
        p = k / n
        centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        assert plots.wilson_interval(k, n) == pytest.approx((max(0.0, centre - half), min(1.0, centre + half)), abs=1e-12)


# ---------------------------------------------------------------- CLI errors: one line, exit 2

def test_cli_missing_dir(tmp_path, capsys):
    assert plot_main([str(tmp_path / "nope"), "-o", str(tmp_path / "x.png")]) == 2
    assert "does not exist" in one_line_error(capsys)


def test_cli_no_records(tmp_path, capsys):
    assert plot_main([str(tmp_path), "-o", str(tmp_path / "x.png")]) == 2
    assert "no records.jsonl" in one_line_error(capsys)


def test_cli_no_numeric_metrics(tmp_path, capsys):
    run = tmp_path / "r"
    run.mkdir()
    (run / "records.jsonl").write_text(
        json.dumps({"model_id": "m", "metrics": {"x": None, "flag": [True]}, "error": None}) + "\n")
    assert plot_main([str(run), "-o", str(tmp_path / "x.png")]) == 2
    assert "no numeric metrics" in one_line_error(capsys)
    assert not (tmp_path / "x.png").exists()


def test_cli_unknown_metric(runs, tmp_path, capsys):
    assert plot_main([*runs, "--metrics", "hhem,nugets_vital", "-o", str(tmp_path / "x.png")]) == 2
    assert "did you mean 'nuggets_vital'" in one_line_error(capsys)


def test_cli_output_folder_missing(runs, tmp_path, capsys):
    assert plot_main([runs[0], "-o", str(tmp_path / "no" / "x.png")]) == 2
    assert "does not exist" in one_line_error(capsys)


def test_cli_subprocess_no_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ragscale.plot", str(tmp_path / "missing")], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "ragscale.plot"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "RUN_DIR" in r.stderr


# ---------------------------------------------------------------- HTML report pieces (no browser)

def test_report_streams_bounded_and_escapes(tmp_path, monkeypatch):
    from ragscale.report import html as report
    from ragscale.report import html_scan

    monkeypatch.setattr(html_scan, "RESERVOIR", 500)
    run = make_run(str(tmp_path / "run"), 3000, 3, errors=2)
    with open(os.path.join(run, "records.jsonl"), "a") as fh:
        fh.write(json.dumps({"query": "<script>alert(1)</script>", "generated_answer": "<img src=x onerror=alert(2)>",
                             "model_id": "alpha-rag", "metrics": {"hhem": -1.0}, "error": None,
                             "ragscale": {"record_key": "evil", "judge_errors": [], "details": {}}}) + "\n")
    path = report.write_report(run, worst_n=3)
    text = open(path, encoding="utf-8").read()
    assert path == os.path.join(run, "report.html")
    assert "<script" not in text.lower() and "<img" not in text.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    # the lowest hhem is the injected record, and each worst list holds 3 records
    scan = html_scan.Scan(plots.read_json(os.path.join(run, "summary.json"))["metrics"], 3)
    scan.run(os.path.join(run, "records.jsonl"))
    worst = scan.worst["hhem"].items()
    assert len(worst) == 3 and worst[0][0] == -1.0 and worst[0][1]["record"] == "evil"
    assert [v for v, _ in worst] == sorted(values_of(run, "hhem"))[:3]
    d = scan.dists["hhem"]["alpha-rag"]
    assert len(d.sample) == html_scan.RESERVOIR and d.n == 1501 and not d.exact
    assert d.mean == pytest.approx(sum(values_of(run, "hhem", "alpha-rag")) / 1501)
    assert "zero_flag" in scan.flags and "zero_flag" not in scan.worst


def test_report_cli_errors(tmp_path, capsys):
    from ragscale.commands.report import main as report_main

    assert report_main([str(tmp_path / "missing")]) == 2
    assert "does not exist" in one_line_error(capsys)
    run = make_run(str(tmp_path / "run"), 10, 4)
    out = str(tmp_path / "r.html")
    assert report_main([run, "--output", out]) == 0
    assert capsys.readouterr().out.strip() == out and os.path.getsize(out) > 5000


def test_a_metric_equal_on_every_record_is_drawn(tmp_path):
    """Seven values of 0.35: their float mean is 0.35000000000000003, above the interval clipped to
    the values' range, [0.35, 0.35]; matplotlib refused the negative error bar with a traceback."""
    run = tmp_path / "flat"
    run.mkdir()
    (run / "records.jsonl").write_text("".join(
        json.dumps({"query_id": f"q{i}", "model_id": "m", "error": None, "metrics": {"citation_f1": 0.35}}) + "\n"
        for i in range(7)))
    stats = plots.plot_runs([str(run)], str(tmp_path / "flat.png"))
    (s,) = stats["citation_f1"]
    assert s.ci == (0.35, 0.35) and s.mean == pytest.approx(0.35) and (tmp_path / "flat.png").stat().st_size > 0
