"""What the plan decides for the report pass (``RunPlan.reports``, ragscale.report.sinks.ReportSettings)
and for the judges (``judge_settings``): the config's blocks as plain dataclasses, the switches
as given, the unit of resampling, the slices, the qrels with their interpolations resolved and
their file made absolute (a file here before a bundled one), and the panel's members resolved."""

from __future__ import annotations

import os
import shutil

from ragscale.config import AgreementConf, CalibrationConf, SignificanceConf, SlicesConf
from ragscale.overrides import compose
from ragscale.plan import DATA_DIR, judge_settings, plan_run
from ragscale.report.sinks import ReportSettings

QRELS = "mtrag_retrieval_qrels.tsv"


def test_the_default_report_settings():
    reports = plan_run(compose(["+scenario=custom"])).reports
    assert reports == ReportSettings(
        significance=SignificanceConf(), calibration=CalibrationConf(), agreement=AgreementConf(), export_csv=True,
        html_report=True, cluster_by="conversation_id", slices=SlicesConf(),
        qrels={"file": None, "k": [1, 3, 5, 10], "measures": ["Recall", "nDCG"], "fill": None,
               "mtrag_rounding": False, "keep_identical_ids": False})
    assert [type(b) for b in (reports.significance, reports.calibration, reports.agreement, reports.slices)] == [
        SignificanceConf, CalibrationConf, AgreementConf, SlicesConf]


def test_the_report_switches_and_blocks_are_taken_as_given():
    reports = plan_run(compose(["+scenario=custom", "trec.export_csv=false", "html_report=false", "cluster_by=none",
                                "slices=[turn,model_id]", "slices.min_n=3", "significance.resamples=500"])).reports
    assert (reports.export_csv, reports.html_report, reports.cluster_by) == (False, False, None)
    assert reports.slices == SlicesConf(by=["turn", "model_id"], min_n=3)
    assert reports.significance == SignificanceConf(resamples=500)
    assert type(reports.slices) is SlicesConf and type(reports.significance) is SignificanceConf


def test_another_unit_of_resampling_is_kept():
    assert plan_run(compose(["+scenario=custom", "cluster_by=task_id"])).reports.cluster_by == "task_id"


def test_the_qrels_settings_are_resolved():
    qrels = plan_run(compose(["+scenario=mtrag_retrieval", "qrels.k=${trec.k_values}"])).reports.qrels
    assert qrels == {"file": os.path.join(DATA_DIR, QRELS), "k": [1, 3, 5], "measures": ["Recall", "nDCG"],
                     "fill": None, "mtrag_rounding": True, "keep_identical_ids": False}


def test_a_qrels_file_here_comes_before_the_bundled_one(tmp_path, monkeypatch):
    shutil.copy(os.path.join(DATA_DIR, QRELS), tmp_path / QRELS)
    monkeypatch.chdir(tmp_path)
    assert plan_run(compose(["+scenario=mtrag_retrieval"])).reports.qrels["file"] == str(tmp_path / QRELS)


def test_the_judge_panel_members_are_resolved():
    cfg = compose(["+scenario=mtrag", "+judge_panel=local-pair", "judge_panel.1.model=${judge.model}"])
    panel = judge_settings(cfg).panel
    assert [m["name"] for m in panel] == ["smollm2-a", "smollm2-b"]
    assert panel[1]["model"] == cfg.judge.model
    assert not [m for m in panel if "${" in str(m)]
