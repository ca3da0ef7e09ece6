"""Experiment tracking (``tracking=mlflow``): at the end of a run, one MLflow run with the
resolved config as params (secrets redacted), every model's summary means as metrics
``<model>/<metric>``, tags and the run's report files as artifacts.

The pure part (flattening, name sanitizing, what is logged) is here without MLflow; MLflow
is imported only by ``log_run``, and ``check_tracking`` finds it before Ray starts. A
tracking failure is a warning: the run's own files are already written. docs/tracking.md
tells the story (where the local store is, what is logged, the secret policy).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import time
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

from ragscale.errors import UserError
from ragscale.exitcodes import INTERRUPTED, OK, STATUS

BACKENDS = ("none", "mlflow")
INSTALL_HINT = "pip install 'ragscale[tracking]'"
# The run's files logged as artifacts, when they exist (records.jsonl stays in output_dir).
ARTIFACTS = ("run.json", "summary.json", "summary.csv", "leaderboard.md", "leaderboard.csv", "report.html")
MAX_NAME = 250  # MLflow's longest param, metric and tag key
MAX_PARAM_VALUE = 500  # the shortest param value every supported MLflow accepts; run.json has the rest
# A conservative subset of MLflow's allowed name characters (no colon: MLflow refuses it on Windows).
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.\- /]+")
_QUIET_LOGGERS = ("mlflow", "alembic")  # store creation and migrations log at INFO


def mlflow_installed() -> bool:
    """Whether the ``mlflow`` package (the ``tracking`` extra) can be imported."""
    return importlib.util.find_spec("mlflow") is not None


def check_tracking(conf: Any) -> None:
    """Validate ``tracking`` before Ray starts: a known backend, MLflow installed when it is
    chosen, and no password in ``tracking.uri`` (credentials come from MLflow's environment
    variables, never from the config). Raises UserError."""
    name = conf.name
    if name not in BACKENDS:
        raise UserError(f"tracking={name!r} is not a tracking backend; choose one of {', '.join(BACKENDS)}")
    if name == "none":
        return
    if not mlflow_installed():
        raise UserError(f"tracking=mlflow needs MLflow, which is not installed: {INSTALL_HINT}")
    uri = conf.uri
    if uri and "://" in uri and urlsplit(uri).password is not None:
        raise UserError("tracking.uri carries a password (not shown); give the URI without it and set "
                        "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN) "
                        "in the environment instead")


# -- what is logged (pure) ------------------------------------------------------------------

def sanitize_name(name: str) -> str:
    """``name`` as an MLflow key: ``@`` becomes ``_at_`` (``P@5`` -> ``P_at_5``), any other
    character outside letters, digits, ``_ . - /`` and space becomes ``_``; empty path
    segments, ``.`` and ``..`` segments and a leading ``/`` (which MLflow refuses: keys can
    be file names) are removed or replaced; at most 250 characters."""
    name = _NAME_BAD.sub("_", str(name).replace("@", "_at_"))
    parts = [("_" if p in (".", "..") else p) for p in name.split("/") if p]
    return "/".join(parts)[:MAX_NAME].rstrip("/") or "_"


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= MAX_PARAM_VALUE else text[: MAX_PARAM_VALUE - 1] + "…"


def flatten(obj: Any, prefix: str = "") -> dict[str, str]:
    """A nested config as ``{"judge.options.temperature": "0.0", ...}``: dict keys joined by
    dots, lists of dicts by index (``judge_panel.0.name``), other lists, scalars and empty
    containers as JSON text (strings as they are), values cut to 500 characters."""
    if isinstance(obj, dict) and obj:
        out: dict[str, str] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(obj, list) and obj and any(isinstance(v, dict) for v in obj):
        out = {}
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}.{i}" if prefix else str(i)))
        return out
    return {prefix or "value": _param_value(obj)}


def params_of(config: dict) -> dict[str, str]:
    """The params of a run: its resolved config flattened, with every secret-named key's
    value and every substring of a key's shape redacted (``ragscale.provenance.redact``,
    the rule run.json follows)."""
    from ragscale.provenance import redact

    return _unique(flatten(redact(config)))


def metrics_of(summary: dict) -> dict[str, float]:
    """``<model>/<metric>``: each model's summary means (nulls left out), plus its
    ``count``, ``errors`` and ``answerability_accuracy`` when there is one."""
    out: dict[str, float] = {}
    for model, block in summary.get("models", {}).items():
        values = {**block.get("metrics", {}), "count": block.get("count"), "errors": block.get("errors"),
                  "answerability_accuracy": block.get("answerability_accuracy")}
        for metric, v in values.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[f"{model}/{metric}"] = float(v)
    return _unique(out)


def _unique(items: dict[str, Any]) -> dict[str, Any]:
    """``items`` with sanitized keys; a key that two names sanitize to gets a ``_2``, ``_3`` suffix."""
    out: dict[str, Any] = {}
    for key, value in items.items():
        name = base = sanitize_name(key)
        n = 1
        while name in out:
            n += 1
            name = f"{base[: MAX_NAME - len(str(n)) - 1]}_{n}"
        out[name] = value
    return out


def tags_of(run_info: dict, summary: dict) -> dict[str, str]:
    """The run's tags: scenario, ragscale version, status, output dir, the headline metric,
    and the judge's engine and model (of the judge that ran; none without a judge stage)."""
    from ragscale.report.headline import headline

    config = run_info.get("config") or {}
    tags = {"ragscale.scenario": config.get("scenario_name"), "ragscale.version": run_info.get("ragscale_version"),
            "ragscale.status": run_info.get("status"), "ragscale.output_dir": config.get("output_dir"),
            "ragscale.headline": headline(summary) if summary.get("models") else None}
    judge = (run_info.get("models") or {}).get("judge")
    if judge:
        tags.update({"ragscale.judge.name": judge.get("name"), "ragscale.judge.engine": judge.get("engine"),
                     "ragscale.judge.model": judge.get("model")})
    return {k: str(v) for k, v in tags.items() if v is not None}


def default_run_name(out_dir: str) -> str:
    """The output directory's name; for a sweep's job (``<sweep dir>/<job number>``),
    ``<sweep dir name>/<job number>``."""
    head, name = os.path.split(os.path.normpath(out_dir))
    return f"{os.path.basename(head)}/{name}" if name.isdigit() and os.path.basename(head) else name


def resolve_uri(conf_uri: str | None, cwd: str | None = None) -> str:
    """``tracking.uri``, else ``$MLFLOW_TRACKING_URI``, else the local store in the current
    directory: ``sqlite:///<cwd>/mlflow.db`` (artifacts in ``<cwd>/mlruns/``), MLflow 3's own
    default layout, so that ``mlflow ui`` started there shows the runs."""
    uri = conf_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    return "sqlite:///" + os.path.join(os.path.abspath(cwd or os.getcwd()), "mlflow.db")


def display_uri(uri: str) -> str:
    """``uri`` as it may be printed: a password in it (from $MLFLOW_TRACKING_URI) shown as ``***``, in every
    ``:password@`` of it."""
    parts = urlsplit(uri) if "://" in uri else None
    if parts is None or parts.password is None:
        return uri
    return uri.replace(f":{parts.password}@", ":***@")


def _artifact_location(uri: str, experiment: str) -> str | None:
    """For a new experiment in a SQLite store: ``mlruns/<experiment>/`` beside the database
    file (None: the store's own default)."""
    if not uri.startswith("sqlite:///"):
        return None
    from pathlib import Path

    root = os.path.join(os.path.dirname(os.path.abspath(uri[len("sqlite:///"):])), "mlruns")
    return Path(root, sanitize_name(experiment).replace("/", "_")).as_uri()


# -- logging to MLflow ------------------------------------------------------------------------

@contextmanager
def _quiet() -> Iterator[None]:
    """MLflow's and alembic's INFO lines (a store's creation, its migrations) kept off the
    console, and the deprecation warnings raised inside MLflow's own modules (MLflow 3.17's
    SQL store uses SQLAlchemy 2.1's deprecated ``noload``): nothing a user can act on. A
    deprecation of an MLflow API that ragscale calls is attributed to this module and shows."""
    loggers = [logging.getLogger(n) for n in _QUIET_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
                warnings.filterwarnings("ignore", category=category, module=r"(mlflow|alembic|sqlalchemy)\.")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _experiment_id(client: Any, name: str, uri: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is None:
        return client.create_experiment(name, artifact_location=_artifact_location(uri, name))
    if exp.lifecycle_stage != "active":
        raise UserError(f"MLflow experiment {name!r} is deleted in {uri}: restore it, or choose another "
                        "with tracking.experiment=NAME")
    return exp.experiment_id


def mlflow_status(status: Any) -> str:
    """The MLflow run status of a ragscale status (run.json's, ragscale.exitcodes): FINISHED when
    every record was scored, KILLED when a signal stopped it (re-run to resume), FAILED otherwise
    (some or all records failed, an output not written, the run stopped): what its exit code says."""
    if status == STATUS[OK]:
        return "FINISHED"
    return "KILLED" if status == INTERRUPTED else "FAILED"


def log_run(conf: Any, out_dir: str, run_info: dict, summary: dict) -> tuple[str, str]:
    """Log a finished (or failed) run to MLflow: one MLflow run in experiment
    ``tracking.experiment`` (default: the scenario) named ``tracking.run_name`` (default:
    ``default_run_name``). Returns (tracking URI, MLflow run id); raises on failure."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    uri = resolve_uri(conf.uri)
    experiment = conf.experiment or (run_info.get("config") or {}).get("scenario_name") or "ragscale"
    with _quiet():
        client = MlflowClient(tracking_uri=uri)
        exp_id = _experiment_id(client, experiment, uri)
        run = client.create_run(exp_id, run_name=conf.run_name or default_run_name(out_dir),
                                tags=tags_of(run_info, summary))
        run_id = run.info.run_id
        try:
            now = int(time.time() * 1000)
            client.log_batch(run_id, params=[Param(k, v) for k, v in params_of(run_info.get("config") or {}).items()])
            client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in metrics_of(summary).items()])
            for name in ARTIFACTS:
                path = os.path.join(out_dir, name)
                if os.path.isfile(path):
                    client.log_artifact(run_id, path)
        except BaseException:
            client.set_terminated(run_id, status="FAILED")
            raise
        client.set_terminated(run_id, status=mlflow_status(run_info.get("status")))
    return uri, run_id


def track(conf: Any, out_dir: str, run_info: dict, summary: dict,
          printer: Callable[[str], None] = print) -> str | None:
    """The end-of-run hook: log the run when ``tracking.name`` is ``mlflow``; returns the
    line to print (where it was tracked, or why it was not: a warning; the run's files are
    already written and the exit code does not change), or None without tracking. An
    unreachable server is retried as MLflow's environment says (MLFLOW_HTTP_REQUEST_*)."""
    if conf.name != "mlflow":
        return None
    uri = display_uri(resolve_uri(conf.uri))
    printer(f"[ragscale] logging the run to MLflow ({uri})")
    try:
        _, run_id = log_run(conf, out_dir, run_info, summary)
    except Exception as e:  # noqa: BLE001 - tracking never costs the run its outputs
        from ragscale.secrets import redact_secret_shapes

        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        password = urlsplit(resolve_uri(conf.uri)).password if "://" in resolve_uri(conf.uri) else None
        text = redact_secret_shapes(text.replace(password, "***") if password else text)
        return f"warning: MLflow tracking failed ({type(e).__name__}: {text[:500]}); the run's files are in {out_dir}"
    return f"tracked in MLflow: {uri} run {run_id}"
