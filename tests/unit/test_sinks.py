"""The report pass's sinks (ragscale.report.sinks.Outputs, issue 37): which sinks a run opens, what
the console says about significance and repeated answers, and that a failing sink is one warning
line and a line in run.json's outputs_failed while every other output is written."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

from ragscale.config import SignificanceConf
from ragscale.io.identity import REPEAT
from ragscale.report.sinks import Outputs, ReportSettings


def run_dir(tmp_path, recs: list[dict]) -> str:
    d = tmp_path / "run"
    d.mkdir(parents=True)
    (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(d)


def plan(steps=("algorithmic",), metrics=("RougeL_stemFalse",), **reports):
    """A plan's fields the report pass reads; ``reports``: ReportSettings' fields to change."""
    base = dict(calibration=SimpleNamespace(human=None), significance=SignificanceConf(resamples=200),
                agreement=SimpleNamespace(human=None, pairs=[], bootstrap=50, seed=0), export_csv=False,
                html_report=False)
    return SimpleNamespace(metrics=list(metrics), panel_columns=lambda: [], steps=list(steps), columns={},
                           reports=ReportSettings(**{**base, **reports}))


def recs(models=("a", "b"), tasks=6) -> list[dict]:
    return [{"task_id": f"t{t}", "model_id": m, "answer": "x", "metrics": {"RougeL_stemFalse": [(t + i) / 10]},
             "error": None, "ragscale": {"record_key": f"{m}{t}"}} for i, m in enumerate(models) for t in range(tasks)]


def test_the_sinks_a_run_opens(tmp_path):
    d = run_dir(tmp_path, recs())
    human = tmp_path / "h.jsonl"
    human.write_text(json.dumps({"task_id": "t1", "RougeL_stemFalse": 0.5}) + "\n")
    out = Outputs(plan(), d)
    assert list(out.sinks) == ["leaderboard"] and out.paired is not None and out.groups is None and out.calibration is None
    out = Outputs(plan(steps=("retrieval", "consistency"), significance=SignificanceConf(enabled=False), export_csv=True,
                       html_report=True, agreement=SimpleNamespace(human=str(human), pairs=[], bootstrap=50, seed=0)), d)
    assert list(out.sinks) == ["leaderboard", "open_rag_eval_csv", "agreement", "html_report"] and out.paired is None
    assert out.groups is not None
    # the export only for a TREC step
    assert "open_rag_eval_csv" not in Outputs(plan(export_csv=True), d).sinks


def test_what_the_console_says(tmp_path):
    rows = recs() + [{"model_id": "a", "metrics": {"RougeL_stemFalse": [0.1]}, "error": None,
                      "ragscale": {"record_key": "a-keyless"}}]
    rows.append({"task_id": "t0", "model_id": "a", "error": {"stage": "input", "message": "line 9 " + REPEAT},
                 "ragscale": {"record_key": "a-t0-repeat"}})
    printed: list[str] = []
    out = Outputs(plan(), run_dir(tmp_path, rows), printed.append)
    out.read()
    summary = out.finish_summary()
    assert summary["significance"]["metrics"]
    assert printed[-1] == ("[ragscale] warning: 1 record repeats an earlier answer of its model to its task: only the "
                          "first answer is scored, each repeat is an input error (summary.json duplicates)")
    assert "[ragscale] significance: 1 record(s) without a task_id, query_id or conversation_id + turn left out " \
           "(nothing to pair them by)" in printed
    line = next(p for p in printed if "paired comparisons" in p)
    assert line.startswith("[ragscale] significance: 1 paired comparisons (all-pairs, 1 metric(s), 200 resamples) in ")
    assert not out.failed


def test_a_failing_sink_is_a_warning_and_the_rest_is_written(tmp_path):
    d = run_dir(tmp_path, recs(models=("a", "b", "c")))
    printed: list[str] = []
    out = Outputs(plan(steps=("retrieval",), export_csv=True), d, printed.append)

    class Broken:
        def add(self, rec):
            raise OSError("disk full")

    out.sinks["broken"] = ("broken export", Broken())
    out.read()
    out.finish_reports(out.finish_summary(), {"status": "ok"})
    assert out.failed == ["broken export: OSError: disk full"]
    assert "[ragscale] warning: broken export failed: OSError: disk full" in printed
    assert "broken" not in out.sinks  # dropped after its first failure: one warning, not one per record
    assert sorted(os.listdir(os.path.join(d, "open-rag-eval"))) == ["a.csv", "b.csv", "c.csv"]
    assert os.path.exists(os.path.join(d, "summary.json")) and os.path.exists(os.path.join(d, "leaderboard.md"))


def test_run_json_outputs_name_every_file_written(tmp_path):
    d = run_dir(tmp_path, recs(models=("b", "a")))
    out = Outputs(plan(steps=("retrieval",), export_csv=True), d)
    out.read()
    written = out.finish_reports(out.finish_summary(), {"status": "ok"})
    assert written == {"leaderboard": ["leaderboard.md", "leaderboard.csv"], "significance": ["significance.csv"],
                       "open_rag_eval_csv": ["open-rag-eval/a.csv", "open-rag-eval/b.csv"]}
    assert all(os.path.exists(os.path.join(d, p)) for paths in written.values() for p in paths)
    # ragscale.load(run_dir).files: the core files and every file the sinks wrote, as run.json lists them
    from ragscale.api import Run

    with open(os.path.join(d, "run.json"), "w") as fh:
        json.dump({"status": "ok", "outputs": {**written, "html_report": "report.html"}}, fh)
    assert list(Run(d).files) == ["records.jsonl", "records.parquet", "summary.json", "summary.csv", "run.json",
                                  "leaderboard.md", "leaderboard.csv", "significance.csv", "open-rag-eval/a.csv",
                                  "open-rag-eval/b.csv"]  # report.html: listed, not written here
    nothing = Outputs(plan(significance=SignificanceConf(enabled=False)), run_dir(tmp_path / "x", []))
    nothing.read()
    assert nothing.finish_reports(nothing.finish_summary(), {}) == {}


def test_a_new_sink_is_one_spec(tmp_path, monkeypatch):
    """docs/architecture.md, "Adding a report sink": a SinkSpec in SINKS is opened from the plan's
    settings, fed every record of the one pass, finished after the leaderboard with the summary, and
    its files land in run.json's outputs."""
    from ragscale.report import sinks

    class Counts:
        def __init__(self, out_dir):
            self.path, self.n = os.path.join(out_dir, "counts.txt"), 0

        def add(self, rec):
            self.n += 1

        def finish(self, done):
            with open(self.path, "w") as fh:
                fh.write(f"{self.n} records, {len(done.summary['models'])} models\n")
            return {"counts": [done.rel(self.path)]}

    spec = sinks.SinkSpec("counts", "record counts", lambda settings, plan, out_dir: Counts(out_dir))
    monkeypatch.setattr(sinks, "SINKS", (*sinks.SINKS, spec))
    d = run_dir(tmp_path, recs())
    out = Outputs(plan(), d)
    out.read()
    written = out.finish_reports(out.finish_summary(), {"status": "ok"})
    assert list(written) == ["leaderboard", "significance", "counts"] and written["counts"] == ["counts.txt"]
    assert open(os.path.join(d, "counts.txt")).read() == "12 records, 2 models\n"
