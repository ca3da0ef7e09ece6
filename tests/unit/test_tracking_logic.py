"""Experiment tracking (ragscale.tracking): the pure part (flattening, MLflow names, what is
logged, the secret policy, validation before Ray) and one log to a real local MLflow store
(no Ray), read back with MLflow's own client."""

from __future__ import annotations

import json
import os
import posixpath
import re
import warnings
from types import SimpleNamespace

import pytest

from ragscale.errors import UserError
from ragscale.tracking import (check_tracking, default_run_name, display_uri, flatten, metrics_of, params_of,
                               resolve_uri, sanitize_name, tags_of, track)

SECRETS = ("sk-plantedKEYabcdefghijklmnop1234", "hunter2-planted-password", "planted-bearer-value-9f8e7d",
           "ghp_plantedTOKENabcdefghijklmnop")
CONFIG = {
    "scenario_name": "custom", "output_dir": "/runs/out",
    "judge": {"name": "openai", "engine": "openai", "model": "gpt-4o-mini",
              "options": {"api_key_env": "OPENAI_API_KEY", "api_key": SECRETS[0], "temperature": 0.0,
                          "extra_headers": {"Authorization": f"Bearer {SECRETS[2]}", "X-Team": "eval"},
                          "organization": SECRETS[3]}},
    "cluster": {"judge": {"size": 2}, "address": None},
    "db": {"password": SECRETS[1], "aws_secret_access_key": SECRETS[1] + "-aws", "private_key": SECRETS[1] + "-pk",
           "hf_token": SECRETS[1] + "-hf", "max_tokens": 512},
    "metrics": {"custom": ["exact_match", "fact_score"], "retrieval": []},
    "judge_panel": [{"name": "a", "model": "m1"}, {"name": "b", "model": "m2"}],
    "resume": True,
}
SUMMARY = {"metrics": ["P@5", "exact_match", "RB_llm@gpt-4o"],
           "models": {"acme/7b": {"count": 10, "errors": 1, "answerability_accuracy": None,
                                  "metrics": {"P@5": 0.25, "exact_match": None, "RB_llm@gpt-4o": 0.5}},
                      "zed:2": {"count": 4, "errors": 0, "answerability_accuracy": 0.75,
                                "metrics": {"P@5": 1.0, "exact_match": 0.5, "RB_llm@gpt-4o": 0.0}}}}


def mlflow_accepts(name: str) -> bool:
    """MLflow's rule for a key (mlflow.utils.validation): allowed characters, and a path that
    normalizes to itself (keys can be file names)."""
    norm = posixpath.normpath(name)
    return (re.fullmatch(r"[/\w.\- :]*", name) is not None and norm == name and norm != "."
            and not norm.startswith(("..", "/")) and len(name) <= 250)


@pytest.mark.parametrize("raw, expected", [
    ("P@5", "P_at_5"), ("RB_llm@gpt-4o", "RB_llm_at_gpt-4o"), ("zed:2/Recall", "zed_2/Recall"),
    ("acme/7b/RL_F", "acme/7b/RL_F"), ("modèle x/m", "mod_le x/m"), ("/lead//x/", "lead/x"),
    ("../up/./m", "_/up/_/m"), ("", "_"), ("a" * 300, "a" * 250),
])
def test_sanitize_name_gives_names_mlflow_accepts(raw, expected):
    assert sanitize_name(raw) == expected
    assert mlflow_accepts(sanitize_name(raw))


def test_flatten_dotted_keys_json_values_and_indexed_lists():
    flat = flatten({"a": {"b": 1, "c": None, "d": True, "e": "text", "f": [1, "x"], "g": {}, "h": []},
                    "panel": [{"name": "p"}, {"name": "q"}], "long": "y" * 600})
    assert flat["a.b"] == "1" and flat["a.c"] == "null" and flat["a.d"] == "true" and flat["a.e"] == "text"
    assert json.loads(flat["a.f"]) == [1, "x"] and flat["a.g"] == "{}" and flat["a.h"] == "[]"
    assert flat["panel.0.name"] == "p" and flat["panel.1.name"] == "q"
    assert len(flat["long"]) == 500 and flat["long"].endswith("…")


def test_params_are_the_flattened_config_with_no_secret():
    params = params_of(CONFIG)
    assert params["judge.model"] == "gpt-4o-mini" and params["cluster.judge.size"] == "2"
    assert params["metrics.custom"] == '["exact_match", "fact_score"]' and params["judge_panel.1.model"] == "m2"
    assert params["judge.options.api_key_env"] == "OPENAI_API_KEY"  # a variable's name, not a secret
    assert params["judge.options.api_key"] == params["db.password"] == "***"  # named like a secret
    assert params["db.aws_secret_access_key"] == params["db.private_key"] == params["db.hf_token"] == "***"
    assert params["db.max_tokens"] == "512"
    assert params["judge.options.extra_headers.Authorization"] == "***"
    assert params["judge.options.organization"] == "***"  # a token's shape under an innocent name
    assert params["judge.options.extra_headers.X-Team"] == "eval"
    text = json.dumps(params)
    assert not [s for s in SECRETS if s in text]
    assert all(mlflow_accepts(k) for k in params)


def test_metrics_are_each_models_means_under_sanitized_names():
    metrics = metrics_of(SUMMARY)
    assert metrics == {
        "acme/7b/P_at_5": 0.25, "acme/7b/RB_llm_at_gpt-4o": 0.5, "acme/7b/count": 10.0, "acme/7b/errors": 1.0,
        "zed_2/P_at_5": 1.0, "zed_2/exact_match": 0.5, "zed_2/RB_llm_at_gpt-4o": 0.0, "zed_2/count": 4.0,
        "zed_2/errors": 0.0, "zed_2/answerability_accuracy": 0.75,
    }  # acme's null exact_match and answerability accuracy are left out
    clash = metrics_of({"models": {"m": {"metrics": {"P@5": 0.1, "P_at_5": 0.2}}}})
    assert clash == {"m/P_at_5": 0.1, "m/P_at_5_2": 0.2}  # two names that sanitize alike both survive


def test_tags_name_the_scenario_version_status_and_the_judge_that_ran():
    info = {"config": CONFIG, "ragscale_version": "0.1.0", "status": "ok",
            "models": {"judge": {"name": "openai", "engine": "openai", "model": "gpt-4o-mini"}}}
    tags = tags_of(info, SUMMARY)
    assert tags == {"ragscale.scenario": "custom", "ragscale.version": "0.1.0", "ragscale.status": "ok",
                    "ragscale.output_dir": "/runs/out", "ragscale.headline": "P@5", "ragscale.judge.name": "openai",
                    "ragscale.judge.engine": "openai", "ragscale.judge.model": "gpt-4o-mini"}
    no_judge = tags_of({**info, "models": {"judge": None}}, {"models": {}})
    assert not any(k.startswith("ragscale.judge") for k in no_judge) and "ragscale.headline" not in no_judge


def test_run_name_and_uri_defaults(monkeypatch, tmp_path):
    assert default_run_name("/x/outputs/custom/2026-01-02_03-04-05") == "2026-01-02_03-04-05"
    assert default_run_name("/x/sweeps/judges/3/") == "judges/3"  # a sweep's job
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert resolve_uri(None, cwd=str(tmp_path)) == f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking:5000")
    assert resolve_uri(None) == "http://tracking:5000" and resolve_uri("databricks") == "databricks"
    assert display_uri("https://ann:s3cr3t@host:5000/x") == "https://ann:***@host:5000/x"
    assert display_uri("sqlite:////a/b.db") == "sqlite:////a/b.db"


def conf(**kw):
    return SimpleNamespace(**{"name": "mlflow", "uri": None, "experiment": None, "run_name": None, **kw})


def test_check_tracking_before_ray(monkeypatch):
    check_tracking(conf(name="none"))
    with pytest.raises(UserError, match="tracking='mlfow' is not a tracking backend; choose one of none, mlflow"):
        check_tracking(conf(name="mlfow"))
    with pytest.raises(UserError) as e:
        check_tracking(conf(uri="https://ann:s3cr3t-pw@mlflow.example:5000"))
    assert "MLFLOW_TRACKING_PASSWORD" in str(e.value) and "s3cr3t" not in str(e.value)
    monkeypatch.setattr("ragscale.tracking.mlflow_installed", lambda: False)
    with pytest.raises(UserError, match=re.escape("pip install 'ragscale[tracking]'")):
        check_tracking(conf())


def test_tracking_is_a_config_group_checked_when_the_run_is_planned(monkeypatch):
    from ragscale.plan import compose, plan_run

    assert compose(["+scenario=custom"]).tracking.name == "none"
    cfg = compose(["+scenario=custom", "tracking=mlflow", "tracking.experiment=exp1"])
    assert (cfg.tracking.name, cfg.tracking.uri, cfg.tracking.experiment) == ("mlflow", None, "exp1")
    with pytest.raises(Exception, match="urii"):  # the schema: a typo fails at compose time
        compose(["+scenario=custom", "tracking=mlflow", "tracking.urii=x"])
    monkeypatch.setattr("ragscale.tracking.mlflow_installed", lambda: False)
    with pytest.raises(UserError, match=re.escape("pip install 'ragscale[tracking]'")):
        plan_run(cfg)


# -- a real local MLflow store --------------------------------------------------------------

def fake_run(out_dir) -> dict:
    """A run's files as the driver leaves them (run.json with its config redacted, as written)."""
    from ragscale.provenance import redact

    os.makedirs(out_dir)
    info = {"config": redact({**CONFIG, "output_dir": str(out_dir)}), "ragscale_version": "0.1.0", "status": "ok",
            "models": {"judge": None}}
    for name, content in (("run.json", json.dumps(info)), ("summary.json", json.dumps(SUMMARY)),
                          ("leaderboard.md", "| rank |\n"), ("leaderboard.csv", "rank\n"), ("report.html", "<html>")):
        (out_dir / name).write_text(content)
    return info


# MLflow 3.17's SQL store calls SQLAlchemy 2.1's deprecated ``noload`` when this test's client
# reads the store: MLflow's own warning, not ragscale's (ragscale.tracking hides it in runs).
@pytest.mark.filterwarnings(r"ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning")
def test_log_run_to_a_local_store_and_read_it_back(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    info = fake_run(tmp_path / "out")
    lines: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = track(conf(), str(tmp_path / "out"), {**info, "config": CONFIG}, SUMMARY, lines.append)
    ours = [w for w in caught if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning))
            and os.path.basename(w.filename) == "tracking.py"]
    assert not ours, [str(w.message) for w in ours]  # ragscale's own MLflow calls are not deprecated
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert lines == [f"[ragscale] logging the run to MLflow ({uri})"]
    assert line.startswith(f"tracked in MLflow: {uri} run "), line
    run_id = line.rsplit(" ", 1)[1]
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "out"
    assert client.get_experiment(run.info.experiment_id).name == "custom"
    assert run.data.params == params_of(CONFIG) and run.data.params["judge.options.api_key"] == "***"
    assert run.data.metrics == metrics_of(SUMMARY)
    assert run.data.tags["ragscale.scenario"] == "custom" and run.data.tags["ragscale.headline"] == "P@5"
    assert {a.path for a in client.list_artifacts(run_id)} == {"run.json", "summary.json", "leaderboard.md",
                                                               "leaderboard.csv", "report.html"}
    assert os.path.isdir(tmp_path / "mlruns" / "custom" / run_id / "artifacts")
    for path in [tmp_path / "mlflow.db", *(tmp_path / "mlruns").rglob("*")]:
        if path.is_file():
            data = path.read_bytes()
            assert not [s for s in SECRETS if s.encode() in data], path


def test_a_tracking_failure_is_a_warning_and_keeps_the_files(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # no server listens on port 9: fail at once
    info = fake_run(tmp_path / "out")
    line = track(conf(uri="http://127.0.0.1:9"), str(tmp_path / "out"), info, SUMMARY, lambda _: None)
    assert line.startswith("warning: MLflow tracking failed (") and "127.0.0.1:9" in line
    assert line.endswith(f"the run's files are in {tmp_path / 'out'}")
    assert sorted(os.listdir(tmp_path / "out")) == ["leaderboard.csv", "leaderboard.md", "report.html", "run.json",
                                                    "summary.json"]
    assert track(conf(name="none"), str(tmp_path / "out"), info, SUMMARY) is None


def test_the_mlflow_status_says_what_the_exit_code_says():
    """ok -> FINISHED; interrupted by a signal -> KILLED (it was FAILED); every other status (records
    failed, nothing scored, an output not written, the run stopped) -> FAILED."""
    from ragscale.exitcodes import STATUS
    from ragscale.tracking import mlflow_status

    assert {s: mlflow_status(s) for s in set(STATUS.values())} == {
        "ok": "FINISHED", "interrupted": "KILLED", "failed": "FAILED", "record_errors": "FAILED",
        "nothing_scored": "FAILED", "outputs_incomplete": "FAILED"}
    assert mlflow_status(None) == "FAILED"
