"""``ragscale compare RUN_A RUN_B``: two runs paired by task, the printed comparison, --json,
--metrics, and one-line errors (not a run, no task in common, unknown metric, bad settings)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from ragscale.cli import main as cli_main
from ragscale.commands.compare import main
from ragscale.report.compare import compare_runs


def write_run(path, model, values, *, key="task_id", summary=True, metric="RB_agg"):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "records.jsonl"), "w") as fh:
        for t, v in enumerate(values):
            rec = {"model_id": model, key: f"t{t}", "error": None, "metrics": {metric: [float(v)], "Length": [3]},
                   "ragscale": {"record_key": f"{model}:{t}"}}
            fh.write(json.dumps(rec) + "\n")
    if summary:
        with open(os.path.join(path, "summary.json"), "w") as fh:
            json.dump({"metrics": [metric, "Length"], "models": {}}, fh)
    return str(path)


@pytest.fixture
def runs(tmp_path):
    rng = np.random.default_rng(4)
    base = rng.uniform(0.2, 0.8, 80)
    a = write_run(tmp_path / "run_a", "granite", base + 0.1 + rng.normal(0, 0.05, 80))
    b = write_run(tmp_path / "run_b", "granite", base + rng.normal(0, 0.05, 80))
    return a, b


def test_two_runs_compared_by_task(runs, capsys):
    assert main([*runs, "--resamples", "1000"]) == 0
    out = capsys.readouterr().out
    assert "## Significance" in out and "### RB_agg" in out
    assert "- **run_a > run_b**, difference 0.1" in out and "adjusted p = 0.002" in out  # 2 / 1001, one pair
    assert "Method: paired bootstrap (BCa) + paired permutation test." in out


def test_json_and_the_same_numbers_as_the_api(runs, capsys):
    assert main([*runs, "--json", "--resamples", "500", "--seed", "3", "--correction", "none"]) == 0
    block = json.loads(capsys.readouterr().out)
    assert block["design"] == "all-pairs" and block["correction"] == "none" and block["resamples"] == 500
    (e,) = block["metrics"]["RB_agg"]
    assert (e["a"], e["b"], e["n"], e["better"]) == ("run_a", "run_b", 80, "run_a") and e["p_adjusted"] == e["p"]
    from ragscale.config import SignificanceConf

    again = compare_runs(*runs, settings=SignificanceConf(resamples=500, seed=3, correction="none"))
    assert json.loads(json.dumps(again)) == block


def test_partial_overlap_and_metrics_option(tmp_path, capsys):
    a = write_run(tmp_path / "a", "m1", [0.1, 0.2, 0.3, 0.4, 0.5])
    b = write_run(tmp_path / "b", "m2", [0.2, 0.2, 0.2])  # tasks t0..t2 only
    assert main([a, b, "--metrics", "RB_agg,Length", "--json"]) == 0
    block = json.loads(capsys.readouterr().out)
    assert list(block["metrics"]) == ["RB_agg", "Length"]
    e = block["metrics"]["RB_agg"][0]
    assert e["n"] == 3 and e["note"] == "fewer than 10 paired tasks"
    assert block["metrics"]["Length"][0]["note"] == "fewer than 10 paired tasks; all differences zero"


def test_several_models_in_a_run_are_named_dir_slash_model(tmp_path, capsys):
    a = write_run(tmp_path / "a", "m1", [0.1, 0.2, 0.3])
    with open(os.path.join(a, "records.jsonl"), "a") as fh:
        fh.write(json.dumps({"model_id": "m2", "task_id": "t0", "error": None, "metrics": {"RB_agg": [0.5]}}) + "\n")
    b = write_run(tmp_path / "b", "m3", [0.2, 0.2, 0.2], summary=False)  # no summary.json: metrics from records
    block = compare_runs(a, b)
    pairs = {(e["a"], e["b"]) for e in block["metrics"]["RB_agg"]}
    assert pairs == {("a/m1", "a/m2"), ("a/m1", "b"), ("a/m2", "b")}


@pytest.mark.parametrize("setup, message", [
    ("missing", "does not exist"),
    ("not_a_run", "has no records.jsonl (not a ragscale output_dir?)"),
    ("disjoint", "have no task in common (records are paired by task_id"),
    ("no_keys", "no record has a task_id, query_id or conversation_id + turn to pair by"),
    ("metric", "unknown metric 'RB_ag' (did you mean 'RB_agg'?)"),
    ("resamples", "--resamples must be an integer >= 100, got 3"),
    ("correction", "--correction must be one of holm, bonferroni, none, bh, got 'sidak'"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, setup, message):
    a = write_run(tmp_path / "a", "m1", [0.1, 0.2, 0.3])
    b = str(tmp_path / "b")
    extra: list[str] = []
    if setup == "not_a_run":
        os.makedirs(b)
    elif setup == "disjoint":
        write_run(b, "m2", [0.1, 0.2, 0.3])
        with open(os.path.join(b, "records.jsonl")) as fh:
            lines = fh.read().replace('"task_id": "t', '"task_id": "other-t')
        with open(os.path.join(b, "records.jsonl"), "w") as fh:
            fh.write(lines)
    elif setup == "no_keys":
        write_run(b, "m2", [0.1, 0.2, 0.3], key="note")
    elif setup != "missing":
        write_run(b, "m2", [0.1, 0.2, 0.3])
        extra = {"metric": ["--metrics", "RB_ag"], "resamples": ["--resamples", "3"],
                 "correction": ["--correction", "sidak"]}[setup]
    assert main([a, b, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragscale compare: error: ") and message in err and err.count("\n") == 1


def test_the_ragscale_command_runs_it(runs, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["compare", *runs, "--resamples", "200"])
    assert exc.value.code == 0 and "run_a > run_b" in capsys.readouterr().out
    proc = subprocess.run([sys.executable, "-m", "ragscale.compare", runs[0], "/nonexistent"], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "does not exist" in proc.stderr
