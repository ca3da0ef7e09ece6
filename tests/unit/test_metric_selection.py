"""Metrics chosen by name (``metrics=[...]`` / ``evaluate(metrics=...)``): aliases, short labels,
what a metric is computed from, the steps planned, and the catalog table (``ragscale.metrics()``)."""

from __future__ import annotations

import pytest

import ragscale
from ragscale.catalog import COLUMNS, rows
from ragscale.commands.metrics import main as metrics_main
from ragscale.errors import UserError
from ragscale.metrics.registry import NEEDS, accepted_names, canonical, catalog, lookup, select


@pytest.mark.parametrize("name, expected", [
    ("faithfulness", "RL_F"),  # ragas
    ("RougeL", "RougeL_stemFalse"),  # the short label
    ("rougel", "RougeL_stemFalse"),  # any letter case
    ("mean_umbrela_score", "umbrela_mean"),  # open-rag-eval's score names
    ("vital_nuggetizer_score", "nuggets_vital"),
    ("no_answer_score", "answered"),
    ("hallucination_score", "hhem"),
    ("response_relevancy", "answer_relevancy"),
    ("P@5", "P@5"),  # a cut-off of P@k
    ("exact_match", "exact_match"),
])
def test_canonical_names(name, expected):
    assert canonical(name) == expected


def test_an_unknown_metric_lists_the_closest_names_and_where_all_are():
    with pytest.raises(UserError) as e:
        canonical("faithfullness")
    assert str(e.value) == ("unknown metric 'faithfullness' (did you mean 'RL_F'?); `ragscale metrics` lists every "
                            "metric with its aliases")


def test_select_plans_what_a_metric_is_computed_from_in_step_order():
    steps, metrics = select(["HMean"])
    assert steps == ["algorithmic", "ragas", "radbench", "hmean"]
    assert metrics[-1] == "HMean" and {"RL_F", "RB_llm", "RB_agg", "Recall", "BertKPrec"} <= set(metrics)
    for m in metrics:  # every requirement comes before what needs it
        assert all(metrics.index(r) < metrics.index(m) for r in lookup(m).requires)
    assert select(["faithfulness", "RougeL", "RL_F"]) == (["algorithmic", "ragas"], ["RL_F", "RougeL_stemFalse"])


def test_aliases_are_unambiguous_and_needs_are_fields():
    names = accepted_names()
    for spec in catalog().values():
        assert set(spec.needs) <= set(NEEDS)
        for alias in spec.aliases:
            assert names[alias] == spec.name, alias
            assert alias not in catalog() or alias == spec.name


def test_the_catalog_table():
    df = ragscale.metrics()
    assert tuple(df.columns) == COLUMNS and len(df) == len(catalog())
    rl_f = df.set_index("name").loc["RL_F"]
    assert "faithfulness" in rl_f["aliases"] and rl_f["judge"] and rl_f["family"] == "ragas"
    assert rl_f["needs"] == ["answer", "question", "contexts"] and tuple(rl_f["range"]) == (0.0, 1.0)
    recall = df.set_index("name").loc["Recall"]
    assert not recall["judge"] and recall["needs"] == ["answer", "reference"] and recall["higher_is_better"]
    assert set(ragscale.metrics("custom")["family"]) == {"custom"}
    from ragscale.metrics import lexical  # noqa: F401 - the package stays callable once its modules are imported

    assert len(ragscale.metrics("ragas")) == len(rows("ragas"))


def test_the_metrics_command(capsys):
    assert metrics_main(["--family", "ragas"]) == 0
    out = capsys.readouterr().out
    assert "RL_F" in out and "faithfulness" in out and "Recall" not in out
    assert metrics_main(["--family", "ragass"]) == 2
    assert "unknown family 'ragass' (did you mean 'ragas'?)" in capsys.readouterr().err
