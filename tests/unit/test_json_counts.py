"""Each input line is parsed once, and each record's metrics are serialised once, by the writer
(issue 34). The driver's scan and the stages a record goes through in the workers (read +
lexical, a judge, the null HHEM stage, derive, the output lines), chained in-process as the
pipeline chains them with Arrow batches between them: every ``json.loads`` and ``json.dumps`` is
counted and sorted by what it parsed or wrote."""

from __future__ import annotations

import json

from ragscale.actors.engines import Generation
from ragscale.io.inputs import PointerArray, resolve_inputs
from ragscale.pipeline.cpu_stages import derive, load_and_lexical, null_metric, output_lines, pointer_table
from ragscale.pipeline.stage import process_table
from ragscale.row import row_schema

METRICS = ["Recall", "RougeL_stemFalse", "Length", "exact_match", "idk_eval", "hhem"]


class Engine:
    """A judge engine that answers every IDK prompt with the same verdict."""

    name, model = "fake", "fake"

    def generate(self, prompts, temperature=0.0, seed=None, on_done=None):  # noqa: ANN001, ANN201
        return [Generation('{"label": "no"}', 10, 3) for _ in prompts]


def mtrag_line(i: int) -> str:
    return json.dumps({"task_id": f"t{i // 3}", "model_id": f"m{i % 3}",
                       "input": [{"speaker": "user", "text": f"question {i // 3}?"}],
                       "contexts": [{"document_id": "d", "text": f"passage {i // 3} about things"}],
                       "targets": [{"text": f"answer {i // 3}"}], "predictions": [{"text": f"answer {i} maybe"}]})


def test_each_input_line_is_parsed_once_and_metrics_serialised_once(monkeypatch, tmp_path):
    import ragscale.actors.judge as judge_mod

    n = 12
    lines = [mtrag_line(i) for i in range(n)]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(judge_mod, "build", lambda kwargs: Engine())
    actor = judge_mod.JudgeActor({}, ["idk"], str(tmp_path / "c.sqlite"), streaming=False, max_retries=0)

    loads, dumps = [], []
    real_loads, real_dumps = json.loads, json.dumps

    def counting_loads(s, *a, **kw):  # noqa: ANN001, ANN202
        out = real_loads(s, *a, **kw)
        loads.append((s if isinstance(s, str) else bytes(s).decode("utf-8", "replace"), out))
        return out

    def counting_dumps(obj, *a, **kw):  # noqa: ANN001, ANN202
        dumps.append(obj)
        return real_dumps(obj, *a, **kw)

    monkeypatch.setattr(json, "loads", counting_loads)
    monkeypatch.setattr(json, "dumps", counting_dumps)

    files = resolve_inputs(str(path))
    pointers = PointerArray.scan(files, with_tasks=True).ordered_for_sweep()
    batch = load_and_lexical(pointer_table(pointers), files=files, metrics=METRICS, schema=row_schema(METRICS))
    batch = process_table(actor, "judge", batch)
    batch = null_metric(batch, metric="hhem", judge="hhem", reason="no HHEM model here")
    batch = derive(batch, metrics=METRICS)
    out = [real_loads(line) for line in output_lines(batch).column("line").to_pylist()]

    assert len(out) == n and all(r["error"] is None and set(r["metrics"]) == set(METRICS) for r in out)
    names = set(METRICS)

    def is_metrics(obj: object) -> bool:
        return isinstance(obj, dict) and bool(obj) and set(obj) <= names

    input_parses = sum(1 for s, _ in loads if s.strip() in lines)
    assert input_parses == n, f"{input_parses} parses of {n} input lines (the scan and the reader)"
    assert sum(1 for _, obj in loads if is_metrics(obj)) == 0, "a stage parsed a record's metrics"
    assert sum(1 for obj in dumps if is_metrics(obj)) == n, "metrics serialised more than once per record"
