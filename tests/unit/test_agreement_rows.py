"""Judge-vs-human agreement as a user reads its result: which human row a run record takes, the
per-pair rows' counts (n, exclusions, annotators, units) for every model, ``?`` and ``ALL``, a jury's
judges beside it, the statistics decided once per pair, the result's header, and the messages of
pairs that cannot be made (ragscale.report.agreement; the statistics themselves are in
test_agreement.py)."""

import json
import os

import pytest

from ragscale.errors import UserError
from ragscale.report import agreement as ag

STATS_CATEGORICAL = {"spearman", "kendall", "kappa", "kappa_quadratic"}
COUNTS = ("model", "n", "excluded_error", "excluded_null", "annotators_mean", "units")


def write_jsonl(path, rows) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def rec(i, task, model, metrics, conversation=None, error=None):
    r = {"task_id": task, "metrics": metrics, "error": error, "ragscale": {"record_key": f"k{i}"}}
    if model is not None:
        r["model_id"] = model
    if conversation is not None:
        r["conversation_id"] = conversation
    return r


RECORDS = [
    rec(0, "t1", "a", {"judge": [3.0], "judge@x": [2.0], "judge@y": [4.0], "judgex@z": [1.0]}, "c1"),
    rec(1, "t2", "a", {"judge": [2.0], "judge@x": [2.0], "judge@y": [1.0]}, "c1"),
    rec(2, "t3", "a", {"judge": [4.0]}, "c2"),
    rec(3, "t1", "b", {"judge": [1.0]}, "c1"),
    rec(4, "t2", "b", {"judge": [None]}),                                   # a null metric
    rec(5, "t3", "b", {}, "c3", error={"stage": "judge", "message": "boom"}),  # an error
    rec(6, "t4", None, {"judge": [2.0]}),                                    # no model: "?"
    rec(7, "t9", "a", {"judge": [1.0]}),                                     # no human row
    rec(8, "t5", "a", {"judge": [1.0]}, "c4"),                               # rated on another metric only
]
HUMAN = [
    {"task_id": "t1", "judge": 3, "comment": "clear"}, {"task_id": "t1", "judge": 3, "comment": "ok"},  # 2 annotators
    {"task_id": "t2", "judge": 2}, {"task_id": "t3", "judge": 4}, {"task_id": "t4", "judge": 1},
    {"task_id": "t5", "other": 1}, {"task_id": "t8", "judge": 2},           # t8: no run record
]


@pytest.fixture
def result(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "run" / "records.jsonl", RECORDS)
    write_jsonl(tmp_path / "human.jsonl", HUMAN)
    return ag.agreement("run", "human.jsonl", n_boot=20, seed=7)


def counts(rows):
    return [tuple(r[k] for k in COUNTS) for r in rows]


def test_each_record_takes_its_human_row_and_the_rest_is_counted(result, tmp_path):
    assert result["run_dir"] == str(tmp_path / "run")  # absolute, as given relative
    assert result["human"] == {"path": str(tmp_path / "human.jsonl"), "layout": "jsonl", "records": 6,
                               "unmatched": 1, "skipped": 0, "non_numeric": {"comment": 2}}
    # t9 has no human row; t5's row rates another metric, yet the record is matched (and its error counted)
    assert result["records"] == {"run": 9, "matched": 8, "errored_excluded": 1}
    assert result["pairs"] == {"judge": "judge"}  # "other" names no run metric; judgex@z is no judge of "judge"


def test_the_bootstrap_states_its_unit_over_the_matched_records(result):
    assert result["bootstrap"] == {
        "replicates": 20, "seed": 7, "confidence": 0.95, "method": "BCa (percentile where BCa is undefined)",
        "unit": "conversation", "by": "conversation_id", "units": 6, "records": 8,
        "text": "resampled by conversation: 6 conversations (8 records); 2 records without conversation_id, "
                "each on its own"}


def test_rows_per_model_then_all_for_the_jury_and_each_of_its_judges(result):
    rows = result["rows"]
    assert [(r["human"], r["metric"]) for r in rows] == (
        [("judge", "judge")] * 4 + [("judge", "judge@x")] * 4 + [("judge", "judge@y")] * 4)
    # "?" (no model_id) sorts with the models, ALL last (its units: c1, c2 and the "?" record alone); a
    # rated record without a value is null, one with an error is an error, whatever its metrics;
    # annotators are averaged over the records with a value
    assert counts(rows[:4]) == [("?", 1, 0, 0, 1.0, 1), ("a", 3, 0, 0, 4 / 3, 2), ("b", 1, 1, 1, 2.0, 1),
                                ("ALL", 5, 1, 1, 7 / 5, 3)]
    assert counts(rows[4:8]) == [("?", 0, 0, 1, None, 0), ("a", 2, 0, 1, 1.5, 1), ("b", 0, 1, 2, None, 0),
                                 ("ALL", 2, 1, 4, 1.5, 1)]
    assert counts(rows[8:]) == counts(rows[4:8])


def test_a_group_without_values_says_why_and_one_with_values_has_the_pairs_statistics(result):
    rows = result["rows"]
    empty = rows[4]
    assert {k: empty[k] for k in empty if k not in ("human", "metric", *COUNTS)} == {
        "spearman": {"value": None, "ci": None, "reason": "no rated record has a value of the metric"}}
    # 1-4 labels on both sides: kappa applies to every row of the pair, even a row of one record
    for row in (rows[0], rows[1], rows[2], rows[3], rows[5], rows[7]):
        assert STATS_CATEGORICAL <= set(row) and "accuracy" not in row, row
    assert rows[1]["spearman"]["value"] == pytest.approx(1.0)  # a: 2,3,4 against 2,3,4
    assert rows[1]["kappa"]["value"] == pytest.approx(1.0)
    assert rows[0]["spearman"]["value"] is None and rows[0]["spearman"]["reason"]


def test_without_a_unit_every_record_is_resampled_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "run" / "records.jsonl", RECORDS)
    write_jsonl(tmp_path / "human.jsonl", HUMAN)
    res = ag.agreement("run", "human.jsonl", n_boot=20, seed=7, cluster_by=None)
    assert {k: res["bootstrap"][k] for k in ("unit", "by", "units", "records", "text")} == {
        "unit": "record", "by": None, "units": 8, "records": 8, "text": "resampled by record: 8 records"}
    assert [r["units"] for r in res["rows"]] == [r["n"] for r in res["rows"]]


def test_which_statistics_apply_is_decided_on_all_the_pairs_records(tmp_path):
    # model a alone is binary (0/1 on both sides); the pair is not, so no row has accuracy
    recs = [rec(0, "t1", "a", {"m": [0.0]}), rec(1, "t2", "a", {"m": [1.0]}), rec(2, "t3", "a", {"m": [1.0]}),
            rec(3, "t1", "b", {"m": [3.0]}), rec(4, "t2", "b", {"m": [4.0]})]
    human = [{"task_id": "t1", "model_id": "a", "m": 0}, {"task_id": "t2", "model_id": "a", "m": 1},
             {"task_id": "t3", "model_id": "a", "m": 0},
             {"task_id": "t1", "model_id": "b", "m": 3}, {"task_id": "t2", "model_id": "b", "m": 4}]
    run = os.path.dirname(write_jsonl(tmp_path / "run" / "records.jsonl", recs))
    res = ag.agreement(run, write_jsonl(tmp_path / "h.jsonl", human), n_boot=0)
    assert [r["model"] for r in res["rows"]] == ["a", "b", "ALL"]
    assert all("accuracy" not in r and STATS_CATEGORICAL <= set(r) for r in res["rows"])
    # the same records of model a alone: binary, so accuracy applies (2 of 3 agree)
    res = ag.agreement(os.path.dirname(write_jsonl(tmp_path / "run_a" / "records.jsonl", recs[:3])),
                       write_jsonl(tmp_path / "h_a.jsonl", human[:3]), n_boot=0)
    assert [r["accuracy"]["value"] for r in res["rows"]] == [pytest.approx(2 / 3)] * 2


def test_a_declared_scale_decides_whether_kappa_applies(tmp_path):
    # the humans used 1 and 2 only; the judge said 3: off their labels, so no kappa ...
    recs = [rec(i, f"t{i}", "a", {"m": [v]}) for i, v in enumerate([1.0, 2.0, 3.0])]
    run = os.path.dirname(write_jsonl(tmp_path / "run" / "records.jsonl", recs))
    plain = [{"task_id": f"t{i}", "m": v} for i, v in enumerate([1, 2, 2])]
    res = ag.agreement(run, write_jsonl(tmp_path / "h.jsonl", plain), n_boot=0)
    assert "kappa" not in res["rows"][-1]
    # ... unless the human file declares a 1-3 scale, as MT-RAG's human-evaluation layout does
    mtrag = {"metrics": [{"name": "m", "author": "human", "type": "categorical",
                          "values": [{"value": str(v), "numeric_value": v} for v in (1, 2, 3)]}],
             "evaluations": [{"task_id": f"t{i}", "model_id": "a", "annotations": {"m": {"ann": {"value": str(v)}}}}
                             for i, v in enumerate([1, 2, 2])]}
    (tmp_path / "h.json").write_text(json.dumps(mtrag))
    res = ag.agreement(run, str(tmp_path / "h.json"), n_boot=0)
    assert res["human"]["layout"] == "mtrag-human-evaluation" and "kappa" in res["rows"][-1]


@pytest.mark.parametrize("rec_, keys", [
    ({"model_id": "m", "task_id": 3, "query_id": 7, "ragscale": {"record_key": "k"}},
     [("record_key", "k"), ("query", "7", "1", "m"), ("query", "7", "1", None), ("task", "3", "m"),
      ("task", "3", None)]),
    ({"query_id": "q", "query_run": 2, "ragscale": None},
     [("query", "q", "2", None), ("query", "q", "2", None)]),
    ({"task_id": "t", "ragscale": {"record_key": ""}}, [("task", "t", None), ("task", "t", None)]),
    ({"model_id": "m", "metrics": {}}, []),
])
def test_a_run_record_offers_its_keys_most_specific_first(rec_, keys):
    assert ag.run_keys(rec_) == keys


def test_a_model_specific_human_row_wins_over_one_for_every_model(tmp_path):
    recs = [rec(0, "t1", "a", {"m": [1.0]}), rec(1, "t1", "b", {"m": [2.0]}), rec(2, "t2", "a", {"m": [3.0]})]
    human = [{"task_id": "t1", "m": 4}, {"task_id": "t1", "model_id": "b", "m": 2}, {"record_key": "k2", "m": 3},
             {"task_id": "t2", "m": 1}]
    run = os.path.dirname(write_jsonl(tmp_path / "run" / "records.jsonl", recs))
    res = ag.agreement(run, write_jsonl(tmp_path / "h.jsonl", human), n_boot=0)
    # a's t1 takes the row for every model, b's t1 its own row, k2 its record-key row (t2's row goes unused)
    assert res["human"]["unmatched"] == 1 and res["records"]["matched"] == 3
    by = {r["model"]: r for r in res["rows"]}
    assert by["b"]["n"] == 1 and by["a"]["n"] == 2
    assert by["a"]["spearman"]["value"] == pytest.approx(-1.0)  # (4, 3) against (1, 3): 4 > 3 while 1 < 3


def test_pairs_by_name_ignore_case_unless_pairs_are_given(tmp_path):
    recs = [rec(i, f"t{i}", "a", {"judge": [float(i)], "RL_F": [i / 4]}) for i in range(4)]
    run = os.path.dirname(write_jsonl(tmp_path / "run" / "records.jsonl", recs))
    human = write_jsonl(tmp_path / "h.jsonl", [{"task_id": f"t{i}", "Judge": i, "faith": i} for i in range(4)])
    assert ag.agreement(run, human, n_boot=0)["pairs"] == {"Judge": "judge"}
    # given pairs are all the pairs: Judge is not paired by its name beside them
    res = ag.agreement(run, human, ["faith=RL_F"], n_boot=0)
    assert res["pairs"] == {"faith": "RL_F"} and {r["metric"] for r in res["rows"]} == {"RL_F"}
    res = ag.agreement(run, human, ["faith=RL_F", "Judge=judge"], n_boot=0)
    assert res["pairs"] == {"Judge": "judge", "faith": "RL_F"}  # in the human file's order


@pytest.mark.parametrize("pairs, message", [
    (["nope=RL_F"], "--pair nope=RL_F: 'nope' is not a human metric in {h}; human metrics: Judge, faith"),
    (["faith=RL_X"], "--pair faith=RL_X: 'RL_X' is not a metric of the run; run metrics: RL_F, judge"),
])
def test_a_pair_naming_what_is_not_there_says_what_is(tmp_path, pairs, message):
    recs = [rec(i, f"t{i}", "a", {"judge": [float(i)], "RL_F": [i / 4]}) for i in range(2)]
    run = os.path.dirname(write_jsonl(tmp_path / "run" / "records.jsonl", recs))
    human = write_jsonl(tmp_path / "h.jsonl", [{"task_id": f"t{i}", "Judge": i, "faith": i} for i in range(2)])
    with pytest.raises(UserError) as e:
        ag.agreement(run, human, pairs, n_boot=0)
    assert str(e.value) == message.format(h=human)


def test_no_shared_name_says_how_to_map_them(tmp_path):
    run = os.path.dirname(write_jsonl(tmp_path / "run" / "records.jsonl", [rec(0, "t0", "a", {"RL_F": [0.5]})]))
    human = write_jsonl(tmp_path / "h.jsonl", [{"task_id": "t0", "faith": 1, "relevance": 2}])
    with pytest.raises(UserError) as e:
        ag.agreement(run, human, n_boot=0)
    assert str(e.value) == ("no metric pairs: the human metrics (faith, relevance) share no name with the run's "
                            "(RL_F); map them with --pair HUMAN=METRIC")


def test_no_match_hint_names_the_first_record_that_has_keys(tmp_path):
    recs = [{"metrics": {"m": [1.0]}}, {"metrics": {"m": [2.0]}, "task_id": "t7", "model_id": "a"},
            {"metrics": {"m": [3.0]}, "task_id": "t8"}]
    run = os.path.dirname(write_jsonl(tmp_path / "run" / "records.jsonl", recs))
    human = write_jsonl(tmp_path / "h.jsonl", [{"task_id": "x", "model_id": "b", "m": 1}])
    with pytest.raises(UserError) as e:
        ag.agreement(run, human, n_boot=0)
    assert str(e.value) == (f"no record of {run} has human ratings in {human} (3 run records; match on task_id "
                            "[+ model_id], record_key or query_id/query_run; e.g. human task_id=x, model_id=b vs "
                            "run task_id=t7)")
    run = os.path.dirname(write_jsonl(tmp_path / "bare" / "records.jsonl", recs[:1]))
    with pytest.raises(UserError) as e:
        ag.agreement(run, human, n_boot=0)
    assert str(e.value).endswith("; e.g. human task_id=x, model_id=b)")


@pytest.mark.parametrize("pairs, out", [
    (["a=b=c"], {"a": "b=c"}),
    ([" faithfulness =  RL_F "], {"faithfulness": "RL_F"}),
    (["a=b", "a=c"], {"a": "c"}),
])
def test_pairs_are_split_at_the_first_equals_sign(pairs, out):
    assert ag.parse_pairs(pairs) == out


@pytest.mark.parametrize("pair", ["faithfulness", "a=", "=b", " = b", "a= "])
def test_a_pair_without_both_sides_is_refused(pair):
    with pytest.raises(UserError) as e:
        ag.parse_pairs([pair])
    assert str(e.value) == f"--pair {pair!r}: expected HUMAN=METRIC, e.g. faithfulness=RL_F"


def test_a_jurys_judges_are_the_columns_under_its_name():
    metrics = {"RL_F", "RL_F@b", "RL_F@a", "RL_Fx@a", "x@RL_F", "RB_agg@a"}
    assert ag.panel_members("RL_F", metrics) == ["RL_F@a", "RL_F@b"]
    assert ag.panel_members("RB_agg", metrics) == ["RB_agg@a"] and ag.panel_members("x", metrics) == ["x@RL_F"]
    assert ag.panel_members("RL_Fx", {"RL_F@a"}) == []


def test_mtrag_human_values_are_reduced_by_each_metrics_aggregator(tmp_path):
    """MT-RAG's human-evaluation layout: a categorical metric's labels mapped to their numbers and reduced
    by its median, a numerical one by its mean, an explicit aggregator over its type; annotators given as
    a bare value or an object; the system's and the composite's values are not a person's."""
    labels = [{"value": name, "numeric_value": v} for name, v in (("No", 0), ("Partially", 0.5), ("Yes", 1))]
    data = {"metrics": [
        {"name": "faithful", "author": "human", "type": "categorical", "values": labels},
        {"name": "quality", "author": "human", "type": "numerical"},
        {"name": "natural", "author": "human", "type": "categorical", "aggregator": "average",
         "values": [{"value": str(v), "numeric_value": v} for v in (1, 2, 3, 4)]},
        {"name": "rl_f", "author": "algorithm", "type": "numerical"}],
        "evaluations": [{"task_id": "t1", "model_id": "m", "annotations": {
            "faithful": {"system": {"value": "Yes"}, "a": {"value": "No"}, "b": "No", "c": {"value": "Yes"}},
            "quality": {"composite": 9, "a": 1, "b": {"value": 1}, "c": 4},
            "natural": {"a": {"value": "1"}, "b": {"value": "1"}, "c": {"value": "4"}},
            "rl_f": {"system": {"value": 0.4}}}}]}
    path = tmp_path / "human.json"
    path.write_text(json.dumps(data))
    h = ag.read_human(str(path))
    key = ("task", "t1", "m")
    assert h.values[key] == {"faithful": 0.0, "quality": 2.0, "natural": 2.0}  # median of 0,0,1; means of 1,1,4
    assert h.annotators[key] == {"faithful": 3, "quality": 3, "natural": 3}
    assert h.scales == {"faithful": [0.0, 0.5, 1.0], "natural": [1.0, 2.0, 3.0, 4.0]}
    data["metrics"] = []  # undeclared: every metric but the pseudo-annotators' values, each by its mean
    path.write_text(json.dumps(data))
    h = ag.read_human(str(path))
    assert h.values[key]["quality"] == 2.0 and h.values[key]["natural"] == 2.0 and "rl_f" not in h.values[key]


def test_the_files_written(result, tmp_path):
    import csv

    from ragscale.stats.agreement import STATS

    paths = ag.write_outputs(result, str(tmp_path / "out"))
    assert paths == {k: str(tmp_path / "out" / f"agreement.{k}") for k in ("json", "csv", "md", "png")}
    assert json.loads((tmp_path / "out" / "agreement.json").read_text()) == json.loads(json.dumps(result))
    assert (tmp_path / "out" / "agreement.md").read_text() == ag.to_markdown(result) + "\n"
    assert (tmp_path / "out" / "agreement.png").read_bytes()[:4] == b"\x89PNG"
    with open(paths["csv"], newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["human", "metric", "model", "n", "excluded_error", "excluded_null", "annotators_mean",
                       *(f"{s}{x}" for s in STATS for x in ("", "_ci_low", "_ci_high"))]
    assert len(rows) == 1 + len(result["rows"])
    first, a = result["rows"][1], rows[2]  # model a on judge
    assert a[:7] == ["judge", "judge", "a", "3", "0", "0", str(first["annotators_mean"])]
    spearman = first["spearman"]
    assert a[7:10] == [str(spearman["value"]), *(str(v) for v in spearman["ci"])]
    empty = rows[5]  # judge@x for "?": no value, no statistic
    assert empty[:7] == ["judge", "judge@x", "?", "0", "0", "1", ""] and set(empty[7:]) == {""}
