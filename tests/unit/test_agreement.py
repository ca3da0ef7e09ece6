"""Judge-vs-human agreement: statistics against scipy and by hand, the human layouts, the join,
the CLI and its bad-input errors.

The intervals were a percentile bootstrap before scipy became a core dependency; they are BCa
now (``scipy.stats.bootstrap``), so their figures changed (docs/statistics.md). The percentile
fallback, where BCa is undefined, draws the same resamples as before and gives the same figures."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from scipy import stats

from conftest import ROOT, reference_source
from ragscale.commands.agree import main
from ragscale.errors import UserError
from ragscale.report import agreement as ag
from ragscale.stats.intervals import rng_arg

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


@pytest.mark.parametrize("n", [2, 3, 7, 8, 9, 300, 1025])
def test_random_against_scipy(n):
    rng = np.random.default_rng(n)
    x = rng.integers(1, 5, n).astype(float)  # heavy ties on x
    for y in (x + rng.normal(0, 1.5, n).round(1), rng.integers(0, 3, n) * 0.5, rng.normal(size=n)):
        if len(set(y)) < 2 or len(set(x)) < 2:
            continue
        assert ag.spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
        assert ag.kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)


def test_perfect_agreement_and_disagreement():
    x = [1, 2, 2, 3, 4]
    assert ag.spearman(x, [10, 20, 20, 30, 40]) == pytest.approx(1.0)
    assert ag.kendall_tau_b(x, [10, 20, 20, 30, 40]) == pytest.approx(1.0)
    assert ag.spearman(x, [4, 3, 3, 2, 1]) == pytest.approx(-1.0)
    assert ag.kendall_tau_b(x, [4, 3, 3, 2, 1]) == pytest.approx(-1.0)


def test_undefined_statistics_are_none():
    assert ag.spearman([1, 1, 1], [1, 2, 3]) is None and ag.kendall_tau_b([1, 2, 3], [5, 5, 5]) is None
    assert ag.spearman([1], [2]) is None and ag.kendall_tau_b([], []) is None
    out = ag.statistics_for([2, 2, 2], [1, 2, 3], n_boot=10)
    assert out["spearman"]["value"] is None and out["spearman"]["reason"] == "the human ratings are constant"
    assert out["kendall"]["value"] is None and out["kendall"]["ci"] is None
    out = ag.statistics_for([1, 0, 1], [1, 1, 1], n_boot=10)
    assert out["spearman"]["reason"] == "the metric is constant"
    assert out["kappa"]["value"] == 0.0  # one constant side: kappa is defined, no better than chance
    out = ag.statistics_for([1], [1], n_boot=10)  # one record: nothing is defined
    assert all(e["value"] is None and "need at least 2" in e["reason"] for e in out.values())
    assert ag.statistics_for([1, 1], [1, 1], n_boot=10)["kappa"]["reason"] == "both sides are constant"
    nan = float("nan")  # a NaN makes every statistic undefined (scipy would return nan)
    assert ag.spearman([1, 2, nan], [1, 2, 3]) is None and ag.kendall_tau_b([1, 2, 3], [nan, 2, 3]) is None
    assert ag.cohen_kappa([1, 2, nan], [1, 2, 2]) is None
    assert ag.statistics_for([1, 2, 3, nan], [1, 3, 2, 4], n_boot=10)["spearman"]["reason"] == "NaN values"


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
    # weights are the values' squared distances: a category nobody used (2) still counts as between 1 and 3
    h, j = [1, 3, 4, 4, 1], [1, 4, 4, 3, 3]
    obs = np.zeros((3, 3))
    cats = [1, 3, 4]
    for a, b in zip(h, j):
        obs[cats.index(a), cats.index(b)] += 1 / 5
    w = np.array([[(a - b) ** 2 for b in cats] for a in cats])
    expected = 1 - (w * obs).sum() / (w * np.outer(obs.sum(1), obs.sum(0))).sum()
    assert ag.cohen_kappa(h, j, "quadratic") == pytest.approx(expected)
    assert ag.cohen_kappa([1, 2, 3, 4], [1, 2, 3, 4], "quadratic") == 1.0


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
    for s in ("spearman", "kendall"):
        lo, hi = a[s]["ci"]
        assert lo < a[s]["value"] < hi and -1 <= lo and hi <= 1 and a[s]["boot_undefined"] == 0
    assert ag.statistics_for(x, y, n_boot=300, seed=8)["spearman"]["ci"] != a["spearman"]["ci"]
    assert ag.statistics_for(x, y, n_boot=0)["spearman"]["ci"] is None


@pytest.mark.parametrize("kind", ["continuous", "likert"])
def test_bootstrap_ci_is_scipys_bca(kind):
    """The interval is scipy.stats.bootstrap's BCa interval (paired, same seed) of each statistic."""
    rng = np.random.default_rng(3)
    if kind == "continuous":
        x = rng.normal(size=40)
        y = x + rng.normal(size=40)
    else:  # ties on both sides, kappa applies
        x = rng.integers(1, 5, 40).astype(float)
        y = np.clip(x + rng.integers(-1, 2, 40), 1, 4)
    out = ag.statistics_for(x, y, n_boot=400, seed=11)
    want = {"spearman": lambda a, b: stats.spearmanr(a, b).statistic,
            "kendall": lambda a, b: stats.kendalltau(a, b, variant="b").statistic}
    assert ("kappa" in out) == (kind == "likert")
    for name, fn in want.items():
        ref = stats.bootstrap((x, y), fn, paired=True, vectorized=False, n_resamples=400, method="BCa",
                              **rng_arg(11))
        ci = ref.confidence_interval
        assert out[name]["ci"] == pytest.approx([ci.low, ci.high], abs=1e-9)
        assert out[name]["ci_method"] == "BCa" and out[name]["boot_undefined"] == 0


def test_bootstrap_skips_and_counts_degenerate_replicates():
    # 3 records, one of them the only 1: many resamples have a constant side, so BCa is undefined
    # and the interval is the percentile interval of the defined replicates
    h, m = [0, 0, 1], [0.1, 0.2, 0.9]
    out = ag.statistics_for(h, m, n_boot=200, seed=1)
    e = out["spearman"]
    assert e["value"] == pytest.approx(stats.spearmanr(h, m).statistic)
    assert 0 < e["boot_undefined"] < 200 and e["ci"] is not None and e["ci_method"] == "percentile"
    idx = np.random.default_rng(1).integers(0, 3, (200, 3))  # scipy's resamples
    reps = [ag.spearman(np.take(h, i), np.take(m, i)) for i in idx]
    defined = [r for r in reps if r is not None]
    assert e["boot_undefined"] == len(reps) - len(defined)
    assert e["ci"] == pytest.approx([np.quantile(defined, 0.025), np.quantile(defined, 0.975)])


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
        {"model_id": "m", "annotations": {}},  # no task_id: skipped
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
    assert h.scales["faithfulness"] == [1, 2, 3, 4] and h.skipped == 1
    # without `metrics`: human annotators are all but the system/composite pseudo-annotators
    bare = {"evaluations": [{"task_id": "t1", "annotations": {
        "quality": {"a": {"value": 2}, "b": {"value": 4}}, "rl_f": {"composite": {"value": 0.7}}}}]}
    p.write_text(json.dumps(bare))
    h = ag.read_human(str(p))
    assert h.values == {("task", "t1", None): {"quality": 3.0}} and h.annotators[("task", "t1", None)] == {"quality": 2}


def test_real_mtrag_human_file(tmp_path):
    path = "mtrag-human/evaluations/reference_subset_with_human_evaluations.json"
    blob = reference_source("mt-rag-benchmark", path, binary=True)
    p = tmp_path / "h.json"
    p.write_bytes(blob)
    h = ag.read_human(str(p))
    assert set(h.metrics()) == {"naturalness", "appropriateness", "completeness", "faithfulness", "win-rate"}
    assert len(h.values) == 477 and all(1 <= v["faithfulness"] <= 4 for v in h.values.values() if "faithfulness" in v)
    assert {n for a in h.annotators.values() for n in a.values()} == {2, 3}
    # the file's own RL_F (composite) as a run: agreement with the human faithfulness ratings
    data = json.loads(blob)
    recs = [{"task_id": e["task_id"], "model_id": e["model_id"],
             "metrics": {"RL_F": [e["annotations"]["rl_f"]["composite"]["value"]]}}
            for e in data["evaluations"] if "rl_f" in e["annotations"]]
    run = write_run(tmp_path / "run", recs)
    res = ag.agreement(run, str(p), ["faithfulness=RL_F"], n_boot=100)
    overall = [r for r in res["rows"] if r["model"] == "ALL"][0]
    hum = [h.values[("task", r["task_id"], r["model_id"])]["faithfulness"] for r in recs]
    assert overall["n"] == len(recs) == 477 and 2 <= overall["annotators_mean"] <= 3
    rl_f = [r["metrics"]["RL_F"][0] for r in recs]
    assert overall["spearman"]["value"] == pytest.approx(stats.spearmanr(hum, rl_f).statistic)
    assert overall["spearman"]["value"] > 0.3 and "kappa" not in overall  # RL_F is not on the 1-4 scale


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
    (["{tmp}/nope", "--human", "{tmp}/h.jsonl"], "does not exist"),
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


def test_plain_reader_aggregates_annotators_and_formats(tmp_path):
    p = tmp_path / "h.csv"  # a spreadsheet export: byte-order mark, one row per annotator, a text column
    p.write_bytes("\ufefftask_id,model_id,annotator_id,correct,score,comment\n"
                  "t1,a,ann1,1,4,fine\nt1,a,ann2,0,3,\nt2,,ann1,yes,2,meh\n".encode("utf-8"))
    h = ag.read_human(str(p))
    assert h.values[("task", "t1", "a")] == {"correct": 0.5, "score": 3.5}  # mean of the annotators
    assert h.annotators[("task", "t1", "a")] == {"correct": 2, "score": 2}
    assert h.values[("task", "t2", None)] == {"correct": 1.0, "score": 2.0}
    assert h.non_numeric == {"comment": 2} and "annotator_id" not in h.metrics()
    j = tmp_path / "h.json"  # a JSON list of rows, pretty-printed
    j.write_text(json.dumps([{"record_key": "k1", "x": 1}, {"query_id": "q", "query_run": 2, "x": 0}], indent=2))
    h = ag.read_human(str(j))
    assert h.layout == "json" and h.values == {("record_key", "k1"): {"x": 1.0}, ("query", "q", "2", None): {"x": 0.0}}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"model_id": "a", "x": 1}) + "\n")
    with pytest.raises(UserError, match="row 1: no task_id"):
        ag.read_human(str(bad))


def test_join_keys_exclusions_and_per_pair_statistics(tmp_path):
    recs = [{"task_id": f"t{t}", "model_id": m, "metrics": {"judge": [float(t % 4 + 1)] if t != 5 else [None]}}
            for m in ("a", "b") for t in range(8)]
    recs.append({"task_id": "t1", "model_id": "a", "metrics": {}, "error": {"stage": "judge", "message": "boom"}})
    recs.append({"query_id": "q1", "query_run": 1, "model_id": "trec", "metrics": {"judge": 2.0}})
    run = write_run(tmp_path / "run", recs)
    rows = [{"task_id": f"t{t}", "judge": t % 4 + 1} for t in range(8)]  # no model_id: every model
    rows[2]["model_id"] = "a"  # model-specific: only a's t2
    rows.append({"task_id": "t2", "model_id": "b", "judge": 1})
    rows.append({"task_id": "unrated", "judge": 2})
    rows.append({"query_id": "q1", "query_run": "1", "judge": 2})
    (tmp_path / "h.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = ag.agreement(run, str(tmp_path / "h.jsonl"), n_boot=50)  # same-named metric: judge=judge
    assert res["pairs"] == {"judge": "judge"} and res["human"]["unmatched"] == 1
    assert res["records"] == {"run": 18, "matched": 18, "errored_excluded": 1}
    by = {r["model"]: r for r in res["rows"]}
    assert set(by) == {"a", "b", "trec", "ALL"}
    assert (by["a"]["n"], by["a"]["excluded_null"], by["a"]["excluded_error"]) == (7, 1, 1)
    assert (by["b"]["n"], by["b"]["excluded_null"]) == (7, 1)
    assert by["ALL"]["n"] == 15 and by["ALL"]["excluded_null"] == 2 and by["ALL"]["annotators_mean"] == 1
    assert by["a"]["kappa"]["value"] == 1.0  # a: perfect on 1-4 labels
    # b's t2 is rated 1 against 3: kappa and spearman below 1; applicability is the pair's, so trec (n=1) has kappa too
    assert by["b"]["kappa"]["value"] < 1 and by["b"]["spearman"]["value"] < 1
    assert by["trec"]["kappa"]["value"] is None and "need at least 2" in by["trec"]["kappa"]["reason"]
    assert "accuracy" not in by["ALL"]
    md = ag.to_markdown(res)
    assert "n/a for judge vs judge, trec: 1 paired record(s)" in md and "1 with an error, 2 with a null metric" in md


def test_cli_unreadable_records_and_unwritable_output(tmp_path):
    run = write_run(tmp_path / "run", [{"task_id": "t1", "model_id": "a", "metrics": {"x": [0.5]}}])
    with open(os.path.join(run, "records.jsonl"), "a") as fh:
        fh.write("[1, 2]\n")
    (tmp_path / "h.jsonl").write_text(json.dumps({"task_id": "t1", "x": 1}) + "\n")
    with pytest.raises(UserError, match="line 2 is not a JSON record"):
        ag.agreement(run, str(tmp_path / "h.jsonl"))
    run = write_run(tmp_path / "run2", [{"task_id": f"t{i}", "model_id": "a", "metrics": {"x": [i / 3]}}
                                        for i in range(3)])
    (tmp_path / "h.jsonl").write_text("".join(json.dumps({"task_id": f"t{i}", "x": i}) + "\n" for i in range(3)))
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = subprocess.run([sys.executable, "-m", "ragscale.agree", run, "--human", str(tmp_path / "h.jsonl"),
                          "--bootstrap", "10", "--output", str(blocker / "sub")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_the_runs_one_pass_sink_gives_what_the_command_gives(tmp_path):
    """A run's AgreementSink (fed record by record by the report pass) and ``ragscale agree`` on the
    written run agree exactly; a sink without any match says how human and run rows are keyed."""
    recs = [{"task_id": f"t{t}", "model_id": m, "metrics": {"judge": [float((t + i) % 4 + 1)]},
             "ragscale": {"record_key": f"{m}-{t}"}} for i, m in enumerate(("a", "b")) for t in range(10)]
    recs.append({"query_id": "q1", "query_run": 2, "model_id": "trec", "metrics": {"judge": 3.0}})
    run = write_run(tmp_path / "run", recs)
    rows = [{"task_id": f"t{t}", "judge": t % 4 + 1} for t in range(10)] + [{"query_id": "q1", "query_run": 2, "judge": 3}]
    (tmp_path / "h.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    sink = ag.AgreementSink(run, str(tmp_path / "h.jsonl"), ["judge=judge"], n_boot=60, seed=3)
    for rec in recs:
        sink.add(rec)
    assert sink.finish() == ag.agreement(run, str(tmp_path / "h.jsonl"), ["judge=judge"], n_boot=60, seed=3)
    assert sink.finish()["records"] == {"run": 21, "matched": 21, "errored_excluded": 0}
    assert sink.finish()["bootstrap"]["seed"] == 3 and sink.finish()["bootstrap"]["replicates"] == 60

    (tmp_path / "none.jsonl").write_text(json.dumps({"record_key": "zz", "judge": 1}) + "\n")
    sink = ag.AgreementSink(run, str(tmp_path / "none.jsonl"))
    sink.add(recs[0])
    with pytest.raises(UserError, match=r"no record of .* has human ratings in .*none.jsonl \(1 run records; match on "
                                        r"task_id \[\+ model_id\], record_key or query_id/query_run; e.g. human "
                                        r"record_key=zz vs run task_id=t0\)$"):
        sink.finish()
    sink = ag.AgreementSink(run, str(tmp_path / "none.jsonl"))
    sink.add(recs[-1])
    with pytest.raises(UserError, match=r"vs run query_id=q1, query_run=2\)$"):
        sink.finish()
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(UserError, match="no human ratings found"):
        ag.AgreementSink(run, str(tmp_path / "empty.jsonl"))
    assert ag._describe(("task", "t1", "m")) == "task_id=t1, model_id=m"
    assert ag._describe(("query", "q", "1", "m")) == "query_id=q, query_run=1, model_id=m"
