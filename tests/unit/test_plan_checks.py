"""What ragscale.plan checks before any work, in the one line the user reads: the run keys
(``limit``, ``progress``), the nugget bank settings, the fact checks' expectations file (a bare
name is a file here first, then one bundled in ragscale/data) and the inputs (a list of files,
the column names, no input at all)."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from ragscale import plan
from ragscale.errors import UserError
from ragscale.overrides import compose

BUNDLED_EXPECTATIONS = os.path.join(plan.DATA_DIR, "custom_expectations.yaml")
SAMPLE = os.path.join(plan.DATA_DIR, "custom_sample.jsonl")


def refused(overrides, planner=plan.plan_run):
    with pytest.raises(UserError) as e:
        planner(compose(overrides))
    return str(e.value)


@pytest.mark.parametrize("limit", [0, 1, None])
def test_a_limit_of_zero_or_more_is_kept(limit):
    assert plan.run_options(compose(["+scenario=custom", f"limit={'null' if limit is None else limit}"])).limit == limit


def test_a_negative_limit_is_refused():
    assert refused(["+scenario=custom", "limit=-1"], plan.run_options) == "limit must be >= 0, got -1"


def test_an_unknown_progress_mode_is_refused_with_the_modes():
    assert refused(["+scenario=custom", "progress=loud"], plan.run_options) == (
        "progress must be one of auto, bars, lines, off, got 'loud'")


def bank_file(tmp_path):
    path = tmp_path / "bank.jsonl"
    path.write_text(json.dumps({"task_id": "t1", "nuggets": [{"text": "It is blue", "importance": "vital"}]}) + "\n")
    return str(path)


@pytest.mark.parametrize("window", [1, 2, 10])
def test_a_nugget_window_of_one_or_more_is_kept(window):
    assert plan.plan_nugget_bank({"bank": "auto", "window": window, "bank_file": None})["window"] == window


@pytest.mark.parametrize("window", [0, -1, True, False, "3", 2.0, None])
def test_a_nugget_window_that_is_no_positive_integer_is_refused(window):
    with pytest.raises(UserError) as e:
        plan.plan_nugget_bank({"bank": "auto", "window": window, "bank_file": None})
    assert str(e.value) == f"nuggets.window must be a positive integer, got {window!r}"


def test_a_bank_file_is_refused_with_the_per_record_bank(tmp_path):
    with pytest.raises(UserError) as e:
        plan.plan_nugget_bank({"bank": "per_record", "window": 10, "bank_file": bank_file(tmp_path)})
    assert str(e.value) == "nuggets.bank_file needs nuggets.bank=per_query or auto (per_record builds no bank)"


@pytest.mark.parametrize("bank", ["auto", "per_query"])
def test_a_bank_file_is_kept_by_its_absolute_path(tmp_path, monkeypatch, bank):
    bank_file(tmp_path)
    monkeypatch.chdir(tmp_path)
    conf = plan.plan_nugget_bank({"bank": bank, "window": 10, "bank_file": "bank.jsonl"})
    assert conf == {"bank": bank, "window": 10, "bank_file": str(tmp_path / "bank.jsonl")}


@pytest.mark.parametrize("metrics, named", [
    ("[exact_match,fact_score,rules_coverage,is_correct]", "fact_score, rules_coverage, is_correct"),
    ("[fact_score]", "fact_score"),
    ("[rules_coverage,exact_match]", "rules_coverage"),
    ("[is_correct]", "is_correct"),
])
def test_fact_metrics_without_expectations_are_refused_by_name(metrics, named):
    line = refused(["+scenario=custom", "custom.expectations=null", f"metrics.custom={metrics}"])
    assert line == (f"{named} need custom.expectations=FILE.yaml (per-question fact checks; see docs/metrics.md), "
                    "or leave them out of metrics.custom")


def test_no_expectations_are_read_without_fact_metrics():
    assert plan.plan_run(compose(["+scenario=custom", "custom.expectations=null",
                                  "metrics.custom=[exact_match]"])).expectations is None


def sha256(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def test_a_bare_expectations_name_is_looked_up_in_the_bundled_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = plan.plan_run(compose(["+scenario=custom", f"input={SAMPLE}"]))
    assert run.expectations.sha256 == sha256(BUNDLED_EXPECTATIONS)


@pytest.mark.parametrize("name", ["custom_expectations.yaml", "mine.yaml"])
def test_an_expectations_file_here_comes_before_a_bundled_one(tmp_path, monkeypatch, name):
    with open(BUNDLED_EXPECTATIONS, encoding="utf-8") as fh:
        (tmp_path / name).write_text(fh.read() + "# my copy\n")
    monkeypatch.chdir(tmp_path)
    run = plan.plan_run(compose(["+scenario=custom", f"input={SAMPLE}", f"custom.expectations={name}"]))
    assert run.expectations.sha256 == sha256(tmp_path / name) != sha256(BUNDLED_EXPECTATIONS)


def test_a_missing_expectations_file_is_named_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert refused(["+scenario=custom", f"input={SAMPLE}", "custom.expectations=nope.yaml"]) == (
        "custom.expectations: cannot read nope.yaml: No such file or directory")


def test_no_input_and_no_sample_is_refused():
    assert refused(["metrics=[exact_match]"]) == "no input: set input=PATH (a file, a glob, a directory or a list)"


def records(path, question="user_input"):
    with open(SAMPLE, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            row[question] = row.pop("user_input")
            fh.write(json.dumps(row) + "\n")
    return str(path)


def test_an_input_list_plans_each_file_in_order(tmp_path):
    b, a = records(tmp_path / "b.jsonl"), records(tmp_path / "a.jsonl")
    run = plan.plan_run(compose(["metrics=[exact_match]", f"input=[{b},{a}]"]))
    assert [f.path for f in run.files] == [b, a]


def test_the_column_names_travel_with_every_input_file(tmp_path):
    a, b = records(tmp_path / "a.jsonl", "q"), records(tmp_path / "b.jsonl", "q")
    run = plan.plan_run(compose(["metrics=[exact_match]", f"input=[{a},{b}]", "columns.question=q"]))
    assert run.columns == {"question": "q"}
    assert [f.column_map for f in run.files] == [{"question": "q"}, {"question": "q"}]
