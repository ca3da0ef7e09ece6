"""The calibration block as a user reads it (ragscale.report.calibration, issue 37): every field of
summary.json's ``calibration``, its unit, the models' messages, the comparisons between models (both
designs, the paired difference assembled per task), the markdown and CSV files line by line, and the
errors of a run folder that cannot be calibrated. The estimator itself is tested in
tests/unit/test_ppi_calibration.py, whose run maker this reuses."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import ragscale.report.calibration as cal
from ragscale.config import SignificanceConf
from ragscale.errors import UserError
from ragscale.report.text import with_interval
from ragscale.stats import ppi
from test_ppi_calibration import make_run, settings

PAIRS = ["faithfulness=RL_F"]


def _labels(human: str) -> dict:
    return {(r["model_id"], r["task_id"]): r["faithfulness"] for r in map(json.loads, open(human))}


def test_the_blocks_fields(tmp_path):
    run, human, recs, summary = make_run(tmp_path, labelled=12, tasks=20)
    block = cal.calibrate(str(run), human, PAIRS, [], settings(min_labels=10), SignificanceConf(), summary,
                          cluster_by=None)
    assert {k: block[k] for k in ("method", "confidence", "human", "layout", "min_labels", "records", "matched")} == {
        "method": cal.METHOD, "confidence": 0.95, "human": os.path.abspath(human), "layout": "jsonl",
        "min_labels": 10, "records": 40, "matched": 24}
    assert block["unit"] == {"by": None, "name": "record", "units": 40, "count": 40,
                             "text": "every record on its own: 40 records"}
    assert (block["alpha"], block["correction"], block["design"], block["ranked_by"]) == (0.05, "holm", "all-pairs",
                                                                                          "RL_F")
    b = block["metrics"]["RL_F"]
    assert b["human"] == "faithfulness" and b["mapping"] is None and list(b["models"]) == ["alpha", "beta"]
    labels = _labels(human)
    for model, got in b["models"].items():
        judged = [r["metrics"]["RL_F"][0] for r in recs if r["model_id"] == model]
        mine = [labels[(model, f"t{t}")] for t in range(12)]
        assert got["naive"]["mean"] == pytest.approx(np.mean(judged), abs=1e-12)
        assert got["human_only"]["mean"] == pytest.approx(np.mean(mine), abs=1e-12)
        assert 0 <= got["calibrated"]["ci"][0] <= got["calibrated"]["ci"][1] <= 1  # within RL_F's bounds
        assert (got["n_labeled"], got["n_records"], got["message"]) == (12, 20, None)


def test_the_paired_difference_is_assembled_per_task(tmp_path):
    """PPI++ on (human a - human b) over the tasks labelled for both, (judged a - judged b) there
    and on the tasks judged for both but not labelled."""
    run, human, recs, summary = make_run(tmp_path, labelled=12, tasks=20)
    block = cal.calibrate(str(run), human, PAIRS, [], settings(min_labels=10), SignificanceConf(), summary,
                          cluster_by=None)
    (entry,) = block["comparisons"]["RL_F"]
    labels = _labels(human)
    judged = {(r["model_id"], r["task_id"]): r["metrics"]["RL_F"][0] for r in recs}
    a, b = entry["a"], entry["b"]
    lab = [f"t{t}" for t in range(12)]
    rest = [f"t{t}" for t in range(12, 20)]
    diff, ci, p = ppi.difference(np.array([labels[(a, t)] - labels[(b, t)] for t in lab]),
                                 np.array([judged[(a, t)] - judged[(b, t)] for t in lab]),
                                 np.array([judged[(a, t)] - judged[(b, t)] for t in rest]), 0.95)
    assert (entry["n"], entry["diff"], entry["p"]) == (12, pytest.approx(diff, abs=1e-12), pytest.approx(p, abs=1e-12))
    assert entry["ci"] == pytest.approx(list(ci), abs=1e-12)
    means = {m: block["metrics"]["RL_F"]["models"][m]["calibrated"]["mean"] for m in (a, b)}
    assert (entry["mean_a"], entry["mean_b"]) == (means[a], means[b])
    assert {k: entry[k] for k in ("significant", "better", "method")} == {"significant": True, "better": "beta",
                                                                          "method": cal.DIFF_METHOD}


def _three_models(tmp_path, labelled_c: int):
    """alpha and beta of make_run, and gamma: a copy of beta, labelled on its first ``labelled_c`` tasks."""
    run, human, recs, summary = make_run(tmp_path, labelled=12, tasks=20)
    gamma = [dict(r, model_id="gamma", ragscale={"record_key": f"gamma-{r['task_id']}"}) for r in recs
             if r["model_id"] == "beta"]
    with open(run / "records.jsonl", "a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in gamma)
    labels = [json.loads(line) for line in open(human)]
    labels += [dict(r, model_id="gamma") for r in labels
               if r["model_id"] == "beta" and int(r["task_id"][1:]) < labelled_c]
    with open(human, "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in labels)
    summary["models"]["gamma"] = summary["models"]["beta"]
    return run, human, summary


def test_three_models_against_the_leader_and_one_with_too_few_labels(tmp_path):
    run, human, summary = _three_models(tmp_path, labelled_c=1)
    block = cal.calibrate(str(run), human, PAIRS, [], settings(min_labels=10), SignificanceConf(all_pairs_max_models=2),
                          summary, cluster_by=None)
    gamma = block["metrics"]["RL_F"]["models"]["gamma"]
    assert gamma["message"] == "1 human label with a judged value; at least 10 are needed (calibration.min_labels)"
    assert gamma["calibrated"] is None and gamma["human_only"] is None and gamma["n_labeled"] == 1
    assert block["design"] == "vs-leader"
    entries = block["comparisons"]["RL_F"]
    assert [(e["a"], e["b"]) for e in entries] == [("beta", "alpha"), ("beta", "gamma")]
    short = entries[1]
    assert set(short) == {"a", "b", "n", "mean_a", "mean_b", "diff", "ci", "p", "p_adjusted", "significant", "better",
                          "method", "note"}
    assert (short["ci"], short["p_adjusted"], short["better"], short["significant"]) == (None, None, None, False)
    assert short["mean_b"] is None and short["n"] == 1 and short["diff"] is None and short["p"] is None
    assert short["note"] == "1 task(s) labelled for both; at least 10 needed: the judge comparison stands"
    allpairs = cal.calibrate(str(run), human, PAIRS, [], settings(min_labels=10),
                             SignificanceConf(all_pairs_max_models=3), summary)  # three models at the limit of 3
    assert allpairs["design"] == "all-pairs" and len(allpairs["comparisons"]["RL_F"]) == 3


def test_exactly_min_labels_is_enough(tmp_path):
    run, human, summary = _three_models(tmp_path, labelled_c=10)
    block = cal.calibrate(str(run), human, PAIRS, [], settings(min_labels=10), SignificanceConf(), summary)
    assert block["metrics"]["RL_F"]["models"]["gamma"]["calibrated"] is not None
    gamma_beta = next(e for e in block["comparisons"]["RL_F"] if {e["a"], e["b"]} == {"beta", "gamma"})
    assert gamma_beta["n"] == 10 and gamma_beta["diff"] is not None


def test_every_record_labelled_says_so(tmp_path):
    run, human, _, summary = make_run(tmp_path, labelled=20, tasks=20)
    block = cal.calibrate(str(run), human, PAIRS, [], settings(min_labels=10), SignificanceConf(), summary)
    for r in block["metrics"]["RL_F"]["models"].values():
        assert r["message"] == "every judged record is labelled: the calibrated estimate is the human mean"
    md = cal.to_markdown(block)
    assert "- alpha: every judged record is labelled: the calibrated estimate is the human mean" in md.splitlines()


def test_the_markdown_and_csv_line_by_line(tmp_path):
    run, human, summary = _three_models(tmp_path, labelled_c=1)
    block = cal.calibrate(str(run), human, PAIRS, [], settings(min_labels=10), SignificanceConf(), summary,
                          cluster_by=None)
    lines = cal.to_markdown(block).splitlines()
    assert lines[:6] == [
        "Method: PPI++ (power-tuned prediction-powered inference, ppi-python); 95% intervals (every record on its own: "
        "60 records); at least 10 labels per model.", "", "### RL_F (human faithfulness)", "",
        "| model | labels | records | naive (judge) | human only | calibrated (PPI++) | lambda |",
        "|---|---:|---:|---:|---:|---:|---:|"]
    alpha = block["metrics"]["RL_F"]["models"]["alpha"]
    shown = [with_interval("RL_F", alpha[k]) for k in ("naive", "human_only", "calibrated")]
    assert lines[6] == f"| alpha | 12 | 20 | {' | '.join(shown)} | {alpha['calibrated']['lambda']:.2f} |"
    naive = lines[8].split(" | ")[3]
    assert lines[8] == (f"| gamma | 1 | 20 | {naive} | – | 1 human label with a judged value; at least 10 are "
                        "needed (calibration.min_labels) | – |")
    assert len(lines) == 9  # no notes: gamma's message stands in its row
    rows = cal.csv_rows(block)
    assert [r[:5] for r in rows] == [["RL_F", "faithfulness", m, n, 20] for m, n in (("alpha", 12), ("beta", 12),
                                                                                        ("gamma", 1))]
    assert rows[2][5:8] == [f"{v:.6g}" for v in (block["metrics"]["RL_F"]["models"]["gamma"]["naive"]["mean"],
                                                 *block["metrics"]["RL_F"]["models"]["gamma"]["naive"]["ci"])]
    assert rows[2][8:] == ["", "", "", "", "", "", "", "1 human label with a judged value; at least 10 are needed "
                           "(calibration.min_labels)"]
    assert rows[0][5:] == [f"{v:.6g}" for k in ("naive", "human_only", "calibrated")
                           for v in (alpha[k]["mean"], *alpha[k]["ci"])] + [f"{alpha['calibrated']['lambda']:.6g}", ""]
    del block["unit"]
    assert cal.to_markdown(block).splitlines()[0] == ("Method: PPI++ (power-tuned prediction-powered inference, "
                                                      "ppi-python); 95% intervals; at least 10 labels per model.")
    cal.write_outputs({**block, "records": -1}, str(tmp_path / "out"))
    paths = cal.write_outputs(block, str(tmp_path / "out"))  # again into the same folder: replaced
    assert open(paths["json"]).read().startswith('{\n  "method": ')  # indented for a reader
    assert open(paths["md"]).read() == "# Calibrated estimates\n\n" + cal.to_markdown(block)
    assert open(paths["csv"]).read().splitlines()[0] == ",".join(cal.CSV_HEADER)
    assert json.load(open(paths["json"])) == json.loads(json.dumps(block))


def test_a_mapped_scale_is_named_in_the_markdown(tmp_path):
    run, human, _, summary = make_run(tmp_path, scale=(1.0, 4.0), labelled=12, tasks=20)
    block = cal.calibrate(str(run), human, PAIRS, ["faithfulness=1..4:0..1"], settings(min_labels=10),
                          SignificanceConf(), summary)
    assert "### RL_F (human faithfulness, labels mapped 1..4:0..1 (linear))" in cal.to_markdown(block)
    table = cal.calibrate(str(run), human, PAIRS, ["faithfulness=1:0,4:1"], settings(min_labels=10),
                          SignificanceConf(), summary)
    assert table["metrics"]["RL_F"]["mapping"] == "1:0,4:1 (table)"


def test_the_unit_when_no_record_has_the_field(tmp_path):
    run, human, _, summary = make_run(tmp_path, labelled=12, tasks=20)
    block = cal.calibrate(str(run), human, PAIRS, [], settings(min_labels=10), SignificanceConf(), summary)
    assert block["unit"]["text"] == "every record on its own: 40 records (no record has conversation_id)"
    assert "(every record on its own: 40 records (no record has conversation_id))" in cal.to_markdown(block)


def test_the_judges_range_when_it_is_not_0_to_1(tmp_path):
    """Labels 1..4 against judged values spanning 1..5 are on the judge's scale: no map needed; one
    label past the judged values' range is refused with the range it is outside of."""
    run, human, recs, summary = make_run(tmp_path, scale=(1.0, 4.0), labelled=12, tasks=20)
    for r in recs:
        r["metrics"]["RL_F"] = [1 + 4 * r["metrics"]["RL_F"][0]]
    recs[0]["metrics"]["RL_F"], recs[1]["metrics"]["RL_F"] = [1.0], [5.0]
    with open(run / "records.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    block = cal.calibrate(str(run), human, PAIRS, [], settings(min_labels=10), SignificanceConf(), summary)
    assert block["metrics"]["RL_F"]["models"]["alpha"]["calibrated"] is not None
    recs[1]["metrics"]["RL_F"] = [3.5]
    with open(run / "records.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    labels = [json.loads(line) for line in open(human)]
    labels[0]["faithfulness"] = 6.0
    with open(human, "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in labels)
    hi = max(r["metrics"]["RL_F"][0] for r in recs)
    with pytest.raises(UserError) as e:
        cal.calibrate(str(run), human, PAIRS, [], settings(min_labels=10), SignificanceConf(), summary)
    assert str(e.value) == (f"calibration: human faithfulness takes values 1..6, outside RL_F's range 1..{hi:g}; "
                            f"state how its labels map onto RL_F, e.g. calibration.map=[faithfulness=1..6:1..{hi:g}]")


def test_records_without_a_task_an_error_or_a_number(tmp_path):
    """A record without a task is its own task (by record key); an errored, missing or non-numeric
    judged value is not judged, its label counted apart; other metrics still collected."""
    from ragscale.config import CalibrationConf

    human = tmp_path / "h.jsonl"
    human.write_text("".join(json.dumps({"record_key": f"k{i}", "faithfulness": 0.5, "grade": 0.5}) + "\n"
                             for i in range(6)))
    sink = cal.CalibrationSink(str(human), ["faithfulness=RL_F", "grade=RB_llm"], [], ["RL_F", "RB_llm"],
                               CalibrationConf(min_labels=2), cluster_by=None)
    sink.add("not a record")
    rows = [{"model_id": "m", "metrics": {"RL_F": [0.4], "RB_llm": [0.6]}, "ragscale": {"record_key": "k0"}},
            {"model_id": "m", "metrics": {"RL_F": [0.4], "RB_llm": [0.6]}, "ragscale": {"record_key": "k1"},
             "error": {"stage": "judge", "message": "x"}},
            {"model_id": "m", "metrics": {"RL_F": "n/a", "RB_llm": [0.6]}, "ragscale": {"record_key": "k2"}},
            {"model_id": "m", "metrics": None, "ragscale": {"record_key": "k3"}},
            {"model_id": "m", "metrics": {"RL_F": [float("nan")], "RB_llm": [0.7]}, "ragscale": {"record_key": "k4"}}]
    for r in rows:
        sink.add(r)
    assert sink.records == 5 and sink.matched == 5 and len(sink.tasks) == 5
    block = sink.finish()
    faith, grade = (block["metrics"][m]["models"]["m"] for m in ("RL_F", "RB_llm"))
    assert (faith["n_records"], faith["labeled_without_judge"]) == (1, 4)
    assert (grade["n_records"], grade["labeled_without_judge"]) == (3, 2)
    assert grade["naive"]["mean"] == pytest.approx((0.6 + 0.6 + 0.7) / 3)
    assert "comparisons" not in block and block["ranked_by"] in ("RL_F", "RB_llm")


def test_a_run_folder_that_cannot_be_calibrated(tmp_path):
    run, human, _, _ = make_run(tmp_path)
    with pytest.raises(UserError, match=f"^{tmp_path}: no records.jsonl \\(not a ragscale run directory\\)$"):
        cal.calibrate(str(tmp_path), human, PAIRS)
    (run / "summary.json").write_text("{not json")
    with pytest.raises(UserError, match=r"summary\.json: cannot read: "):
        cal.read_summary(str(run))
    (run / "summary.json").write_text(json.dumps({"models": []}))
    with pytest.raises(UserError, match=r"summary\.json: not a ragscale summary$"):
        cal.read_summary(str(run))
    (run / "summary.json").write_text(json.dumps({"models": {}, "metrics": ["RL_F"]}))
    lines = open(run / "records.jsonl").read().splitlines(keepends=True)
    (run / "records.jsonl").write_text("".join(lines[:3]) + "{torn\n" + "".join(lines[3:]))
    with pytest.raises(UserError, match=r"records\.jsonl"):
        cal.calibrate(str(run), human, PAIRS, settings=settings())
    human_empty = tmp_path / "empty.jsonl"
    human_empty.write_text(json.dumps({"task_id": "t0"}) + "\n")
    with pytest.raises(UserError, match=f"^calibration.human {human_empty}: no human ratings found$"):
        cal.CalibrationSink(str(human_empty), PAIRS, [], ["RL_F"], settings())


@pytest.mark.parametrize("judged, labels", [((0.0, 0.4, 0.9), (0.0, 1.0)),  # 0..1 whatever the judged values span
                                            ((0.0, 0.7, 1.5), (0.0, 1.5, 1.2))])  # else the judged values' range
def test_labels_on_the_edges_of_the_range_pass(tmp_path, judged, labels):
    from ragscale.config import CalibrationConf

    human = tmp_path / "h.jsonl"
    human.write_text("".join(json.dumps({"task_id": f"t{i}", "faithfulness": v}) + "\n" for i, v in enumerate(labels)))
    sink = cal.CalibrationSink(str(human), PAIRS, [], ["RL_F"], CalibrationConf(min_labels=2), cluster_by=None)
    for i, v in enumerate(judged):
        sink.add({"task_id": f"t{i}", "model_id": "m", "metrics": {"RL_F": [v]}})
    block = sink.finish(None, SignificanceConf())  # no summary: no comparisons, whatever the settings
    assert block["metrics"]["RL_F"]["models"]["m"]["n_labeled"] == len(labels) and "comparisons" not in block


def test_one_record_on_its_own(tmp_path):
    from ragscale.config import CalibrationConf

    human = tmp_path / "h.jsonl"
    human.write_text(json.dumps({"task_id": "t0", "faithfulness": 0.5}) + "\n")
    sink = cal.CalibrationSink(str(human), PAIRS, [], ["RL_F"], CalibrationConf(min_labels=2), cluster_by=None)
    sink.add({"task_id": "t0", "model_id": "m", "metrics": {"RL_F": [0.4]}})
    assert sink.finish()["unit"]["text"] == "every record on its own: 1 record"
