"""What a record contributes to PairedValues (docs/statistics.md, "What is compared"): AnsAcc, 1 when the
record's answerability was handled right and 0 when not (no value without a known class or the IDK
judge's value); a value that is not a number is left out without losing the record's other metrics;
a record whose metrics are not a mapping contributes nothing."""

import numpy as np
import pytest

from ragscale.report import significance as sig


def _row(metrics, records):
    pv = sig.PairedValues(metrics)
    for i, rec in enumerate(records):
        pv.add({"task_id": f"t{i}", "model_id": "m", "error": None, **rec})
    return {name: pv.row("m", name).tolist() for name in metrics}


@pytest.mark.parametrize("fields, idk, want", [
    ({"answerability": "ANSWERABLE"}, 0, 1.0),
    ({"answerability": "ANSWERABLE"}, 1, 0.0),
    ({"answerability": "UNANSWERABLE"}, 1, 1.0),
    ({"answerability": "UNANSWERABLE"}, 0, 0.0),
    ({"input": [{"speaker": "user", "text": "q", "enrichments": {"answerability": ["PARTIAL"]}}]}, 0, 1.0),
])
def test_ansacc_is_whether_answerability_was_handled_right(fields, idk, want):
    assert _row([sig.ANS_ACC], [{**fields, "metrics": {"idk_eval": [idk]}}]) == {"AnsAcc": [want]}


@pytest.mark.parametrize("rec", [
    {"metrics": {"idk_eval": [1]}},  # no answerability class
    {"answerability": "ANSWERABLE", "metrics": {"RB_agg": [0.5]}},  # no IDK judge value
])
def test_ansacc_has_no_value_without_a_class_or_the_idk_judge(rec):
    pv = sig.PairedValues([sig.ANS_ACC])
    pv.add({"task_id": "t0", "model_id": "m", "error": None, **rec})
    assert ("m", sig.ANS_ACC) not in pv.cols and pv.records("m", sig.ANS_ACC)[1].tolist() == []


def test_a_value_that_is_not_a_number_leaves_the_records_other_metrics_in():
    got = _row(["RB_agg", "RL_F", "RB_llm"], [{"metrics": {"RB_agg": "n/a", "RL_F": [0.25], "RB_llm": ["x"]}},
                                            {"metrics": {"RB_agg": [0.5], "RL_F": [0.75], "RB_llm": [0.1]}}])
    np.testing.assert_equal(got, {"RB_agg": [np.nan, 0.5], "RL_F": [0.25, 0.75], "RB_llm": [np.nan, 0.1]})


@pytest.mark.parametrize("metrics", [None, [0.5], "0.5"])
def test_a_record_whose_metrics_are_not_a_mapping_contributes_no_value(metrics):
    pv = sig.PairedValues(["RB_agg", sig.ANS_ACC])
    pv.add({"task_id": "t0", "model_id": "m", "error": None, "answerability": "ANSWERABLE", "metrics": metrics})
    pv.add({"task_id": "t1", "model_id": "m", "error": None, "metrics": {"RB_agg": [0.5]}})
    assert list(pv.cols) == [("m", "RB_agg")] and pv.row("m", "RB_agg").tolist()[1] == 0.5
    assert len(pv.tasks) == 2
