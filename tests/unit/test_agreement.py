"""Judge-vs-human agreement: statistics against scipy and by hand, the human layouts, the join,
the CLI and its bad-input errors."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from ragscale.agree import main
from ragscale.errors import UserError
from ragscale.report import agreement as ag

stats = pytest.importorskip("scipy.stats", reason="scipy (the reference extra) checks the statistics")

DATA = [
    ([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]),
    ([1, 1, 2, 2, 3, 3, 4], [0.1, 0.3, 0.3, 0.2, 0.9, 0.9, 0.5]),  # ties on both sides
    ([4, 4, 3, 1, 2, 4, 3, 2], [1, 0.5, 0.5, 0, 0, 1, 1, 0.5]),
    (list(range(20)), [(-1) ** i * i for i in range(20)]),
]


@pytest.mark.parametrize("x,y", DATA)
def test_spearman_and_kendall_match_scipy(x, y):
    assert ag.spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert ag.kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)
    assert ag.kendall_tau_b(x, y, block=3) == pytest.approx(ag.kendall_tau_b(x, y), abs=1e-12)


def test_random_against_scipy():
    rng = np.random.default_rng(1)
    x = rng.integers(1, 5, 300).astype(float)
    y = x + rng.normal(0, 1.5, 300).round(1)
    assert ag.spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert ag.kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)


def test_undefined_statistics_are_none():
    assert ag.spearman([1, 1, 1], [1, 2, 3]) is None and ag.kendall_tau_b([1, 2, 3], [5, 5, 5]) is None
    assert ag.spearman([1], [2]) is None
    out = ag.statistics_for([2, 2, 2], [1, 2, 3], n_boot=10)
    assert out["spearman"]["value"] is None and out["spearman"]["reason"] == "the human ratings are constant"


def test_cohen_kappa_by_hand():
    # 2x2 table: agree on 20 yes + 15 no of 50; p_o = 0.7; p_yes = 25/50 and 30/50 -> p_e = 0.5*0.6 + 0.5*0.4 = 0.5
    h = [1] * 25 + [0] * 25
    j = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert ag.cohen_kappa(h, j) == pytest.approx(0.4)
    assert ag.accuracy(h, j) == pytest.approx(0.7)
    assert ag.cohen_kappa([1, 2, 3], [1, 2, 3]) == 1.0
    assert ag.cohen_kappa([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    assert ag.cohen_kappa([1, 1], [1, 1]) is None  # chance agreement is 1: undefined


def test_quadratic_kappa_by_hand():
    # categories 1..3, w = (i-j)^2/4; obs: (1,1) (2,3) (3,3) (1,2) each 1/4
    h, j = [1, 2, 3, 1], [1, 3, 3, 2]
    obs_w = (0 + 0.25 + 0 + 0.25) / 4
    row = np.array([2, 1, 1]) / 4
    col = np.array([1, 1, 2]) / 4
    w = np.array([[(a - b) ** 2 / 4 for b in range(3)] for a in range(3)])
    exp_w = float((w * np.outer(row, col)).sum())
    assert ag.cohen_kappa(h, j, "quadratic") == pytest.approx(1 - obs_w / exp_w)


def test_which_statistics_apply():
    binary = ag.statistics_for([0, 1, 1, 0, 1], [0, 1, 0, 0, 1], n_boot=50)
    assert {"spearman", "kendall", "kappa", "kappa_quadratic", "accuracy"} == set(binary)
    cont = ag.statistics_for([1, 2, 3, 4, 4, 3], [0.11, 0.5, 0.52, 0.9, 0.8, 0.6], n_boot=50)
    assert set(cont) == {"spearman", "kendall"}  # metric values are not on the human scale
    ordinal = ag.statistics_for([1, 2, 3, 4, 4], [1, 2, 4, 4, 3], scale=[1, 2, 3, 4], n_boot=50)
    assert "kappa" in ordinal and "accuracy" not in ordinal


def test_bootstrap_ci_is_deterministic_and_brackets_the_estimate():
    rng = np.random.default_rng(0)
    x = rng.normal(size=60)
    y = x + rng.normal(size=60)
    a = ag.statistics_for(x, y, n_boot=300, seed=7)
    b = ag.statistics_for(x, y, n_boot=300, seed=7)
    assert a == b
    lo, hi = a["spearman"]["ci"]
    assert lo < a["spearman"]["value"] < hi and -1 <= lo and hi <= 1
    assert ag.statistics_for(x, y, n_boot=300, seed=8)["spearman"]["ci"] != [lo, hi]


MTRAG_HUMAN = {
    "metrics": [
        {"name": "faithfulness", "author": "human", "type": "categorical", "aggregator": "median",
         "values": [{"value": str(v), "numeric_value": v} for v in (1, 2, 3, 4)]},
        {"name": "RougeL", "author": "algorithm", "type": "numerical"},
    ],
    "evaluations": [
        {"task_id": "t1", "model_id": "m", "annotations": {
            "faithfulness": {"a": {"value": "4"}, "b": {"value": "2"}, "c": {"value": "3"}},
            "RougeL": {"system": {"value": 0.3}}}},
        {"task_id": "t2", "model_id": "m", "annotations": {"faithfulness": {"a": {"value": "1"}, "b": {"value": "2"}}}},
        {"task_id": "t3", "model_id": "m", "annotations": {"faithfulness": {"a": {"value": "4"}}}},
        {"task_id": "t1", "model_id": "other", "annotations": {"faithfulness": {"a": {"value": "1"}}}},
    ],
}


def test_mtrag_layout_reader(tmp_path):
    p = tmp_path / "human.json"
    p.write_text(json.dumps(MTRAG_HUMAN))
    h = ag.read_human(str(p))
    assert h.layout == "mtrag-human-evaluation" and h.metrics() == ["faithfulness"]  # RougeL: not human
    assert h.values[("task", "t1", "m")] == {"faithfulness": 3.0}  # median of 4, 2, 3
    assert h.values[("task", "t2", "m")] == {"faithfulness": 1.5}
    assert h.annotators[("task", "t1", "m")]["faithfulness"] == 3
    assert h.scales["faithfulness"] == [1, 2, 3, 4]


def test_real_mtrag_human_file(tmp_path):
    mirror = "/work/.mirror/IBM+mt-rag-benchmark/repo"
    path = "mtrag-human/evaluations/reference_subset_with_human_evaluations.json"
    try:
        blob = subprocess.run(["git", "-C", mirror, "show", f"HEAD:{path}"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"needs IBM/mt-rag-benchmark's {path} in {mirror}")
    p = tmp_path / "h.json"
    p.write_bytes(blob)
    h = ag.read_human(str(p))
    assert set(h.metrics()) == {"naturalness", "appropriateness", "completeness", "faithfulness", "win-rate"}
    assert len(h.values) == 477 and all(1 <= v["faithfulness"] <= 4 for v in h.values.values() if "faithfulness" in v)


def write_run(run_dir, records):
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "records.jsonl"), "w") as fh:
        for i, r in enumerate(records):
            fh.write(json.dumps({"error": None, "ragscale": {"record_key": f"k{i}"}, **r}) + "\n")
    return str(run_dir)


def test_plain_columns_join_and_cli(tmp_path, capsys):
    recs = []
    for model, shift in (("a", 0), ("b", 1)):
        for t in range(8):
            recs.append({"task_id": f"t{t}", "model_id": model,
                         "metrics": {"RL_F": [((t + shift) % 8) / 7], "idk_eval": [float(t % 2)]}})
    recs.append({"task_id": "t0", "model_id": "c", "metrics": {}, "error": {"stage": "judge", "message": "x"}})
    run = write_run(tmp_path / "run", recs)
    human_csv = tmp_path / "h.csv"
    with open(human_csv, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["task_id", "faithfulness", "idk_eval"])  # no model_id: applies to every model of the task
        for t in range(8):
            w.writerow([f"t{t}", t, "yes" if t % 2 else "no"])
    res = ag.agreement(run, str(human_csv), ["faithfulness=RL_F", "idk_eval=idk_eval"], n_boot=100)
    assert res["records"] == {"run": 17, "matched": 17, "errored_excluded": 1}
    rows = {(r["human"], r["model"]): r for r in res["rows"]}
    assert rows[("faithfulness", "a")]["spearman"]["value"] == pytest.approx(1.0)
    assert rows[("faithfulness", "ALL")]["n"] == 16
    assert rows[("faithfulness", "b")]["spearman"]["value"] == pytest.approx(
        stats.spearmanr(range(8), [((t + 1) % 8) / 7 for t in range(8)]).statistic)
    assert rows[("idk_eval", "ALL")]["accuracy"]["value"] == 1.0 and rows[("idk_eval", "ALL")]["kappa"]["value"] == 1.0

    # JSONL with model_id, through the CLI
    human_jsonl = tmp_path / "h.jsonl"
    human_jsonl.write_text("".join(json.dumps({"task_id": f"t{t}", "model_id": "a", "RL_F": t / 7}) + "\n"
                                   for t in range(8)))
    assert main([run, "--human", str(human_jsonl), "--bootstrap", "50"]) == 0
    out = capsys.readouterr().out
    assert "| RL_F | RL_F | a | 8 | 1.000" in out
    for ext in ("json", "csv", "md", "png"):
        assert os.path.getsize(os.path.join(run, "agreement", f"agreement.{ext}")) > 0


@pytest.mark.parametrize("args,message", [
    (["{tmp}/nope", "--human", "{tmp}/h.jsonl"], "no records.jsonl"),
    (["{tmp}/run", "--human", "{tmp}/missing.json"], "no such file"),
    (["{tmp}/run", "--human", "{tmp}/h.jsonl", "--pair", "faithfulness"], "expected HUMAN=METRIC"),
    (["{tmp}/run", "--human", "{tmp}/h.jsonl", "--pair", "nothere=RL_F"], "is not a human metric"),
    (["{tmp}/run", "--human", "{tmp}/h.jsonl", "--pair", "quality=RB_llm"], "is not a metric of the run"),
    (["{tmp}/run", "--human", "{tmp}/other.jsonl", "--pair", "quality=RL_F"], "no record of"),
    (["{tmp}/run", "--human", "{tmp}/h.jsonl"], "no metric pairs"),
    (["{tmp}/run", "--human", "{tmp}/bad.jsonl"], "line 2 is not JSON"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, args, message):
    write_run(tmp_path / "run", [{"task_id": "t1", "model_id": "a", "metrics": {"RL_F": [0.5]}}])
    (tmp_path / "h.jsonl").write_text(json.dumps({"task_id": "t1", "quality": 3}) + "\n")
    (tmp_path / "other.jsonl").write_text(json.dumps({"task_id": "zzz", "quality": 3}) + "\n")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"task_id": "t1", "quality": 3}) + "\nnot json\n")
    cmd = [sys.executable, "-m", "ragscale.agree", *(a.format(tmp=tmp_path) for a in args)]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_parse_pairs():
    assert ag.parse_pairs(["faithfulness = RL_F", "a=b"]) == {"faithfulness": "RL_F", "a": "b"}
    with pytest.raises(UserError):
        ag.parse_pairs(["=x"])
