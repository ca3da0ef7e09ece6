"""A third-party package adds a lexical metric, a judge, a report sink, an input layout (a reader)
and a judge engine through the ``ragscale.plugins`` entry-point group (ragscale/registry.py,
ragscale/plugins.py, issue 34): installed with pip into a folder of its own (never into the test
venv), it is seen reading its records, planned, computed on the Ray workers by its engine,
summarised, ranked and reported, with no file of ragscale touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

# the run's own Ray: its workers must see the plugin's folder (PYTHONPATH), as a cluster's workers
# see an installed plugin
pytestmark = [pytest.mark.integration, pytest.mark.own_ray]

PYPROJECT = """
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "ragscale-demo-plugin"
version = "0.0.1"

[project.entry-points."ragscale.plugins"]
demo = "ragscale_demo_plugin"

[tool.setuptools]
py-modules = ["ragscale_demo_plugin", "ragscale_demo_engine"]
"""

PLUGIN = '''
"""A demo plugin: a lexical metric, a judge, a report sink, an input layout and a judge engine."""
import os

from ragscale.judges.base import JudgeParseError, JudgePrompt, JudgeResult, JudgeSpec, load_json_object
from ragscale.metrics.registry import UNIT, MetricSpec, declare, lexical_metric
from ragscale.record import Reader
from ragscale.registry import register
from ragscale.report.sinks import SinkSpec


@lexical_metric("demo_words", family="custom", scalar=True, short="DemoW", higher_is_better=None,
                reference="demo plugin: words in the answer")
def demo_words(prediction, targets, passages):
    return float(len(prediction.split()))


SCHEMA = {"type": "object", "properties": {"polite": {"type": "string", "enum": ["yes", "no"]}},
          "required": ["polite"]}


def parse(raw):
    label = load_json_object("demo_polite", raw).get("polite")
    if label not in ("yes", "no"):
        raise JudgeParseError("demo_polite", raw, f"polite {label!r} is not yes or no")
    return label


def start(inp):
    prompt = JudgePrompt("demo_polite", "demo-polite-v1", (
        {"role": "system", "content": "Answer with JSON: is the answer polite? {\\"polite\\": \\"yes\\" or \\"no\\"}"},
        {"role": "user", "content": "Answer: " + inp.prediction}), SCHEMA, max_tokens=16)
    label = yield prompt, parse
    return JudgeResult(metrics={"demo_polite": 1.0 if label == "yes" else 0.0}, details={"polite": label})


declare(MetricSpec("demo_polite", "judge", "custom", scalar=True, bounds=UNIT, short="Polite",
                   reference="demo plugin: a judge's yes/no"))
JUDGE_SPECS = (JudgeSpec("demo_polite", "demo_polite", "demo-polite-v1", start),)


class Counts:
    def __init__(self, out_dir):
        self.path, self.n = os.path.join(out_dir, "demo_counts.txt"), 0

    def add(self, rec):
        self.n += 1

    def finish(self, done):
        with open(self.path, "w") as fh:
            fh.write(f"{self.n} records, {len(done.summary['models'])} models\\n")
        return {"demo_counts": [done.rel(self.path)]}


SINK_SPECS = (SinkSpec("demo_counts", "demo counts", lambda settings, plan, out_dir: Counts(out_dir)),)


def demo_fields(obj, need_targets=False):
    """The demo layout: {"demo": {"said": answer, "gold": reference, "docs": [passage, ...]}}."""
    demo = obj["demo"]
    return {"prediction": demo["said"], "targets": [demo["gold"]], "passages": list(demo["docs"]),
            "answerability": None}


register("reader", "demo_layout", Reader("demo_layout", lambda obj: isinstance(obj.get("demo"), dict), demo_fields))
register("engine", "demo_echo", lazy="ragscale_demo_engine")  # imported where a judge looks it up
'''

ENGINE = '''
"""A deterministic judge engine (tests only): a polite answer thanks or says gladly."""
import json

from ragscale.actors.engines import Generation

# the options of judge=local's config, which judge.engine=demo_echo keeps: accepted, ignored
OPTIONS = dict.fromkeys(("n_ctx", "n_threads", "n_gpu_layers", "grammar_argmax_first", "flash_attn"))


def resolve(conf, options, pool):
    return {"model": "demo-echo-1"}


def model_name(kwargs):
    return kwargs["model"]


class Engine:
    name = "demo_echo"

    def __init__(self, model):
        self.model = model

    def generate(self, prompts, temperature=0.0, seed=None, on_done=None, **sampling):
        out = []
        for p in prompts:
            polite = any(w in p.messages[-1]["content"].lower() for w in ("thank", "gladly"))
            out.append(Generation(json.dumps({"polite": "yes" if polite else "no"})))
        if on_done:
            on_done(len(prompts))
        return out
'''

RUN = """
import json, sys
import ragscale
records = [json.loads(line) for line in open(sys.argv[1])]
run = ragscale.evaluate(records, scenario="custom", output_dir=sys.argv[2],
                        overrides=["custom.expectations=null", "metrics.custom=[demo_words,demo_polite]",
                                   "judge.engine=demo_echo", "judge.cache_path=" + sys.argv[3]])
print(json.dumps({"ok": run.ok, "files": sorted(run.files), "metrics": run.summary["metrics"],
                  "board": run.leaderboard.to_dict("records")}))
"""


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> str:
    """The demo plugin built and installed by pip into a folder of its own."""
    base = tmp_path_factory.mktemp("plugin")
    pkg, site = base / "pkg", base / "site"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text(PYPROJECT)
    (pkg / "ragscale_demo_plugin.py").write_text(textwrap.dedent(PLUGIN))
    (pkg / "ragscale_demo_engine.py").write_text(textwrap.dedent(ENGINE))
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(site), str(pkg)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return str(site)


def test_a_plugin_adds_a_metric_a_judge_a_sink_a_reader_and_an_engine(tmp_path, plugin_site):
    records = tmp_path / "records.jsonl"
    rows = [{"model_id": m, "task_id": f"t{i}", "question": q, "answer": a, "reference": "x", "contexts": ["c"]}
            for m, answers in (("kind", ("Thank you, it is Paris.", "Gladly: eight legs.")),)
            for i, (q, a) in enumerate(zip(("Capital of France?", "Legs of a spider?"), answers))]
    # the other model's records in the plugin's own layout (its reader)
    rows += [{"model_id": "curt", "task_id": f"t{i}", "demo": {"said": a, "gold": "x", "docs": ["c"]}}
             for i, a in enumerate(("Paris.", "Eight."))]
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([plugin_site, ROOT])}
    res = subprocess.run([sys.executable, "-c", RUN, str(records), str(out), str(tmp_path / "cache.sqlite")],
                         cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["ok"] and got["metrics"] == ["demo_words", "demo_polite"]
    # computed on the workers: the words per answer, and a judge's 0/1 per record
    recs = [json.loads(line) for line in open(out / "records.jsonl")]
    words = {(r["model_id"], r["task_id"]): r["metrics"]["demo_words"] for r in recs}
    assert words == {("kind", "t0"): 5.0, ("kind", "t1"): 3.0, ("curt", "t0"): 1.0, ("curt", "t1"): 1.0}
    # judged by the plugin's engine (judge.engine=demo_echo): deterministic
    polite = {(r["model_id"], r["task_id"]): r["metrics"]["demo_polite"] for r in recs}
    assert polite == {("kind", "t0"): 1.0, ("kind", "t1"): 1.0, ("curt", "t0"): 0.0, ("curt", "t1"): 0.0}
    assert all(r["ragscale"]["details"]["demo_polite"]["polite"] in ("yes", "no") for r in recs)
    # summarised and ranked (demo_words has no direction: the judge's metric ranks)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["models"]["kind"]["metrics"]["demo_words"] == 4.0
    assert {row["model_id"] for row in got["board"]} == {"kind", "curt"}
    # the sink: fed every record, finished with the summary, listed in run.json and Run.files
    assert (out / "demo_counts.txt").read_text() == "4 records, 2 models\n"
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["outputs"]["demo_counts"] == ["demo_counts.txt"] and "demo_counts.txt" in got["files"]
    assert run_json["models"]["judge"]["engine"] == "demo_echo"
    # reported: the leaderboard and the HTML report show both metrics
    assert "demo_words" in (out / "leaderboard.md").read_text()
    html = (out / "report.html").read_text()
    assert "demo_words" in html and "demo_polite" in html


def test_a_plugin_that_fails_to_import_is_named_in_one_line(tmp_path):
    """A broken plugin stops the run before it starts, with its name, never a traceback."""
    site = tmp_path / "site"
    dist = site / "broken_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ragscale.plugins]\nbroken = broken_plugin_module\n")
    (site / "broken_plugin_module.py").write_text("raise RuntimeError('no config here')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), ROOT])}
    res = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ragscale"), "metrics"], cwd=str(tmp_path),
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stdout + res.stderr
    err = res.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert err.endswith("ragscale plugin 'broken' (broken_plugin_module) failed to load: RuntimeError: no config here")
