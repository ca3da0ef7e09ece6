"""What plan_judges makes of the judge settings: each panel member's JudgeActor arguments (its own
cache, retries, protocol and limits), errors that name the judge block they come from,
``taxonomy.k``'s check, and which judges a panel takes (``panel_metrics``, ``after``)."""

from __future__ import annotations

import os

import pytest

from ragscale.actors.engines import resolve
from ragscale.actors.judge_plan import panel_judges, plan_judges
from ragscale.cachedir import CACHE_ENV
from ragscale.config import JudgeSettings
from ragscale.errors import UserError
from ragscale.judges import JUDGES, JudgeSpec


def conf(name, **kw):
    return {"name": name, "engine": "openai", "model": "gpt-4o-mini", "max_retries": 1, "cache_path": None, **kw}


def message(settings, metrics=("idk_eval", "RB_llm")):
    with pytest.raises(UserError) as e:
        plan_judges(settings, list(metrics), {})
    return str(e.value)


def test_each_panel_member_runs_with_its_own_settings(tmp_path):
    a = conf("a", max_retries=2, cache_path=str(tmp_path / "a" / "judge.sqlite"), protocol="reference",
             max_raw_chars=500)
    b = conf("b", retry_unparsed=False)
    settings = JudgeSettings(judge=conf("main"), panel=(a, b), panel_metrics=("RB_llm",), overwrite=True)
    plan = plan_judges(settings, ["idk_eval", "RB_llm"], {})
    engine = resolve(conf("x"), {})
    assert plan == {
        "judge_kwargs": {"engine": engine, "judges": ["idk"], "cache_path": None, "max_retries": 1,
                         "protocol": "constrained", "max_raw_chars": None, "retry_unparsed": True},
        "panel_confs": (a, b),
        "panel_kwargs": (
            {"engine": engine, "judges": ["radbench"], "tag": "a", "cache_path": str(tmp_path / "a" / "judge.sqlite"),
             "max_retries": 2, "protocol": "reference", "max_raw_chars": 500, "retry_unparsed": True},
            {"engine": engine, "judges": ["radbench"], "tag": "b", "cache_path": None,
             "max_retries": 1, "protocol": "constrained", "max_raw_chars": None, "retry_unparsed": False}),
        "needs_derive": True,
    }
    assert os.path.isdir(tmp_path / "a")


def test_retry_unparsed_follows_overwrite_unless_set():
    settings = JudgeSettings(judge=conf("main"), panel=(conf("a"),), panel_metrics=("RB_llm",), overwrite=False)
    plan = plan_judges(settings, ["idk_eval", "RB_llm"], {})
    assert plan["judge_kwargs"]["retry_unparsed"] is False and plan["panel_kwargs"][0]["retry_unparsed"] is False
    assert plan["needs_derive"] is True


def test_a_run_without_a_panel_needs_no_verdict():
    plan = plan_judges(JudgeSettings(judge=conf("main")), ["idk_eval", "RB_llm"], {})
    assert plan["needs_derive"] is False and plan["panel_kwargs"] == () and plan["judge_kwargs"]["judges"] == [
        "idk", "radbench"]


def test_a_members_cache_path_that_cannot_be_created_names_the_member(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    folder = str(blocker / "sub")
    settings = JudgeSettings(judge=conf("main"), panel=(conf("a", cache_path=os.path.join(folder, "j.sqlite")),))
    key = "judge_panel[a].cache_path"
    assert message(settings) == (f"{key}: cannot create {folder} (Not a directory); set {key}=FILE, {CACHE_ENV}=FOLDER, "
                                 f"or {key}=null (no judge cache)")


PROTOCOL = ("unknown judging protocol 'referense' (did you mean 'reference'?); protocols are constrained, "
            "reference (docs/metrics.md, Judging protocols)")
CAP = "must be a positive number of characters or null (no cap), got 0"
RETRY = "must be true, false or null (as overwrite), got 'yes'"


@pytest.mark.parametrize("bad, text", [({"protocol": "referense"}, f".protocol: {PROTOCOL}"),
                                       ({"max_raw_chars": 0}, f".max_raw_chars {CAP}"),
                                       ({"retry_unparsed": "yes"}, f".retry_unparsed {RETRY}")])
@pytest.mark.parametrize("where", ["judge", "judge_panel[b]"])
def test_a_bad_judge_setting_names_its_block(bad, text, where):
    main, b = (conf("main", **bad), conf("b")) if where == "judge" else (conf("main"), conf("b", **bad))
    settings = JudgeSettings(judge=main, panel=(conf("a"), b))
    assert message(settings) == where + text


@pytest.mark.parametrize("k", [0, -1, True, False, "3", 2.0])
def test_taxonomy_k_must_be_a_positive_integer_or_null(k):
    settings = JudgeSettings(judge=conf("main"), taxonomy_k=k)
    assert message(settings, ["TopicalPrecision@K"]) == \
        f"taxonomy.k must be a positive integer or null (every chunk), got {k!r}"


@pytest.mark.parametrize("k", [None, 1, 2, 10])
def test_taxonomy_k_reaches_the_taxonomy_judges(k):
    settings = JudgeSettings(judge=conf("main"), taxonomy_k=k)
    kwargs = plan_judges(settings, ["TopicalPrecision@K", "GroundingPresenceRate", "RB_llm"], {})["judge_kwargs"]
    assert kwargs["options"] == {"taxonomy_retrieval": {"k": k}, "taxonomy_grounding": {"k": k}}


def test_panel_member_names_must_be_unique():
    settings = JudgeSettings(judge=conf("main"), panel=(conf("a"), conf("b"), conf("a")))
    assert message(settings) == "judge_panel: judge names must be unique, got ['a', 'b', 'a']"


def test_an_empty_panel_metrics_is_refused_saying_none():
    settings = JudgeSettings(judge=conf("main"), panel=(conf("a"),), panel_metrics=())
    assert message(settings) == ("judge_panel is set but this run computes none of panel_metrics (none); its judged "
                                 "metrics: idk_eval, RB_llm (or panel_metrics=[all])")


@pytest.mark.parametrize("names, text", [
    (("all", "nope"), "panel_metrics: unknown metric 'nope'"),
    (("ALL", "RougeL"), "panel_metrics: 'RougeL' is not a judged metric"),
])
def test_names_after_all_are_still_checked(names, text):
    settings = JudgeSettings(judge=conf("main"), panel=(conf("a"),), panel_metrics=names)
    assert message(settings).startswith(text)


def test_a_panel_takes_every_judge_that_reads_its_judges_however_indirectly(monkeypatch):
    audit = JudgeSpec("nuggets_audit", "nuggets_audit_score", "v1", lambda inp: iter(()), after=("nuggets",))
    monkeypatch.setitem(JUDGES, "nuggets_audit", audit)
    metrics = ["nuggets_audit_score", "citation_f1", "nuggets_vital", "umbrela_mean"]
    assert panel_judges(["umbrela_mean"], metrics) == ["nuggets_audit", "nuggets", "umbrela"]  # the run's order
    assert panel_judges(["nuggets_vital"], metrics) == ["nuggets_audit", "nuggets"]
    assert panel_judges(["citation_f1"], metrics) == ["citation"]
