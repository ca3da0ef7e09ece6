"""open-rag-eval's own plotting (``TRECEvaluator.plot_metrics``, executed from the local copy at
ORAG_COMMIT) on ragscale's TREC export finds ragscale's share of questions answered (issue 36): a
run with no answer (NO_ANSWER) is in the export as "not answered", where open-rag-eval's loader
would have dropped it and its chart would overstate the share (docs/outputs.md, "open-rag-eval
export")."""

from __future__ import annotations

import ast
import types

import pytest

from conftest import ORAG_COMMIT, reference_source
from ragscale.report.orag_export import export_orag_csv
from test_orag_csv import read_csv_rows, sample_records

pytest.importorskip("pandas")
matplotlib = pytest.importorskip("matplotlib")

PATH = "open_rag_eval/evaluators/trec_evaluator.py"


def trec_evaluator() -> types.ModuleType:
    """open-rag-eval's trec_evaluator module, its package imports replaced by empty stand-ins (the
    plotting needs none of them)."""
    tree = ast.parse(reference_source("open-rag-eval", PATH, ORAG_COMMIT))
    names, body = {}, []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("open_rag_eval")):
            names.update({a.asname or a.name: type(a.name, (), {}) for a in node.names})
            continue
        body.append(node)
    mod = types.ModuleType("orag_trec_evaluator")
    mod.__dict__.update(names, Evaluator=object)
    exec(compile(ast.Module(body=body, type_ignores=[]), PATH, "exec"), mod.__dict__)  # noqa: S102 - the reference's code
    return mod


def plotted_share(csv_path: str, tmp_path, monkeypatch) -> float:
    """The "Questions Answered" bar that plot_metrics draws for one CSV."""
    from matplotlib.axes import Axes

    bars = []
    real = Axes.bar

    def bar(self, x, height, *args, **kwargs):  # noqa: ANN001, ANN202
        bars.append(list(height))
        return real(self, x, height, *args, **kwargs)

    monkeypatch.setattr(Axes, "bar", bar)
    trec_evaluator().TRECEvaluator.plot_metrics([csv_path], str(tmp_path / "plot.png"))
    assert (tmp_path / "plot.png").exists() and len(bars) == 1
    return bars[0][0]


@pytest.mark.filterwarnings("ignore:vert. bool was deprecated:DeprecationWarning")  # open-rag-eval's boxplot call
def test_open_rag_evals_plot_counts_the_no_answer_run(tmp_path, monkeypatch):
    records = [r for r in sample_records() if r["query_run"] == 1]  # the plot reads each query's first run
    assert any(r["answer_status"] == "NO_ANSWER" for r in records)
    out = str(tmp_path / "m.csv")
    export_orag_csv(records, out)
    share = plotted_share(out, tmp_path, monkeypatch)
    ours = sum(r["metrics"]["answered"] for r in records) / len(records)  # summary.json's mean of answered
    assert share == pytest.approx(100 * ours) and ours == pytest.approx(6 / 8)
    # had the NO_ANSWER run been left out, as open-rag-eval's loader does, the chart would say 6 of 7
    kept = str(tmp_path / "without.csv")
    export_orag_csv([r for r in records if r["answer_status"] == "ok"], kept)
    assert plotted_share(kept, tmp_path, monkeypatch) == pytest.approx(100 * 6 / 7)
    assert len(read_csv_rows(out)[1]) == len(records)
