"""A metric defined in one place (this module) is computed on Ray workers, summarised,
ranked by its declared direction and shown in the report, with no other file touched."""

from __future__ import annotations

import pytest

from ragscale.metrics.registry import lexical_metric

pytestmark = [pytest.mark.integration, pytest.mark.own_ray]  # ragscale.evaluate in the test process


@lexical_metric("words_per_passage", family="custom", scalar=True, short="WPP", higher_is_better=False,
                reference="a test metric: answer words per retrieved passage")
def words_per_passage(prediction: str, targets, passages) -> float:
    return len(prediction.split()) / max(1, len(passages))


RECORDS = [
    {"model_id": "terse", "user_input": "Capital of France?", "response": "Paris.", "reference": "Paris",
     "retrieved_contexts": ["Paris is the capital of France.", "France is in Europe."]},
    {"model_id": "terse", "user_input": "Legs of a spider?", "response": "Eight legs.", "reference": "8",
     "retrieved_contexts": ["Spiders have eight legs."]},
    {"model_id": "verbose", "user_input": "Capital of France?", "response": "The capital of France is Paris.",
     "reference": "Paris", "retrieved_contexts": ["Paris is the capital of France."]},
    {"model_id": "verbose", "user_input": "Legs of a spider?", "response": "A spider has eight legs in total.",
     "reference": "8", "retrieved_contexts": []},
]


def test_a_metric_declared_in_a_test_module_runs_end_to_end(tmp_path):
    import ragscale

    lines: list[str] = []
    run = ragscale.evaluate(RECORDS, scenario="custom", output_dir=str(tmp_path / "out"), printer=lines.append,
                            overrides=["custom.expectations=null", "metrics.custom=[words_per_passage]"])
    assert run.ok
    df = run.to_pandas().set_index(["model_id", "record_key"]).sort_index()
    expected = {"terse": [0.5, 2.0], "verbose": [6.0, 7.0]}  # words / max(1, passages)
    for model, values in expected.items():
        assert sorted(df.loc[model, "words_per_passage"]) == values
        assert run.summary["models"][model]["metrics"]["words_per_passage"] == pytest.approx(sum(values) / 2)
    board = run.leaderboard
    assert list(board["model_id"]) == ["terse", "verbose"] and list(board["rank"]) == [1, 2]  # lower is better
    md = open(run.files["leaderboard.md"]).read()
    assert "words_per_passage" in md and "lower is better" in md
    assert any("WPP" in line for line in lines)  # the CLI table's short name
    html = open(run.files["report.html"]).read()
    assert "<th>words_per_passage</th>" in html and ">1.2500<" in html and ">6.5000<" in html
