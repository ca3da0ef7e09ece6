"""The Python API: ``ragscale.evaluate(data, scenario=..., overrides=[...]) -> Run`` and
``ragscale.load(run_dir) -> Run``. The ``ragscale`` command is a thin layer over the same
driver (ragscale.driver); a Run reads what a run wrote (records.parquet, summary.json, run.json).
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any, Callable, Mapping, Sequence

from ragscale.errors import UserError

RECORD_COLUMNS = ("record_key", "model_id", "task_id", "conversation_id", "turn", "answerability", "prediction",
                  "error_stage", "error_message", "warnings")
# to_pandas(inputs=True): the inputs as ragscale read them, beside the ids (records.parquet's columns;
# "prediction" shown as "answer")
INPUT_COLUMNS = ("record_key", "model_id", "task_id", "conversation_id", "turn", "question", "contexts", "prediction",
                 "reference", "answerability", "error_stage", "error_message", "warnings")


class Run:
    """A finished (or failed) run's outputs in ``path``."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        if not os.path.isfile(os.path.join(self.path, "records.jsonl")):
            raise UserError(f"{self.path} is not a ragscale run (no records.jsonl)")

    def file(self, name: str) -> str | None:
        """The path of one of the run's files (``report.html``, ``leaderboard.md``, ...), or None."""
        p = os.path.join(self.path, name)
        return p if os.path.exists(p) else None

    @property
    def run_info(self) -> dict:
        """run.json: config (secrets redacted), models, versions, timings, work counters, record counts."""
        return self._json("run.json")

    @property
    def summary(self) -> dict:
        """summary.json: per model the mean of every metric, counts, errors, answerability accuracy."""
        return self._json("summary.json")

    @property
    def ok(self) -> bool:
        return self.run_info.get("status") == "ok"

    @property
    def files(self) -> dict[str, str]:
        """The run's output files that exist, by their path in the run's folder: the records, the
        summary, run.json, consistency.jsonl and nuggets.jsonl, then every file the report sinks wrote
        as run.json's ``outputs`` lists them (``leaderboard.md``, ``report.html``, ``retrieval.md``, ...)."""
        names = ["records.jsonl", "records.parquet", "summary.json", "summary.csv", "run.json", "consistency.jsonl",
                 "nuggets.jsonl"]
        try:
            outputs = self.run_info.get("outputs") or {}
        except (OSError, ValueError):  # run.json unreadable: the core files only
            outputs = {}
        for written in outputs.values() if isinstance(outputs, dict) else ():
            names += [written] if isinstance(written, str) else [p for p in written or () if isinstance(p, str)]
        return {n: p for n in dict.fromkeys(names) if (p := self.file(n))}

    @property
    def leaderboard(self) -> Any:
        """The models as the leaderboard ranks them (pandas DataFrame: rank, model_id, count,
        errors, then every metric's mean), from the summary's exact figures; a calibrated run
        (calibration.human) ranks by the calibrated mean and adds ``calibrated_<metric>`` with
        its ``_ci_low``/``_ci_high``."""
        import pandas as pd

        from ragscale.report.headline import table_metrics
        from ragscale.report.ranking import ranking, standings

        summary = self.summary
        metrics = table_metrics(summary)
        basis, calibrated = ranking(summary)
        extra = [f"calibrated_{basis}", f"calibrated_{basis}_ci_low", f"calibrated_{basis}_ci_high"] if calibrated else []
        rows = []
        for rank, model, d in standings(summary):
            row = {"rank": rank, "model_id": model, "count": d["count"], "errors": d["errors"]}
            if calibrated:
                cal = summary["calibration"]["metrics"][basis]["models"].get(model, {}).get("calibrated") or {}
                row.update(zip(extra, [cal.get("mean"), *(cal.get("ci") or [None, None])]))
            rows.append({**row, **{m: d["metrics"].get(m) for m in metrics}})
        return pd.DataFrame(rows, columns=["rank", "model_id", "count", "errors", *extra, *metrics])

    def to_pandas(self, inputs: bool = True) -> Any:
        """One row per record: its ids, its inputs as ragscale read them (``question``,
        ``contexts``, ``answer``, ``reference``, as ragas' ``EvaluationResult.to_pandas()``), its
        answerability and error (``error_stage``, ``error_message``, null when it was scored),
        then one column per metric. One-element lists (MT-RAG's value shape, one reference) are
        unwrapped, longer lists (several references, per-passage grades) kept. ``inputs=False``:
        the ids, ``prediction`` and the error, without the other inputs."""
        import pandas as pd
        import pyarrow.parquet as pq

        path = self.file("records.parquet")
        if path is None:
            raise UserError(f"{self.path} has no records.parquet (the run did not finish: re-run it to resume)")
        table = pq.read_table(path)
        base = table.select([c for c in (INPUT_COLUMNS if inputs else RECORD_COLUMNS) if c in table.column_names])
        base = base.to_pandas()
        if inputs:
            base = base.rename(columns={"prediction": "answer"})
            if "reference" in base:
                base["reference"] = [_unwrap(v.tolist() if hasattr(v, "tolist") else v) for v in base["reference"]]
            if "contexts" in base:
                base["contexts"] = [v.tolist() if hasattr(v, "tolist") else v for v in base["contexts"]]
        metrics = table.column("metrics").combine_chunks() if "metrics" in table.column_names else None
        if metrics is not None and metrics.type.num_fields:
            for i in range(metrics.type.num_fields):
                name = metrics.type.field(i).name
                base[name] = [_unwrap(v) for v in metrics.field(i).to_pylist()]
        return pd.DataFrame(base)

    def _json(self, name: str) -> dict:
        path = self.file(name)
        if path is None:
            return {}
        with open(path) as fh:
            return json.load(fh)

    def __repr__(self) -> str:
        rec = self.run_info.get("records") or {}
        return f"Run({self.path!r}, status={self.run_info.get('status')!r}, records={rec.get('out')})"


def _unwrap(value: Any) -> Any:
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def load(run_dir: str) -> Run:
    """The Run written in ``run_dir`` (by ``evaluate`` or the ``ragscale run`` command)."""
    return Run(run_dir)


def evaluate(data: Any = None, metrics: str | Sequence[str] | None = None, *, scenario: str | None = None,
             column_map: Mapping[str, str] | None = None, judge: str | Mapping[str, Any] | None = None,
             overrides: Sequence[str] = (), output_dir: str | None = None,
             printer: Callable[[str], None] = print) -> Run:
    """Evaluate ``data`` and return the Run.

    ``data``: a path, a glob or a list of paths (JSONL, CSV, Parquet), a pandas DataFrame, a list
    of dicts, a ``datasets.Dataset``, or None for the scenario's bundled sample. ``metrics``: metric
    names or aliases (``["faithfulness", "RougeL"]``; ``ragscale.metrics()`` lists them): the run
    computes these and what they are computed from. ``scenario``: a scenario's metrics and settings
    (``"mtrag"``, ``"ragas"``...; ``metrics`` then narrows them); with neither, MT-RAG's pipeline.
    ``column_map``: your column names for the fields ragscale reads (``{"question": "query",
    "answer": "generated", "contexts": "docs", "reference": "gold"}``; docs/inputs.md). ``judge``:
    a judge config (``"local"``, ``"openai"``, ``"vllm"``) or its settings (``{"name": "openai",
    "model": "gpt-4o-mini", "base_url": ...}``; keys that are not judge settings are engine
    options); API keys only from environment variables. ``overrides``: ``key=value`` as on the
    command line. Ray is started in this process (and stopped afterwards) unless it is running.
    A bad config or input raises UserError (one line) before any work; a run with failed records
    warns and returns its Run (``to_pandas()`` has each record's error); a run that stops midway
    returns its Run with ``ok == False`` (call again with the same output_dir to resume).
    """
    from omegaconf import open_dict

    from ragscale.columns import mapped
    from ragscale.exitcodes import FAILED, INCOMPLETE, INTERRUPTS, OK, outcome
    from ragscale.io.frames import is_in_memory, write_jsonl
    from ragscale.io.lock import OutputDirLock
    from ragscale.overrides import explain
    from ragscale.plan import compose
    from ragscale.driver import execute
    from ragscale.secrets import check_config, refuse_secrets

    refuse_secrets(overrides, where="in overrides")
    names = [metrics] if isinstance(metrics, str) else list(metrics or [])
    columns = mapped(column_map)
    judge_name, judge_settings = _judge(judge)
    if scenario is None and not names:
        scenario = "mtrag"
    args = [*([f"+scenario={scenario}"] if scenario else []), *([f"judge={judge_name}"] if judge_name else []),
            *overrides] + ([f"output_dir={output_dir}"] if output_dir else [])
    try:
        cfg = compose(args)
    except Exception as e:  # noqa: BLE001 - Hydra/OmegaConf raise several exception types
        raise UserError(explain(e, args)) from None
    out_dir = os.path.abspath(cfg.output_dir)
    with open_dict(cfg):
        cfg.output_dir = out_dir
        if names:
            cfg.select = names
        for field, column in columns.items():
            cfg.columns[field] = column
        for key, value in judge_settings.items():
            if key == "options" and isinstance(value, Mapping):
                cfg.judge.options.update(dict(value))
            else:
                (cfg.judge if key in cfg.judge else cfg.judge.options)[key] = value
        if data is not None and not is_in_memory(data):
            cfg.input = [os.fspath(d) for d in data] if isinstance(data, (list, tuple)) else os.fspath(data)
    check_config(cfg)  # judge settings, column_map, paths: refused before anything is written (ragscale.secrets)
    with OutputDirLock(out_dir, printer):  # before the in-memory data is written there (ragscale.io.lock)
        if data is not None and is_in_memory(data):
            with open_dict(cfg):
                cfg.input = write_jsonl(data, os.path.join(out_dir, "inputs"))
        code = execute(cfg, printer)
    run = Run(out_dir)
    if code == FAILED or code in INTERRUPTS:
        warnings.warn(f"ragscale run in {out_dir} failed: {run.run_info.get('failure') or 'records missing'}; "
                      "call evaluate again with the same output_dir to resume", RuntimeWarning, stacklevel=2)
    elif code == INCOMPLETE:  # every record scored, an output not written
        failed = ", ".join(map(str, run.run_info.get("outputs_failed") or [])) or "see run.json"
        warnings.warn(f"ragscale run in {out_dir}: the records were scored (Run.to_pandas()), but these outputs "
                      f"were not written: {failed}", RuntimeWarning, stacklevel=2)
    elif code != OK:  # finished, but some or all records failed
        rec = run.run_info.get("records") or {}
        said = outcome(code, rec.get('in', 0), rec.get('errored', 0), rec.get('judge_failed', 0))
        warnings.warn(f"ragscale run in {out_dir}: {said}; a failed record's error is in Run.to_pandas()'s "
                      "error_message, a judge's failures in report.html", RuntimeWarning, stacklevel=2)
    return run


def _judge(judge: str | Mapping[str, Any] | None) -> tuple[str | None, dict]:
    """(judge config name, settings) of ``evaluate``'s ``judge``: a name, or a mapping whose
    ``name`` picks the config and whose other keys are its settings (checked for secrets with the
    whole config, ``ragscale.secrets.check_config``)."""
    if judge is None:
        return None, {}
    if isinstance(judge, str):
        return judge, {}
    if not isinstance(judge, Mapping):
        raise UserError(f"judge must be a judge config name (local, openai, vllm) or a dict of its settings, "
                        f"got {type(judge).__name__}")
    settings = dict(judge)
    name = settings.pop("name", None)
    return (None if name is None else str(name)), settings
