"""How the jury block is shown (ragscale.report.jury): leaderboard.md's "Jury" section and the report's
jury tables, read back from summary.json's ``jury`` block, whole; a record without per-passage grades
adds no unit."""

from ragscale.report.jury import JuryValues, jury_context, markdown_lines

SUMMARY = {"jury": {"method": "the method", "metrics": {
    "RB_llm": {"alpha": 0.41234, "level": "ordinal", "records": 12,
               "judges": {"a": {"alpha_vs_rest": 0.123, "n": 12}, "b": {"alpha_vs_rest": None, "n": 3}},
               "disagreements": [{"record": "m · task_id=t1", "scores": {"a": 0.9, "b": 0.1}, "range": 0.8},
                                 "not a disagreement"]},
    "idk_eval": {"alpha": None, "level": "nominal", "records": 0, "judges": {}}}}}


def test_the_leaderboard_jury_section_is_one_row_per_metric_with_dashes_for_undefined_alphas():
    assert markdown_lines(SUMMARY) == [
        "## Jury", "",
        "| metric | level | records | alpha | judge: alpha vs the rest |",
        "|---|---|---:|---:|---|",
        "| RB_llm | ordinal | 12 | 0.412 | a: 0.12, b: – |",
        "| idk_eval | nominal | 0 | – |  |",
        "", "the method. Where the judges disagree most: summary.json `jury`, report.html.", ""]


def test_the_report_jury_tables_skip_a_malformed_metric_and_keep_the_rest():
    metrics = {"broken": "?", **SUMMARY["jury"]["metrics"]}
    assert jury_context({"jury": {"method": "the method", "metrics": metrics}}) == {
        "rows": [{"metric": "RB_llm", "level": "ordinal", "records": 12, "alpha": "0.412",
                  "judges": [("a", "0.123", 12), ("b", "–", 3)]},
                 {"metric": "idk_eval", "level": "nominal", "records": 0, "alpha": "–", "judges": []}],
        "worst": [{"metric": "RB_llm", "record": "m · task_id=t1", "range": "0.800", "scores": "a: 0.900, b: 0.100"}],
        "method": "the method"}


def test_a_summary_without_a_jury_block_has_no_jury_section_or_tables():
    for summary in ("not a summary", {}, {"jury": "?"}, {"jury": {"metrics": "?"}}):
        assert markdown_lines(summary) == [] and jury_context(summary) is None


def test_a_record_without_per_passage_grades_adds_no_unit():
    jury = JuryValues({"umbrela_scores": ["a", "b"]})
    jury.add({"task_id": "t1", "model_id": "m", "metrics": {}})
    jury.add({"task_id": "t2", "model_id": "m", "metrics": {"umbrela_scores@a": None, "umbrela_scores@b": "x"}})
    jury.add({"task_id": "t3", "model_id": "m", "metrics": {"umbrela_scores@a": [3, 1], "umbrela_scores@b": [0, 1]}})
    grades = jury.block()["metrics"]["umbrela_scores"]
    assert grades["records"] == 2 and grades["judges"]["a"]["n"] == 2
    assert [d["record"] for d in grades["disagreements"]] == ["m · task_id=t3 · passage 1"]
