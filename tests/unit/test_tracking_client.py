"""What ragscale.tracking asks of MLflow's client (the experiment, the run, its params, metrics,
artifacts and final status) and the lines a user reads, with a recording stand-in for
``MlflowClient`` (no store, no server)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ragscale.errors import UserError
from ragscale.tracking import display_uri, log_run, metrics_of, params_of, tags_of, track

CONFIG = {"output_dir": "/runs/out", "judge": {"model": "m", "api_key": "planted-key-value"}, "limit": 3}
SUMMARY = {"metrics": ["P@5"], "models": {"acme/7b": {"count": 2, "errors": 0, "metrics": {"P@5": 0.5}}}}


class Client:
    """Records every call; ``experiments`` maps a name to an existing experiment; ``fail`` maps a
    method's name to the exception it raises."""

    def __init__(self, calls, experiments, fail):
        self.calls, self.experiments, self.fail = calls, experiments, fail

    def _call(self, *call):
        self.calls.append(call)
        if call[0] in self.fail:
            raise self.fail[call[0]]

    def get_experiment_by_name(self, name):
        self._call("get_experiment_by_name", name)
        return self.experiments.get(name)

    def create_experiment(self, name, artifact_location=None, tags=None):
        self._call("create_experiment", name, artifact_location)
        return "new-exp"

    def create_run(self, experiment_id, start_time=None, tags=None, run_name=None):
        self._call("create_run", experiment_id, run_name, tags)
        return SimpleNamespace(info=SimpleNamespace(run_id="run-1"))

    def log_batch(self, run_id, metrics=(), params=(), tags=(), synchronous=None):
        self._call("log_batch", run_id, [(p.key, p.value) for p in params],
                   [(m.key, m.value, m.step) for m in metrics])
        self.timestamps = [m.timestamp for m in metrics] or getattr(self, "timestamps", [])

    def log_artifact(self, run_id, local_path, artifact_path=None):
        self._call("log_artifact", run_id, local_path)

    def set_terminated(self, run_id, status=None, end_time=None):
        self._call("set_terminated", run_id, status)


@pytest.fixture
def mlflow_client(monkeypatch):
    pytest.importorskip("mlflow")
    state = SimpleNamespace(calls=[], experiments={}, fail={}, clients=[])

    def make(tracking_uri):
        state.calls.append(("client", tracking_uri))
        client = Client(state.calls, state.experiments, state.fail)
        state.clients.append(client)
        return client

    monkeypatch.setattr("mlflow.tracking.MlflowClient", make)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return state


def conf(**kw):
    return SimpleNamespace(**{"name": "mlflow", "uri": None, "experiment": None, "run_name": None, **kw})


def run_dir(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for name in ("summary.json", "run.json", "records.jsonl"):
        (out / name).write_text("{}")
    return out


@pytest.mark.parametrize("status, final", [("ok", "FINISHED"), ("interrupted", "KILLED"), ("failed", "FAILED")])
def test_a_run_is_one_mlflow_run_with_params_metrics_artifacts_and_the_status_of_its_exit(
        tmp_path, monkeypatch, mlflow_client, status, final):
    monkeypatch.chdir(tmp_path)
    out = run_dir(tmp_path)
    info = {"config": CONFIG, "status": status}
    before = int(time.time() * 1000)
    assert log_run(conf(), str(out), info, SUMMARY) == (f"sqlite:///{tmp_path}/mlflow.db", "run-1")
    after = int(time.time() * 1000)
    assert mlflow_client.calls == [
        ("client", f"sqlite:///{tmp_path}/mlflow.db"),
        ("get_experiment_by_name", "ragscale"),  # no tracking.experiment, no scenario name
        ("create_experiment", "ragscale", (tmp_path / "mlruns" / "ragscale").as_uri()),
        ("create_run", "new-exp", "out", tags_of(info, SUMMARY)),
        ("log_batch", "run-1", list(params_of(CONFIG).items()), []),
        ("log_batch", "run-1", [], [(k, v, 0) for k, v in metrics_of(SUMMARY).items()]),
        ("log_artifact", "run-1", str(out / "run.json")),  # in ARTIFACTS' order; records.jsonl stays
        ("log_artifact", "run-1", str(out / "summary.json")),
        ("set_terminated", "run-1", final),
    ]
    stamps = mlflow_client.clients[0].timestamps
    assert len(set(stamps)) == 1 and before <= stamps[0] <= after  # one time, in milliseconds since the epoch


@pytest.mark.parametrize("uri, experiment, location", [
    ("sqlite:///{tmp}/store/mlflow.db", "team/exp 1", "{tmp}/store/mlruns/team_exp 1"),
    ("sqlite:///{tmp}/mlflow.db", "P@5 runs", "{tmp}/mlruns/P_at_5 runs"),
    ("http://tracking.example:5000", "team/exp", None),
])
def test_a_new_experiment_keeps_its_artifacts_beside_a_sqlite_store_in_one_folder(
        tmp_path, mlflow_client, uri, experiment, location):
    uri = uri.format(tmp=tmp_path)
    log_run(conf(uri=uri, experiment=experiment), str(run_dir(tmp_path)), {"config": CONFIG, "status": "ok"}, SUMMARY)
    expected = Path(location.format(tmp=tmp_path)).as_uri() if location else None
    assert ("create_experiment", experiment, expected) in mlflow_client.calls


def test_an_existing_experiment_is_reused(tmp_path, mlflow_client):
    mlflow_client.experiments["custom"] = SimpleNamespace(experiment_id="7", lifecycle_stage="active")
    log_run(conf(), str(run_dir(tmp_path)), {"config": {"scenario_name": "custom"}, "status": "ok"}, SUMMARY)
    assert [c[:3] for c in mlflow_client.calls[1:3]] == [("get_experiment_by_name", "custom"),
                                                         ("create_run", "7", "out")]
    assert not [c for c in mlflow_client.calls if c[0] == "create_experiment"]


def test_a_deleted_experiment_is_refused_with_what_to_do(tmp_path, mlflow_client):
    mlflow_client.experiments["exp1"] = SimpleNamespace(experiment_id="7", lifecycle_stage="deleted")
    with pytest.raises(UserError) as e:
        log_run(conf(uri="http://tracking.example:5000", experiment="exp1"), str(run_dir(tmp_path)),
                {"config": CONFIG, "status": "ok"}, SUMMARY)
    assert str(e.value) == ("MLflow experiment 'exp1' is deleted in http://tracking.example:5000: restore it, "
                            "or choose another with tracking.experiment=NAME")
    assert not [c for c in mlflow_client.calls if c[0] in ("create_experiment", "create_run")]


def test_a_run_whose_logging_fails_is_ended_as_failed_and_the_error_raised(tmp_path, mlflow_client):
    mlflow_client.fail["log_artifact"] = OSError("disk full")
    with pytest.raises(OSError, match="disk full"):
        log_run(conf(), str(run_dir(tmp_path)), {"config": CONFIG, "status": "ok"}, SUMMARY)
    assert mlflow_client.calls[-2:] == [("log_artifact", "run-1", str(tmp_path / "out" / "run.json")),
                                        ("set_terminated", "run-1", "FAILED")]


@pytest.mark.parametrize("conf_uri, env, shown", [
    ("http://tracking.example:5000", None, "http://tracking.example:5000"),  # the config's URI wins
    ("http://tracking.example:5000", "http://other:5000", "http://tracking.example:5000"),
    (None, "https://ann:planted-pw-1@tracking.example/x", "https://ann:***@tracking.example/x"),
    ("databricks", None, "databricks"),
    ("//[lab]/mlruns", None, "//[lab]/mlruns"),  # no scheme: a local path, shown as given
])
def test_track_says_where_the_run_is_logged(tmp_path, monkeypatch, mlflow_client, conf_uri, env, shown):
    if env:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", env)
    lines = []
    line = track(conf(uri=conf_uri), str(run_dir(tmp_path)), {"config": CONFIG, "status": "ok"}, SUMMARY,
                 lines.append)
    assert lines == [f"[ragscale] logging the run to MLflow ({shown})"]
    assert line == f"tracked in MLflow: {shown} run run-1"


@pytest.mark.parametrize("error, text", [
    (RuntimeError(""), ""),
    (RuntimeError("  \n "), ""),
    (ConnectionError("refused\nTraceback (most recent call last):\n  ..."), "refused"),
    (ValueError("x" * 600), "x" * 500),
    (RuntimeError("auth with sk-plantedKEYabcdefghijklmnop1234 refused"), "auth with *** refused"),
])
def test_a_tracking_failure_is_one_warning_line_with_the_first_line_of_the_error(
        tmp_path, mlflow_client, error, text):
    mlflow_client.fail["get_experiment_by_name"] = error
    out = run_dir(tmp_path)
    line = track(conf(uri="http://tracking.example:5000"), str(out), {"config": CONFIG, "status": "ok"}, SUMMARY,
                 lambda _: None)
    assert line == (f"warning: MLflow tracking failed ({type(error).__name__}: {text}); "
                    f"the run's files are in {out}")


@pytest.mark.parametrize("conf_uri, env, message, text", [
    # the password of the URI in use, wherever the error repeats it
    ("http://ann:planted-pw-1@127.0.0.1:9", "databricks", "user ann, password planted-pw-1: refused (planted-pw-1)",
     "user ann, password ***: refused (***)"),
    (None, "http://ann:planted-pw-1@127.0.0.1:9", "password planted-pw-1 refused", "password *** refused"),
    # a local path is no URL: nothing in it is a password
    ("//[lab]/mlruns", None, "cannot open //[lab]/mlruns", "cannot open //[lab]/mlruns"),
])
def test_the_warning_never_shows_the_tracking_password(tmp_path, monkeypatch, mlflow_client, conf_uri, env, message,
                                                       text):
    if env:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", env)
    mlflow_client.fail["create_run"] = PermissionError(message)
    out = run_dir(tmp_path)
    line = track(conf(uri=conf_uri), str(out), {"config": CONFIG, "status": "ok"}, SUMMARY, lambda _: None)
    assert line == f"warning: MLflow tracking failed (PermissionError: {text}); the run's files are in {out}"


@pytest.mark.parametrize("uri, shown", [
    ("https://ann:s3cr3t@host:5000/x", "https://ann:***@host:5000/x"),
    ("https://ann:s3cr3t@host/ann:s3cr3t@x?u=ann:s3cr3t@y", "https://ann:***@host/ann:***@x?u=ann:***@y"),
    ("http://ann@host:5000", "http://ann@host:5000"),
    ("databricks", "databricks"),
    ("/data/mlruns", "/data/mlruns"),
    ("//[lab]/mlruns", "//[lab]/mlruns"),
])
def test_display_uri_hides_the_password_in_every_user_info_and_nothing_else(uri, shown):
    assert display_uri(uri) == shown


@pytest.mark.parametrize("summary, metrics", [
    ({}, {}),
    ({"models": {}}, {}),
    ({"models": {"m": {"count": 3, "errors": 1}}}, {"m/count": 3.0, "m/errors": 1.0}),  # no metric block
    ({"models": {"m": {"count": 3, "errors": 0, "answerability_accuracy": 1, "metrics": {"ok": True, "t": "x"}}}},
     {"m/count": 3.0, "m/errors": 0.0, "m/answerability_accuracy": 1.0}),
])
def test_metrics_of_a_summary_without_models_or_means(summary, metrics):
    assert metrics_of(summary) == metrics
