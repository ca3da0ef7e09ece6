import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragscale.errors import RecordError, UserError
from ragscale.io.inputs import Pointer, PointerArray, key_code, order_for_sweep, read_raw, resolve_inputs, scan
from ragscale.io.output import RecordKeys, RecordWriter, finished_keys, iter_records, prepare
from ragscale.metrics.registry import resolve_metrics, validate_steps
from ragscale.record import answerability_of, clean_nan, extract_fields, output_line, read_record
from ragscale.report.summary import record_scalar
from ragscale.pipeline.cpu_stages import pointer_table

GOOD = {
    "task_id": "c1::1",
    "input": [{"speaker": "user", "text": "q", "enrichments": {"answerability": ["PARTIAL"]}}],
    "contexts": [{"text": "passage"}],
    "targets": [{"text": "ref"}],
    "predictions": [{"text": "answer"}],
}


def test_extract_fields_and_answerability_sources():
    f = extract_fields(GOOD)
    assert f == {"prediction": "answer", "targets": ["ref"], "passages": ["passage"], "answerability": "PARTIAL"}
    assert answerability_of({"answerability": ["UNANSWERABLE"]}) == "UNANSWERABLE"
    assert answerability_of({"enrichments": {"answerability": "CONVERSATIONAL"}}) == "CONVERSATIONAL"
    assert answerability_of({}) is None


@pytest.mark.parametrize(
    "patch, message",
    [
        ({"predictions": []}, "no 'predictions'"),
        ({"targets": None}, "no 'targets'"),
        ({"predictions": [{"text": "   "}]}, "predictions[0].text is empty"),
        ({"predictions": [{"text": 3}]}, "must be a string, got int"),
        ({"contexts": [{"text": None}]}, "no contexts[0].text"),
        ({"contexts": [{"text": 7}]}, "contexts[0].text must be a string, got int"),
        ({"contexts": "oops"}, "'contexts' must be a list"),
    ],
)
def test_extract_fields_rejects_bad_records(patch, message):
    with pytest.raises(RecordError) as e:
        extract_fields({**GOOD, **patch})
    assert e.value.stage == "input" and message in e.value.message


def test_nan_tokens_parse_and_are_written_as_null():
    raw = '{"task_id": "t", "Multi-Turn": NaN, "predictions": [{"text": "a"}], "targets": [{"text": "b"}]}'
    row = read_record(raw, key="k:1", model_id="m", task_id=None, source_file="f", source_line=1,
                      need_targets=True).to_row()
    row["metrics"] = {"Recall": [0.0], "odd": float("nan")}
    rec = json.loads(output_line(row))
    assert rec["Multi-Turn"] is None and rec["model_id"] == "m" and rec["metrics"] == {"Recall": [0.0], "odd": None}
    assert rec["ragscale"] == {"record_key": "k:1", "source_file": "f", "source_line": 1, "warnings": [],
                               "judge_errors": [], "details": {},
                               "record": {"task_id": "t", "query": None, "answer": "a", "answerability": None,
                                          "answer_status": None, "passage_ids": []}}
    json.dumps(rec, allow_nan=False)
    assert clean_nan([float("nan"), {"x": float("inf")}]) == [None, {"x": None}]


def test_resolve_inputs_errors_are_one_line(tmp_path):
    with pytest.raises(UserError, match="input file not found"):
        resolve_inputs(str(tmp_path / "nope.jsonl"))
    with pytest.raises(UserError, match="glob matches no files"):
        resolve_inputs(str(tmp_path / "*.jsonl"))
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(UserError, match="unsupported input format"):
        resolve_inputs(str(tmp_path / "x.txt"))


def test_scan_skips_blank_lines_and_sweep_groups_by_task(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"task_id": "t1"}\n\n{"task_id": "t2"}\nnot json\n')
    b.write_text('{"task_id": "t2"}\n{"task_id": "t1"}\n')
    files = resolve_inputs([str(a), str(b)])
    ptrs = list(scan(files, with_tasks=True))
    assert [(p.file_idx, p.line, p.task) for p in ptrs] == [(0, 1, "t1"), (0, 3, "t2"), (0, 4, None), (1, 1, "t2"), (1, 2, "t1")]
    ordered = order_for_sweep(ptrs)
    assert [(p.file_idx, p.task) for p in ordered] == [(0, "t1"), (1, "t1"), (0, "t2"), (1, "t2"), (0, None)]
    assert read_raw(files, [ptrs[2], ptrs[0]]) == ["not json", '{"task_id": "t1"}']
    assert files[0].stem == "a" and ptrs[0].key(files) != Pointer(1, 1, 0, None).key(files)
    # the driver's columnar pointers: the same records, keys and sweep order
    arr = PointerArray.scan(files, with_tasks=True)
    assert arr.codes().tolist() == [key_code(p.file_idx, p.line) for p in ptrs]
    got = arr.ordered_for_sweep()
    assert list(zip(got.file_idx.tolist(), got.line.tolist(), got.offset.tolist())) == [
        (p.file_idx, p.line, p.offset) for p in ordered]
    assert pointer_table(got[:3]).to_pylist() == pointer_table(ordered[:3]).to_pylist()


def test_parquet_input_rows(tmp_path):
    path = tmp_path / "m.parquet"
    pq.write_table(pa.Table.from_pylist([{**GOOD, "task_id": "x"}, {**GOOD, "task_id": "y"}]), path)
    files = resolve_inputs(str(path))
    ptrs = list(scan(files, with_tasks=True))
    assert [p.task for p in ptrs] == ["x", "y"]
    rec = json.loads(read_raw(files, ptrs[1:])[0])
    assert extract_fields(rec)["prediction"] == "answer" and rec["task_id"] == "y"


def test_resume_state_truncates_torn_line_and_guards_config(tmp_path):
    out = str(tmp_path)
    prepare(out, {"a": 1}, resume=True, overwrite=False)
    assert list(finished_keys(out)) == []
    w = RecordWriter(out, set())
    w.write([{"ragscale": {"record_key": "k1"}, "error": None}, {"ragscale": {"record_key": "k1"}, "error": None}])
    w.close()
    assert w.written == 1 and w.duplicates == 1
    with open(os.path.join(out, "records.jsonl"), "a") as fh:
        fh.write('{"ragscale": {"record_key": "k2"')  # killed mid-write
    prepare(out, {"a": 1}, resume=True, overwrite=False)
    assert list(finished_keys(out)) == ["k1"]
    assert [r["ragscale"]["record_key"] for r in iter_records(os.path.join(out, "records.jsonl"))] == ["k1"]
    with pytest.raises(UserError, match="different configuration"):
        prepare(out, {"a": 2}, resume=True, overwrite=False)
    prepare(out, {"a": 2}, resume=True, overwrite=True)
    assert list(finished_keys(out)) == []


def test_record_keys_mark_each_record_once_and_count_the_run(tmp_path):
    a = tmp_path / "a.jsonl"
    a.write_text("".join(f'{{"task_id": "t{i}"}}\n' for i in range(5)))
    files = resolve_inputs(str(a))
    ptrs = list(scan(files, with_tasks=False))
    arr = PointerArray.scan(files, with_tasks=False)[:3]  # the run expects the first three (limit=3)
    keys = RecordKeys(files, arr)
    k = [p.key(files) for p in ptrs]
    assert keys.add(k[1]) and not keys.add(k[1]) and k[1] in keys and k[0] not in keys
    assert keys.add(k[4]) and k[4] in keys and keys.other == {k[4]}  # an earlier run's record beyond limit
    assert keys.add("gone-0000:7") and not keys.add("gone-0000:7")  # a file no longer among the inputs
    assert keys.done_mask(arr).tolist() == [False, True, False] and keys.expected_done() == 1
    w = RecordWriter(str(tmp_path), keys)
    w.write([{"ragscale": {"record_key": x}, "error": None} for x in (k[0], k[1], k[2], k[0])])
    w.close()
    assert w.written == 2 and w.duplicates == 2 and keys.expected_done() == 3


def test_registry_did_you_mean_and_requirements():
    with pytest.raises(UserError, match="did you mean 'RougeL_stemFalse'"):
        resolve_metrics(["RougeL_stemFals"], ["algorithmic"])
    assert validate_steps(["ragas", "hmean"]) == ["ragas", "hmean"]
    with pytest.raises(UserError, match=r"HMean.*needs RL_F \(step ragas\)"):
        resolve_metrics(["HMean", "RB_llm", "RB_agg", "Recall", "RougeL_stemFalse", "BertscoreR", "BertKPrec"],
                        ["algorithmic", "radbench", "hmean"])
    with pytest.raises(UserError, match="did you mean 'algorithmic'"):
        validate_steps(["algorithmc"])
    with pytest.raises(UserError, match="needs"):
        resolve_metrics(["RB_agg", "Recall"], ["algorithmic"])


def test_summary_scalar_reduction():
    assert record_scalar("BertKPrec", [0.1, None, 0.3]) == 0.3  # per passage: best
    assert record_scalar("RougeL_stemFalse", [0.2, 0.9]) == 0.2  # per target: first
    assert record_scalar("RB_agg_zero_denominator", [True]) == 1.0
    assert record_scalar("BertKPrec", None) is None


def test_metric_modules_import_neither_torch_nor_ray():
    code = (
        "import sys, ragscale.metrics.lexical, ragscale.metrics.bertscore, ragscale.metrics.aggregate, "
        "ragscale.record, ragscale.io.inputs, ragscale.io.output, ragscale.report.summary, ragscale.pipeline.cpu_stages;"
        "print(sorted(m for m in ('torch', 'ray', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_secrets_on_the_command_line_are_refused_before_hydra_writes_them():
    from ragscale.overrides import check_overrides as _precheck_overrides

    for arg in ["+judge.options.api_key=sk-planted", "judge.options.token=abc", "+x.password=p"]:
        with pytest.raises(UserError, match="environment variables only") as e:
            _precheck_overrides(["+scenario=mtrag", arg])
        assert "sk-planted" not in str(e.value)
    _precheck_overrides(["+scenario=mtrag", "judge=openai", "judge.options.api_key_env=MY_KEY"])  # a name, fine
