"""tracking=mlflow end to end: a real run (+scenario=custom: real Ray, no judge, no model) logs
to MLflow's default local store in the current directory, read back with MLflow's own client:
params, metrics equal to summary.json's means, tags, artifacts, and no planted secret in any
file of the store. Then a resumed run with an unreachable tracking server keeps its outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

# MLflow 3.17's SQL store calls SQLAlchemy 2.1's deprecated ``noload`` when this test's client
# reads the store: MLflow's own warning, not ragscale's (ragscale.tracking hides it in runs).
pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings(r"ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning")]
mlflow = pytest.importorskip("mlflow", reason="needs the tracking extra: pip install 'ragscale[tracking]'")

KEY = "sk-ragscale-planted-tracking-8c1f2e9a77d4"  # $OPENAI_API_KEY: judge=openai is configured, never used
CONFIG_KEY = "sk-ragscale-planted-config-5b0d3a61ce29"  # judge.options.organization: a key's shape
PASSWORD = "ragscale-planted-password-e41b"  # judge.options.password: a secret's name
# The command line and ragscale.evaluate refuse secrets in the config before anything is
# written (tests/integration/test_security.py); this run plants them past that gate, as a
# program calling the driver could, to test that tracking redacts on its own.
SCRIPT = f"""
import sys
from omegaconf import open_dict
from ragscale.plan import compose
from ragscale.driver import execute
cfg = compose(sys.argv[1:])
with open_dict(cfg):
    cfg.judge.options["organization"] = {CONFIG_KEY!r}
    cfg.judge.options["password"] = {PASSWORD!r}
sys.exit(execute(cfg))
"""


def env() -> dict:
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "OPENAI_API_KEY": KEY,
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}  # the unreachable server below fails at once


def test_a_run_is_tracked_in_the_local_store_without_secrets(tmp_path):
    out = tmp_path / "outputs" / "run1"
    # warnings: a deprecated MLflow API called by ragscale.tracking is an error (caught and
    # reported by ragscale as a tracking failure, so the "tracked" line below would be missing)
    res = subprocess.run([sys.executable, "-W", "error::DeprecationWarning:ragscale.tracking",
                          "-W", "error::FutureWarning:ragscale.tracking", "-c", SCRIPT, "+scenario=custom",
                          "judge=openai", "tracking=mlflow", f"output_dir={out}"],
                         cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    uri = f"sqlite:///{tmp_path}/mlflow.db"  # the default: MLflow's local layout in the current directory
    tracked = [line for line in res.stdout.splitlines() if "tracked in MLflow" in line]
    assert len(tracked) == 1 and tracked[0].startswith(f"[ragscale] tracked in MLflow: {uri} run "), res.stdout[-2000:]
    assert res.stdout.rstrip().splitlines()[-1] == f"[ragscale] open the report: {out / 'report.html'}"
    run_id = tracked[0].rsplit(" ", 1)[1]

    client = mlflow.tracking.MlflowClient(tracking_uri=uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "run1"
    assert client.get_experiment(run.info.experiment_id).name == "custom"
    params = run.data.params
    assert params["scenario_name"] == "custom" and params["tracking.name"] == "mlflow"
    assert params["judge.engine"] == "openai" and params["judge.options.api_key_env"] == "OPENAI_API_KEY"
    assert params["judge.options.organization"] == params["judge.options.password"] == "***"
    assert json.loads(params["metrics.custom"])[:2] == ["exact_match", "keyword_coverage"]

    summary = json.load(open(out / "summary.json"))
    expected = {f"{model}/{m}": v for model, block in summary["models"].items()
                for m, v in block["metrics"].items() if v is not None}
    assert len(expected) >= 10 and {"atlas-7b", "breeze-3b"} <= set(summary["models"])
    got = run.data.metrics
    assert {k: got[k] for k in expected} == pytest.approx(expected, abs=0)
    assert got["atlas-7b/count"] == summary["models"]["atlas-7b"]["count"]
    tags = run.data.tags
    assert tags["ragscale.scenario"] == "custom" and tags["ragscale.status"] == "ok"
    assert tags["ragscale.version"] == json.load(open(out / "run.json"))["ragscale_version"]
    assert not any(t.startswith("ragscale.judge") for t in tags)  # no judge stage ran
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"run.json", "summary.json", "summary.csv", "leaderboard.md", "leaderboard.csv", "report.html"} == artifacts
    logged = tmp_path / "mlruns" / "custom" / run_id / "artifacts"  # beside the database, per experiment
    assert json.load(open(logged / "summary.json")) == summary

    store = [tmp_path / "mlflow.db", *(p for p in (tmp_path / "mlruns").rglob("*") if p.is_file())]
    assert len(store) >= 7
    for path in [*store, *(p for p in out.rglob("*") if p.is_file())]:
        data = path.read_bytes()
        assert not [s for s in (KEY, CONFIG_KEY, PASSWORD) if s.encode() in data], path
    assert not [s for s in (KEY, CONFIG_KEY, PASSWORD) if s in res.stdout + res.stderr]

    # Resumed with an unreachable tracking server (nothing listens on port 9): the run is
    # complete (exit 0), a warning says why it was not tracked, the files stay.
    res = subprocess.run([sys.executable, "-m", "ragscale.run", "+scenario=custom", "tracking=mlflow",
                          "tracking.uri=http://127.0.0.1:9", f"output_dir={out}"],
                         cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    done = [w for w in res.stdout.split() if w.startswith(("records=", "already_done="))]
    assert len(done) == 2 and done[0][len("records="):] == done[1][len("already_done="):] != "0", res.stdout[:500]
    warning = [line for line in res.stdout.splitlines() if "MLflow tracking failed" in line]
    assert len(warning) == 1 and "127.0.0.1:9" in warning[0] and str(out) in warning[0], res.stdout[-2000:]
    assert json.load(open(out / "summary.json")) == summary and (out / "report.html").is_file()


def test_tracking_without_mlflow_installed_is_a_one_line_error(tmp_path):
    """As if the extra were missing (``mlflow`` unimportable): refused before Ray starts."""
    code = "import sys; sys.modules['mlflow'] = None; from ragscale.cli import main; main()"
    res = subprocess.run([sys.executable, "-c", code, "run", "+scenario=custom", "tracking=mlflow",
                          f"output_dir={tmp_path / 'out'}"], cwd=tmp_path, env=env(), capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip() == ("ragscale run: error: tracking=mlflow needs MLflow, which is not installed: "
                                  "pip install 'ragscale[tracking]'")
    assert "starting Ray" not in res.stdout and not (tmp_path / "out" / "records.jsonl").exists()
