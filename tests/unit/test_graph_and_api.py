"""The stage graph's check (a missing producer is a one-line error before Ray starts) and the
Python API's pure parts (in-memory inputs, flat metric columns)."""

from __future__ import annotations

import json

import pytest

from ragscale.errors import UserError
from ragscale.pipeline.graph import check_graph
from ragscale.pipeline.stage import Stage


def test_a_need_no_earlier_stage_produces_is_a_one_line_error():
    stages = [Stage("judge", object, produces=frozenset({"RL_F", "details:x"})),
              Stage("derive", object, needs=frozenset({"RL_F", "RB_llm"}), produces=frozenset({"HMean"}))]
    with pytest.raises(UserError) as e:
        check_graph(stages, first=frozenset({"Recall"}))
    assert str(e.value).startswith("stage derive needs RB_llm, which no earlier stage produces") and "\n" not in str(e.value)
    check_graph([stages[0], Stage("judge", object, produces=frozenset({"RB_llm"})), stages[1]])  # now produced


def test_the_graph_of_every_bundled_scenario_is_complete():
    from ragscale.pipeline.graph import build_stages
    from ragscale.plan import compose, plan_run

    for scenario in ("mtrag", "mtragun", "ragas", "trec", "taxonomy", "custom"):
        plan = plan_run(compose([f"+scenario={scenario}"]))
        names = [s.name for s in build_stages(plan)]
        assert names == sorted(names, key=["encoder", "nli", "judge", "relevancy", "derive"].index), scenario


def test_answer_relevancy_without_its_judge_is_refused_before_ray_starts():
    from dataclasses import replace

    from ragscale.pipeline.graph import build_stages
    from ragscale.plan import compose, plan_run

    plan = plan_run(compose(["+scenario=ragas", "metrics.ragas=[RL_F]"]))
    with pytest.raises(UserError, match="stage relevancy needs details:ragas_answer_relevancy"):
        build_stages(replace(plan, metrics=(*plan.metrics, "answer_relevancy")))


def test_in_memory_data_is_written_once_content_addressed(tmp_path):
    import numpy as np
    import pandas as pd

    from ragscale.io.frames import is_in_memory, write_jsonl

    df = pd.DataFrame({"response": ["a", "b"], "score": [np.float32(0.5), float("nan")],
                       "retrieved_contexts": [np.array(["x", "y"]), []]})
    path = write_jsonl(df, str(tmp_path))
    rows = [json.loads(line) for line in open(path)]
    assert rows == [{"response": "a", "score": 0.5, "retrieved_contexts": ["x", "y"]},
                    {"response": "b", "score": None, "retrieved_contexts": []}]
    assert path.endswith("/data.jsonl") and write_jsonl(df, str(tmp_path)) == path  # same data, same file
    assert write_jsonl(df.iloc[:1], str(tmp_path)) != path  # other data: another folder (a resume would refuse it)
    assert is_in_memory(df) and is_in_memory([{"a": 1}]) and not is_in_memory(["a.jsonl", "b.jsonl"])
    assert not is_in_memory("a.jsonl") and not is_in_memory(None)
    with pytest.raises(UserError, match="no records"):
        write_jsonl([], str(tmp_path))
    with pytest.raises(UserError, match="record 1 must be a mapping"):
        write_jsonl([{"a": 1}, "oops"], str(tmp_path))
    with pytest.raises(UserError, match="data must be a path"):
        write_jsonl(42, str(tmp_path))


def test_run_to_pandas_flattens_metrics_and_keeps_errors(tmp_path):
    import pandas as pd

    from ragscale.api import Run, load
    from ragscale.report.summary import finalize

    recs = [
        {"model_id": "m", "task_id": "t1", "predictions": [{"text": "x"}],
         "metrics": {"Recall": [0.5], "Extractiveness_RougeL": [0.1, 0.2], "umbrela_mean": 2.0}, "error": None,
         "ragscale": {"record_key": "f:1", "warnings": []}},
        {"model_id": "m", "task_id": "t2", "metrics": {}, "error": {"stage": "input", "message": "no predictions"},
         "ragscale": {"record_key": "f:2", "warnings": []}},
    ]
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    finalize(str(tmp_path), ["Recall", "Extractiveness_RougeL", "umbrela_mean"])
    df = load(str(tmp_path)).to_pandas()
    assert list(df["record_key"]) == ["f:1", "f:2"]
    assert df.loc[0, "Recall"] == 0.5 and df.loc[0, "Extractiveness_RougeL"] == [0.1, 0.2]
    assert df.loc[0, "umbrela_mean"] == 2.0 and pd.isna(df.loc[1, "Recall"])
    assert df.loc[1, "error_stage"] == "input" and df.loc[1, "error_message"] == "no predictions"
    with pytest.raises(UserError, match="not a ragscale run"):
        Run(str(tmp_path / "nope"))


def test_evaluate_refuses_a_secret_override(tmp_path):
    import ragscale

    with pytest.raises(UserError, match="looks like a secret"):
        ragscale.evaluate(None, scenario="custom", output_dir=str(tmp_path),
                          overrides=["+judge.options.api_key=sk-abcdefghijklmnopqrstuvwxyz012345"])
    assert not any(tmp_path.iterdir())
