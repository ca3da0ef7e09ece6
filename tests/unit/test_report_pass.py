"""The report pass with everything on (ragscale.report.sinks.Outputs, issue 37): a run with human
labels writes the calibration and agreement files and the HTML report, each in its folder and
named in run.json's outputs, with the settings the plan gave; an output that fails, while the
records are read or when it is finished, is one warning line under its own name, the run's
later outputs see the run as incomplete, and nothing else is lost."""

from __future__ import annotations

import datetime
import json
import os

import pytest

from ragscale.config import AgreementConf, CalibrationConf, SignificanceConf
from ragscale.errors import UserError
from ragscale.exitcodes import INCOMPLETE, STATUS
from ragscale.report import sinks
from ragscale.report.sinks import Outputs, ReportSettings, check_reports
from test_sinks import plan, recs, run_dir

METRIC = "RougeL_stemFalse"


def _human(tmp_path, tasks: int = 8) -> str:
    path = tmp_path / "human.jsonl"
    path.write_text("".join(json.dumps({"task_id": f"t{t}", "model_id": m, METRIC: round((t + i) / 10 * 0.9, 3)})
                            + "\n" for i, m in enumerate(("a", "b")) for t in range(tasks)))
    return str(path)


def _labelled(tmp_path, **reports):
    human = _human(tmp_path)
    return plan(calibration=CalibrationConf(human=human, min_labels=3),
                agreement=AgreementConf(human=human, bootstrap=30, seed=3), html_report=True, **reports)


def test_a_run_with_human_labels_writes_every_report(tmp_path):
    d = run_dir(tmp_path, recs(tasks=8))
    printed: list[str] = []
    out = Outputs(_labelled(tmp_path), d, printed.append)
    out.read()
    summary = out.finish_summary()
    written = out.finish_reports(summary, {"status": "ok", "started": datetime.datetime(2026, 1, 1)})
    assert written == {"leaderboard": ["leaderboard.md", "leaderboard.csv"], "significance": ["significance.csv"],
                       "calibration": ["calibration/calibration.csv", "calibration/calibration.json",
                                       "calibration/calibration.md"],
                       "agreement": ["agreement/agreement.csv", "agreement/agreement.json", "agreement/agreement.md",
                                     "agreement/agreement.png"],
                       "html_report": "report.html"}
    assert all(os.path.isfile(os.path.join(d, p)) for v in written.values() for p in ([v] if isinstance(v, str) else v))
    assert printed[0] == ("[ragscale] calibration: 16 record(s) with human labels, 1 metric(s) calibrated; the "
                          f"leaderboard ranks by calibrated {METRIC}")
    assert not out.failed and summary["calibration"]["matched"] == 16
    agreement = json.load(open(os.path.join(d, "agreement", "agreement.json")))
    assert agreement["bootstrap"]["replicates"] == 30 and agreement["bootstrap"]["seed"] == 3  # the plan's settings
    assert agreement["run_dir"] == d and {r["model"] for r in agreement["rows"]} == {"a", "b", "ALL"}
    page = open(os.path.join(d, "report.html"), encoding="utf-8").read()
    assert METRIC in page and "2026-01-01" in page  # run.json's values as written (a date as its text)
    assert 'href="#significance"' in page and "summary.json is missing" not in page  # the run's own summary


def test_the_calibration_line_without_a_ranking(tmp_path, monkeypatch):
    from ragscale.report.calibration import CalibrationSink

    finish = CalibrationSink.finish
    seen = []

    def unranked(self, summary, significance):
        seen.append((summary, significance))
        return {**finish(self, summary, significance), "ranked_by": None}

    monkeypatch.setattr(CalibrationSink, "finish", unranked)
    printed: list[str] = []
    out = Outputs(_labelled(tmp_path), run_dir(tmp_path, recs(tasks=8)), printed.append)
    out.read()
    summary = out.finish_summary()
    assert printed[0] == "[ragscale] calibration: 16 record(s) with human labels, 1 metric(s) calibrated"
    assert seen[0][1] is out.settings.significance and set(seen[0][0]["models"]) == {"a", "b"}
    assert summary["calibration"]["ranked_by"] is None


@pytest.mark.parametrize("where, label", [("ragscale.report.significance.PairedValues", "significance"),
                                          ("ragscale.report.jury.JuryValues", "jury"),
                                          ("ragscale.report.calibration.CalibrationSink", "calibration")])
def test_a_block_that_fails_on_a_record_is_one_warning(tmp_path, monkeypatch, where, label):
    """Dropped at its first failure (one warning, not one a record); the summary and the other
    outputs are written."""
    import importlib

    module, name = where.rsplit(".", 1)
    monkeypatch.setattr(getattr(importlib.import_module(module), name), "add",
                        lambda self, rec: (_ for _ in ()).throw(ValueError("bad record")))
    printed: list[str] = []
    p = _labelled(tmp_path)
    p.panel_columns = lambda: [f"{METRIC}@j1", f"{METRIC}@j2"]
    out = Outputs(p, run_dir(tmp_path, recs(tasks=8)), printed.append)
    assert out.jury is not None
    out.read()
    want = f"{label}: ValueError: bad record"
    assert out.failed == [want] and printed == [f"[ragscale] warning: {label} failed: ValueError: bad record"]
    assert getattr(out, {"significance": "paired"}.get(label, label)) is None
    summary = out.finish_summary()
    assert set(summary["models"]) == {"a", "b"}


def test_a_failing_block_at_the_end_is_a_warning(tmp_path, monkeypatch):
    import ragscale.report.calibration as calibration
    import ragscale.report.significance as significance

    monkeypatch.setattr(significance, "for_summary", lambda *a: (_ for _ in ()).throw(RuntimeError("no pairs")))
    monkeypatch.setattr(calibration.CalibrationSink, "finish",
                        lambda *a: (_ for _ in ()).throw(UserError("labels on an unstated scale")))
    printed: list[str] = []
    out = Outputs(_labelled(tmp_path), run_dir(tmp_path, recs(tasks=8)), printed.append)
    out.read()
    summary = out.finish_summary()
    assert out.failed == ["calibration: labels on an unstated scale", "significance: RuntimeError: no pairs"]
    assert "calibration" not in summary and "significance" not in summary and set(summary["models"]) == {"a", "b"}
    assert printed == ["[ragscale] warning: calibration failed: labels on an unstated scale",
                       "[ragscale] warning: significance failed: RuntimeError: no pairs"]


def test_later_outputs_see_the_run_as_incomplete(tmp_path):
    """A sink that fails when finished, a sink that wrote only some of its files (its
    ``failures``): each a warning under its label, and the sinks finished after them get run.json
    as written, with the status and outputs_failed it will have."""
    out = Outputs(plan(), run_dir(tmp_path, recs()), lambda line: None)
    seen = []

    class Broken:
        def add(self, rec):
            pass

        def finish(self, done):
            raise OSError("disk full")

    class Partial(Broken):
        failures = ("b.csv: OSError: no space",)

        def finish(self, done):
            return {"partial": ["a.csv"]}

    class Seer(Broken):
        def finish(self, done):
            seen.append((dict(done.run_info), done))  # as it was when this sink finished
            return {}

    out.sinks = {"first": ("first seer", Seer()), "broken": ("broken export", Broken()),
                 "partial": ("partial export", Partial()), "seer": ("last seer", Seer())}
    out.read()
    summary = out.finish_summary()
    written = out.finish_reports(summary, {"status": "ok", "when": datetime.date(2026, 1, 2)})
    assert written == {"partial": ["a.csv"]}
    assert out.failed == ["broken export: OSError: disk full", "partial export: b.csv: OSError: no space"]
    assert seen[0][0] == {"status": "ok", "when": "2026-01-02"}  # before any failure: as given
    assert seen[1][0] == {"status": STATUS[INCOMPLETE], "when": "2026-01-02", "outputs_failed": out.failed}
    assert seen[1][1].summary is summary and seen[1][1].out_dir == out.out_dir


def test_a_sink_that_cannot_open_is_a_warning_and_the_others_open(tmp_path, monkeypatch):
    def refuse(settings, plan, out_dir):
        raise OSError("read-only folder")

    spec = sinks.SinkSpec("refused", "refused export", refuse)
    monkeypatch.setattr(sinks, "SINKS", (sinks.SINKS[0], spec, *sinks.SINKS[1:]))
    printed: list[str] = []
    out = Outputs(plan(html_report=True), run_dir(tmp_path, recs()), printed.append)
    assert list(out.sinks) == ["leaderboard", "html_report"]
    assert out.failed == ["refused export: OSError: read-only folder"]
    assert printed == ["[ragscale] warning: refused export failed: OSError: read-only folder"]


def test_the_records_are_read_through_the_users_columns_and_grouped_for_consistency(tmp_path):
    rows = recs(tasks=2)
    for r in rows:
        r["system"] = r.pop("model_id")
        r["query_id"], r["query_run"] = r["task_id"], 1
    rows += [{**r, "query_run": 2} for r in rows]
    p = plan(steps=("retrieval", "consistency"), significance=SignificanceConf(enabled=False))
    p.columns = {"model_id": "system"}
    out = Outputs(p, run_dir(tmp_path, rows))
    out.read()
    assert set(out.summary.finish(None, None, None, lambda s: {})["models"]) == {"a", "b"}
    groups = out.groups.groups
    assert set(groups) == {("a", "t0"), ("a", "t1"), ("b", "t0"), ("b", "t1")}
    assert groups[("b", "t1")]["values"][METRIC] == [pytest.approx(0.2), pytest.approx(0.2)]


def test_the_agreement_settings_are_checked_at_plan_time(tmp_path):
    def settings(**agreement):
        return ReportSettings(SignificanceConf(), CalibrationConf(), AgreementConf(**agreement))

    missing = str(tmp_path / "nope.jsonl")
    with pytest.raises(UserError, match=f"^agreement.human: no such file: {missing}$"):
        check_reports(settings(human=missing), [METRIC])
    human = _human(tmp_path)
    with pytest.raises(UserError):
        check_reports(settings(human=human, pairs=["no-equals-sign"]), [METRIC])
    check_reports(settings(human=human, pairs=[f"{METRIC}={METRIC}"]), [METRIC])
    check_reports(settings(), [METRIC])


def test_a_plugins_sink_follows_ragscales_own(monkeypatch):
    from ragscale.registry import REGISTRY

    spec = sinks.SinkSpec("counts", "record counts", lambda settings, plan, out_dir: None)
    monkeypatch.setattr(REGISTRY, "entries", lambda kind: {**{s.key: s for s in sinks.SINKS}, "counts": spec})
    assert sinks.sink_specs() == (*sinks.SINKS, spec)


def test_calibration_that_cannot_start_is_a_warning(tmp_path, monkeypatch):
    from ragscale.report.calibration import CalibrationSink

    def refuse(self, *a, **k):
        raise UserError("calibration.pairs: no metric RL_F in this run")

    monkeypatch.setattr(CalibrationSink, "__init__", refuse)
    printed: list[str] = []
    out = Outputs(_labelled(tmp_path), run_dir(tmp_path, recs(tasks=8)), printed.append)
    assert out.calibration is None and out.failed == ["calibration: calibration.pairs: no metric RL_F in this run"]
    out.read()
    assert "calibration" not in out.finish_summary()


def test_the_summary_blocks_follow_the_plans_settings(tmp_path):
    """Intervals resampled by the plan's unit, slices by its fields, the jury of its panel, the
    consistency block given, repeats counted in the console line, the significance line's time."""
    from ragscale.config import SlicesConf
    from ragscale.io.identity import REPEAT

    rows = recs(tasks=8)
    for r in rows:
        t = int(r["task_id"][1:])
        r["conversation_id"], r["kind"] = f"c{t // 2}", "even" if t % 2 == 0 else "odd"
        r["metrics"].update({f"{METRIC}@j1": r["metrics"][METRIC], f"{METRIC}@j2": [t / 10]})
    rows += [{"task_id": "t0", "model_id": "a", "error": {"stage": "input", "message": "line 9 " + REPEAT},
              "ragscale": {"record_key": f"a-t0-repeat{i}"}} for i in range(2)]
    p = plan(cluster_by="conversation_id", slices=SlicesConf(by=["kind"], min_n=2))
    p.panel_columns = lambda: [f"{METRIC}@j1", f"{METRIC}@j2"]
    printed: list[str] = []
    out = Outputs(p, run_dir(tmp_path, rows), printed.append)
    out.read()
    summary = out.finish_summary({"groups": 0})
    assert summary["consistency"] == {"groups": 0}
    assert summary["intervals"]["unit"]["by"] == "conversation_id" and summary["intervals"]["unit"]["units"] == 4
    assert summary["slices"]["by"] == ["kind"] and set(summary["jury"]["metrics"][METRIC]["judges"]) == {"j1", "j2"}
    assert ("[ragscale] warning: 2 records repeat an earlier answer of its model to its task: only the first "
            "answer is scored, each repeat is an input error (summary.json duplicates)") in printed
    line = next(x for x in printed if "paired comparisons" in x)
    assert 0 <= float(line.rsplit(" in ", 1)[1].rstrip("s")) < 60
    assert not out.failed


def test_no_significance_block_without_its_values(tmp_path):
    out = Outputs(plan(significance=SignificanceConf(enabled=False)), run_dir(tmp_path, recs()))
    out.read()
    summary = out.finish_summary()
    assert "significance" not in summary and "intervals" not in summary and not out.failed


def test_calibration_and_agreement_take_the_plans_unit_and_pairs(tmp_path):
    rows = recs(tasks=8)
    for r in rows:
        r["conversation_id"] = f"c{int(r['task_id'][1:]) // 2}"
    human = tmp_path / "grades.jsonl"
    human.write_text("".join(json.dumps({"task_id": r["task_id"], "model_id": r["model_id"],
                                         "grade": r["metrics"][METRIC][0]}) + "\n" for r in rows))
    p = plan(cluster_by="conversation_id", calibration=CalibrationConf(human=str(human), min_labels=3,
                                                                       pairs=[f"grade={METRIC}"]),
             agreement=AgreementConf(human=str(human), pairs=[f"grade={METRIC}"], bootstrap=20))
    d = run_dir(tmp_path, rows)
    out = Outputs(p, d, lambda line: None)
    out.read()
    summary = out.finish_summary()
    assert summary["calibration"]["unit"]["by"] == "conversation_id" and summary["calibration"]["unit"]["units"] == 4
    alone = Outputs(plan(calibration=p.reports.calibration), run_dir(tmp_path / "alone", rows), lambda line: None)
    alone.read()  # the plan's unit is each task on its own: so is calibration's, conversations or not
    assert alone.finish_summary()["calibration"]["unit"]["by"] is None
    out.finish_reports(summary, {})
    agreement = json.load(open(os.path.join(d, "agreement", "agreement.json")))
    assert agreement["pairs"] == {"grade": METRIC} and agreement["bootstrap"]["by"] == "conversation_id"


def test_a_jury_block_that_fails_at_the_end_is_a_warning(tmp_path, monkeypatch):
    from ragscale.report.jury import JuryValues

    monkeypatch.setattr(JuryValues, "block", lambda self: (_ for _ in ()).throw(ValueError("no pairs of judges")))
    p = plan()
    p.panel_columns = lambda: [f"{METRIC}@j1", f"{METRIC}@j2"]
    printed: list[str] = []
    out = Outputs(p, run_dir(tmp_path, recs()), printed.append)
    out.read()
    summary = out.finish_summary()
    assert out.failed == ["jury: ValueError: no pairs of judges"] and "jury" not in summary and "intervals" in summary
