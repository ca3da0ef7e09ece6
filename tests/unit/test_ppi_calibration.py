"""Human-calibrated estimates (ragscale.report.calibration): the PPI++ estimator against its
formula, a simulation of coverage and width (the issue's proof), scale maps, and the block a run
gets (too few labels, unstated scales, errors and nulls, comparisons, the calibrated ranking)."""

import csv
import json
import os
from types import SimpleNamespace

import numpy as np
import pytest

from ragscale.config import CalibrationConf, SignificanceConf
from ragscale.errors import UserError
from ragscale.report import calibration as cal
from ragscale.report import calibration_settings as cs
from ragscale.report.leaderboard import format_markdown
from ragscale.report.ranking import ranking, standings
from ragscale.stats import ppi

pytestmark = pytest.mark.usefixtures("needs_ppi")


# ---------------------------------------------------------------- the estimator


def test_calibrated_estimate_is_the_power_tuned_ppi_formula():
    rng = np.random.default_rng(3)
    y = rng.random(60)
    yhat = 0.5 * y + 0.3 + rng.normal(0, 0.1, 60)
    yu = 0.5 * rng.random(500) + 0.3 + rng.normal(0, 0.1, 500)
    e = ppi.estimate(y, yhat, yu)
    lam = e["calibrated"]["lambda"]
    assert 0 < lam <= 1
    assert e["calibrated"]["mean"] == pytest.approx(lam * yu.mean() + (y - lam * yhat).mean(), abs=1e-12)
    assert e["naive"]["mean"] == pytest.approx(np.concatenate([yhat, yu]).mean())
    assert e["human_only"]["mean"] == pytest.approx(y.mean())
    for k in ("naive", "human_only", "calibrated"):
        lo, hi = e[k]["ci"]
        assert lo < e[k]["mean"] < hi


def test_a_perfect_judge_narrows_and_a_useless_one_is_ignored():
    rng = np.random.default_rng(4)
    y, yu = rng.random(100), rng.random(2000)
    perfect = ppi.estimate(y, y, yu)
    width = {k: np.diff(perfect[k]["ci"])[0] for k in ("human_only", "calibrated")}
    assert width["calibrated"] < 0.5 * width["human_only"]
    noise = ppi.estimate(y, rng.random(100), rng.random(2000))
    assert noise["calibrated"]["lambda"] < 0.3
    assert np.diff(noise["calibrated"]["ci"])[0] < 1.1 * np.diff(noise["human_only"]["ci"])[0]


def test_every_record_labelled_or_a_constant_judge_gives_the_human_mean():
    y = np.array([1.0, 0.0, 1.0, 1.0])
    for yu in (np.empty(0), np.full(3, 0.5)):
        e = ppi.estimate(y, np.full(4, 0.5), yu)
        assert e["calibrated"]["mean"] == e["human_only"]["mean"] == 0.75
        assert e["calibrated"]["ci"] == e["human_only"]["ci"] and e["calibrated"]["lambda"] == 0.0


def test_simulation_coverage_and_width():
    """A judge with a known bias and noise, 200 repetitions: the naive interval misses the true
    mean, PPI++ covers it at least 90% of the time with a narrower interval than humans alone."""
    rng = np.random.default_rng(2024)
    truth, reps, n, big = 0.6, 200, 150, 2000
    covered = {"naive": 0, "human_only": 0, "calibrated": 0}
    width = {"human_only": 0.0, "calibrated": 0.0}
    for _ in range(reps):
        y = rng.binomial(1, truth, big + n).astype(float)
        yhat = np.clip(0.7 * y + 0.25 + rng.normal(0, 0.15, big + n), 0, 1)  # biased upwards, noisy
        e = ppi.estimate(y[:n], yhat[:n], yhat[n:])
        for k in covered:
            lo, hi = e[k]["ci"]
            covered[k] += lo <= truth <= hi
        for k in width:
            width[k] += np.diff(e[k]["ci"])[0] / reps
    assert covered["naive"] / reps < 0.5
    assert covered["calibrated"] / reps >= 0.9
    assert width["calibrated"] < width["human_only"]


def test_difference_is_ppi_on_the_paired_difference():
    rng = np.random.default_rng(5)
    d = rng.normal(0.3, 0.2, 40)
    dhat = d + rng.normal(0.1, 0.05, 40)
    du = rng.normal(0.4, 0.2, 400)
    est, ci, p = ppi.difference(d, dhat, du, 0.95)
    assert ci[0] < est < ci[1] and p < 0.001
    est0, ci0, p0 = ppi.difference(np.zeros(30), np.full(30, 0.1), np.empty(0), 0.95)
    assert (est0, ci0, p0) == (0.0, [0.0, 0.0], 1.0)


# ---------------------------------------------------------------- scale maps and settings


def test_scale_maps():
    maps = cs.parse_maps(["faithfulness=1..4:0..1", "grade=yes:1,no:0", "stars=1:0,2:0.5,3:1"])
    f = maps["faithfulness"]
    assert (f(1), f(4), f(2.5)) == (0.0, 1.0, 0.5)
    assert (maps["grade"](1.0), maps["grade"](0.0)) == (1.0, 0.0)
    assert maps["stars"](2.0) == 0.5
    with pytest.raises(UserError, match=r"human value 5 is not mapped \(mapped: 1, 2, 3\)"):
        maps["stars"](5.0)


@pytest.mark.parametrize("spec, message", [
    ("faithfulness", "expected HUMAN=A..B:C..D"),
    ("faithfulness=2..2:0..1", "the human range 2..2 is empty"),
    ("faithfulness=1..x:0..1", "'x' is not a number"),
    ("faithfulness=1..4", "a linear map is A..B:C..D"),
    ("grade=yes", "'yes' is not VALUE:MAPPED"),
    ("grade=maybe:1", "'maybe' is not a human value"),
])
def test_bad_scale_maps(spec, message):
    with pytest.raises(UserError, match=message):
        cs.parse_maps([spec])


@pytest.mark.parametrize("key, value, message", [
    ("min_labels", 1, "min_labels must be an integer >= 2"),
    ("min_labels", True, "min_labels must be an integer >= 2"),
    ("confidence", 1.0, "confidence must be a number between 0 and 1"),
])
def test_bad_settings(key, value, message):
    with pytest.raises(UserError, match=f"calibration.{message}"):
        cs.check_settings(CalibrationConf(**{key: value}))


def test_missing_labels_file_fails_before_the_run(tmp_path):
    """The report pass's settings are checked at plan time (ragscale.report.sinks.check_reports)."""
    from ragscale.config import AgreementConf
    from ragscale.report.sinks import ReportSettings, check_reports

    def check(calibration: CalibrationConf) -> None:
        check_reports(ReportSettings(SignificanceConf(), calibration, AgreementConf()), ["RL_F"])

    with pytest.raises(UserError, match="calibration.human: no such file"):
        check(CalibrationConf(human=str(tmp_path / "none.jsonl")))
    labels = tmp_path / "h.jsonl"
    labels.write_text(json.dumps({"task_id": "t1", "faithfulness": 1}) + "\n")
    with pytest.raises(UserError, match="is not a paired human metric"):
        check(CalibrationConf(human=str(labels), pairs=["faithfulness=RL_F"], map=["other=1..4:0..1"]))
    check(CalibrationConf(human=str(labels), pairs=["faithfulness=RL_F"]))


# ---------------------------------------------------------------- a run's block


MODELS = {"alpha": (0.8, 0.3), "beta": (0.5, 0.7)}  # judged mean, human mean: the judge flatters alpha


def make_run(tmp_path, labelled=30, tasks=60, scale=(0.0, 1.0), broken=0):
    """A run of two models on ``tasks`` tasks and human labels for the first ``labelled`` of each."""
    rng = np.random.default_rng(7)
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    recs, labels = [], []
    for model, (judged, human) in MODELS.items():
        for t in range(tasks):
            h = float(rng.random() < human)
            value = None if t < broken else float(np.clip(judged + 0.2 * (h - human) + rng.normal(0, 0.05), 0, 1))
            recs.append({"task_id": f"t{t}", "model_id": model, "metrics": {"RL_F": None if value is None else [value]},
                         "ragscale": {"record_key": f"{model}-{t}", "warnings": []},
                         "error": {"stage": "judge", "message": "x"} if t == 0 and broken else None})
            if t < labelled:
                labels.append({"task_id": f"t{t}", "model_id": model, "faithfulness": scale[0] + h * (scale[1] - scale[0])})
    with open(run / "records.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    summary = {"metrics": ["RL_F"], "models": {
        m: {"count": tasks, "errors": 0, "metrics": {"RL_F": float(np.mean([r["metrics"]["RL_F"][0] for r in recs
                                                                           if r["model_id"] == m
                                                                           and r["metrics"]["RL_F"] is not None]))},
            "n": {"RL_F": tasks}} for m in MODELS}}
    with open(run / "summary.json", "w") as fh:
        json.dump(summary, fh)
    path = tmp_path / "human.jsonl"
    with open(path, "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in labels)
    return run, str(path), recs, summary


def settings(**kw):
    return CalibrationConf(**{"min_labels": 20, **kw})


def test_block_matches_the_estimator_and_ranks_by_the_calibrated_mean(tmp_path):
    run, human, recs, summary = make_run(tmp_path)
    block = cal.calibrate(str(run), human, ["faithfulness=RL_F"], [], settings(), SignificanceConf(), summary)
    labels = {(r["model_id"], r["task_id"]): r["faithfulness"] for r in map(json.loads, open(human))}
    for model in MODELS:
        mine = [r for r in recs if r["model_id"] == model]
        lab = [(labels[(model, r["task_id"])], r["metrics"]["RL_F"][0]) for r in mine
               if (model, r["task_id"]) in labels]
        rest = [r["metrics"]["RL_F"][0] for r in mine if (model, r["task_id"]) not in labels]
        want = ppi.estimate(np.array([a for a, _ in lab]), np.array([b for _, b in lab]), np.array(rest))
        got = block["metrics"]["RL_F"]["models"][model]
        assert (got["n_labeled"], got["n_records"]) == (30, 60) and got["message"] is None
        for k in ("naive", "human_only", "calibrated"):
            assert got[k]["mean"] == pytest.approx(want[k]["mean"], abs=1e-12)
            assert got[k]["ci"] == pytest.approx(want[k]["ci"], abs=1e-12)
    assert block["ranked_by"] == "RL_F"
    # the judge ranks alpha first; the humans and the calibrated means rank beta first
    naive = {m: summary["models"][m]["metrics"]["RL_F"] for m in MODELS}
    assert max(naive, key=naive.get) == "alpha"
    summary["calibration"] = block
    assert ranking(summary) == ("RL_F", True)
    assert [m for _, m, _ in standings(summary)] == ["beta", "alpha"]
    md = format_markdown(summary)
    assert "ranked by the **calibrated** mean of **RL_F**" in md and "| 1 | beta |" in md
    # the calibrated comparison: beta better, PPI++ on the paired difference over 30 tasks
    (entry,) = block["comparisons"]["RL_F"]
    assert (entry["a"], entry["b"], entry["n"]) == ("beta", "alpha", 30)
    assert entry["significant"] and entry["better"] == "beta" and entry["method"] == cal.DIFF_METHOD


def test_too_few_labels_is_a_message_not_a_number(tmp_path):
    run, human, _, summary = make_run(tmp_path, labelled=8)
    block = cal.calibrate(str(run), human, ["faithfulness=RL_F"], [], settings(), SignificanceConf(), summary)
    for r in block["metrics"]["RL_F"]["models"].values():
        assert r["calibrated"] is None and r["human_only"] is None and r["naive"] is not None
        assert r["message"] == "8 human labels with a judged value; at least 20 are needed (calibration.min_labels)"
    assert block["ranked_by"] is None
    (entry,) = block["comparisons"]["RL_F"]
    assert entry["p"] is None and "8 task(s) labelled for both; at least 20 needed" in entry["note"]
    assert "8 human labels" in cal.to_markdown(block)


def test_scales_are_stated_never_guessed(tmp_path):
    run, human, _, summary = make_run(tmp_path, scale=(1.0, 4.0))
    with pytest.raises(UserError, match=r"human faithfulness takes values 1\.\.4, outside RL_F's range 0\.\.1; "
                                        r"state how its labels map onto RL_F, e\.g\. "
                                        r"calibration\.map=\[faithfulness=1\.\.4:0\.\.1\]"):
        cal.calibrate(str(run), human, ["faithfulness=RL_F"], [], settings(), SignificanceConf(), summary)
    mapped = cal.calibrate(str(run), human, ["faithfulness=RL_F"], ["faithfulness=1..4:0..1"], settings(),
                           SignificanceConf(), summary)
    (tmp_path / "plain").mkdir()
    run01, human01, _, _ = make_run(tmp_path / "plain")  # the same labels on 0..1
    plain = cal.calibrate(str(run01), human01, ["faithfulness=RL_F"], [], settings(), SignificanceConf(), summary)
    for model in MODELS:
        a, b = (blk["metrics"]["RL_F"]["models"][model]["calibrated"] for blk in (mapped, plain))
        assert a["mean"] == pytest.approx(b["mean"], abs=1e-12)
    assert mapped["metrics"]["RL_F"]["mapping"] == "1..4:0..1 (linear)"
    with pytest.raises(UserError, match=r"mapped human values span 0\.\.3, outside RL_F's range 0\.\.1"):
        cal.calibrate(str(run), human, ["faithfulness=RL_F"], ["faithfulness=1..4:0..3"], settings(),
                      SignificanceConf(), summary)


def test_errors_and_nulls_are_not_judged(tmp_path):
    run, human, _, summary = make_run(tmp_path, broken=3)
    block = cal.calibrate(str(run), human, ["faithfulness=RL_F"], [], settings(), SignificanceConf(), summary)
    for r in block["metrics"]["RL_F"]["models"].values():
        assert (r["n_records"], r["n_labeled"], r["labeled_without_judge"]) == (57, 27, 3)


def test_no_matching_labels_and_no_pairs(tmp_path):
    run, _, _, summary = make_run(tmp_path)
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"task_id": "zzz", "faithfulness": 1}) + "\n")
    with pytest.raises(UserError, match="no record of the run has a human label"):
        cal.calibrate(str(run), str(other), ["faithfulness=RL_F"], [], settings(), SignificanceConf(), summary)
    with pytest.raises(UserError, match="no metric pairs"):
        cal.calibrate(str(run), str(other), [], [], settings(), SignificanceConf(), summary)
    os.remove(run / "summary.json")
    with pytest.raises(UserError, match="no summary.json"):
        cal.calibrate(str(run), str(other), [], [], settings())


def test_outputs_read_back(tmp_path):
    run, human, _, summary = make_run(tmp_path)
    block = cal.calibrate(str(run), human, ["faithfulness=RL_F"], [], settings(), SignificanceConf(), summary)
    paths = cal.write_outputs(block, str(tmp_path / "out"))
    assert sorted(os.path.basename(p) for p in paths.values()) == ["calibration.csv", "calibration.json",
                                                                   "calibration.md"]
    rows = list(csv.DictReader(open(paths["csv"], newline="")))
    assert [r["model"] for r in rows] == list(MODELS)
    for r in rows:
        b = block["metrics"]["RL_F"]["models"][r["model"]]
        assert float(r["calibrated_mean"]) == pytest.approx(b["calibrated"]["mean"], rel=1e-5)
        assert float(r["calibrated_ci_low"]) == pytest.approx(b["calibrated"]["ci"][0], rel=1e-5)
        assert float(r["lambda"]) == pytest.approx(b["calibrated"]["lambda"], rel=1e-5)
        assert int(r["n_labeled"]) == 30 and r["human"] == "faithfulness"
    assert json.load(open(paths["json"])) == json.loads(json.dumps(block))


def test_a_failing_calibration_is_a_warning_at_the_end_of_a_run(tmp_path):
    """The run's own results stand: the sink reports the unstated scale and writes no block."""
    from ragscale.report.sinks import Outputs, ReportSettings

    run, human, recs, _ = make_run(tmp_path, scale=(1.0, 4.0))
    printed = []
    reports = ReportSettings(calibration=settings(human=human, pairs=["faithfulness=RL_F"]),
                             significance=SignificanceConf(), agreement=SimpleNamespace(human=None), export_csv=False,
                             html_report=False)
    plan = SimpleNamespace(metrics=["RL_F"], panel_columns=lambda: [], steps=["ragas"], columns={}, reports=reports)
    out = Outputs(plan, str(run), printed.append)
    out.read()
    summary = out.finish_summary()
    assert "calibration" not in summary
    assert any("warning: calibration failed: calibration: human faithfulness takes values 1..4" in p for p in printed)
