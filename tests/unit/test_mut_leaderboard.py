"""The leaderboard's layout that mutation testing found unpinned (make mutate): the exact text of
leaderboard.md (headings, sentences, column alignment, unranked models, the AnsAcc column, the
"By ..." section and the significance section), the CSV rows and defaults, the end-of-run model
lines, the ranking edges and where write_leaderboard puts its files and in which encoding.
Summaries are built by hand in summary.json's shape, so no records are read."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import pytest

import ragscale
from ragscale.report import headline as hd
from ragscale.report import leaderboard as lb
from ragscale.report import ranking as rk
from ragscale.report import significance as sig


def blk(count, errors=0, acc=None, acc_n=None, **vals):
    """A summary block: ``vals`` maps a metric to (mean, n)."""
    b = {"count": count, "errors": errors, "metrics": {k: v[0] for k, v in vals.items()},
         "n": {k: v[1] for k, v in vals.items()}}
    if acc is not None:
        b["answerability_accuracy"] = acc
    if acc_n is not None:
        b["answerability_n"] = acc_n
    return b


def mtrag_summary():
    """An H-Mean run: a tie for first, a model without a headline value, answerability and turn cells."""
    alpha = blk(3, 0, 2 / 3, 3, HMean=(0.5, 3), RL_F=(0.6, 3), Length=(12.34, 3))
    alpha["by_answerability"] = {"UNANSWERABLE": blk(1, 0, 0.0, 1, HMean=(0.0, 1)),
                                 "ANSWERABLE": blk(2, 0, 1.0, 2, HMean=(0.75, 2), RL_F=(0.9, 2))}
    alpha["by_turn"] = {">1": blk(2, 0, 0.5, 2, HMean=(0.25, 2)), "1": blk(1, 0, 1.0, 1, HMean=(1.0, 1))}
    bx = blk(2, 1, 1.0, 1, HMean=(0.5, 1), RL_F=(0.2, 1))
    bx["by_answerability"] = {"UNKNOWN": blk(1, 1), "ANSWERABLE": blk(1, 0, 1.0, 1, HMean=(0.5, 1))}
    return {"metrics": ["HMean", "RL_F", "Length", "RB_agg_zero_denominator"],
            "models": {"c": blk(1, 1), "b|x": bx, "alpha": alpha}}


MTRAG_MD = """\
# Leaderboard

3 model(s), 6 records, ranked by mean **HMean** (higher is better). Means leave out records without a value; \
per-target metrics use the first target, per-passage metrics the best passage (summary.json).

## Overall

| # | model | n | errors | HMean | RL_F | Length | AnsAcc |
|---:|---|---:|---:|---:|---:|---:|---:|
| 1 | alpha | 3 | 0 | 0.5000 | 0.6000 | 12.3 | 0.6667 |
| 1 | b\\|x | 2 | 1 | 0.5000 | 0.2000 | – | 1.0000 |
| – | c | 1 | 1 | – | – | – | – |

## By answerability and by turn (Turn 1: first turn; Turn >1: later turns)

Each cell: mean (n records with a value). AnsAcc: the share of records whose answerability the response \
handled right (an IDK for UNANSWERABLE and CONVERSATIONAL questions, an answer otherwise). leaderboard.csv \
has every metric for every cell.

### HMean

| # | model | All | ANSWERABLE | UNANSWERABLE | UNKNOWN | Turn 1 | Turn >1 |
|---:|---|---:|---:|---:|---:|---:|---:|
| 1 | alpha | 0.5000 (3) | 0.7500 (2) | 0.0000 (1) | – (0) | 1.0000 (1) | 0.2500 (2) |
| 1 | b\\|x | 0.5000 (1) | 0.5000 (1) | – (0) | – (0) | – (0) | – (0) |
| – | c | – (0) | – (0) | – (0) | – (0) | – (0) | – (0) |

### RL_F

| # | model | All | ANSWERABLE | UNANSWERABLE | UNKNOWN | Turn 1 | Turn >1 |
|---:|---|---:|---:|---:|---:|---:|---:|
| 1 | alpha | 0.6000 (3) | 0.9000 (2) | – (0) | – (0) | – (0) | – (0) |
| 1 | b\\|x | 0.2000 (1) | – (0) | – (0) | – (0) | – (0) | – (0) |
| – | c | – (0) | – (0) | – (0) | – (0) | – (0) | – (0) |

### AnsAcc

| # | model | All | ANSWERABLE | UNANSWERABLE | UNKNOWN | Turn 1 | Turn >1 |
|---:|---|---:|---:|---:|---:|---:|---:|
| 1 | alpha | 0.6667 (3) | 1.0000 (2) | 0.0000 (1) | – (0) | 1.0000 (1) | 0.5000 (2) |
| 1 | b\\|x | 1.0000 (1) | 1.0000 (1) | – (0) | – (0) | – (0) | – (0) |
| – | c | – (0) | – (0) | – (0) | – (0) | – (0) | – (0) |
"""


def test_markdown_of_an_hmean_run_exactly():
    """Every heading, sentence, alignment row and cell of an H-Mean run with answerability and turns."""
    assert lb.format_markdown(mtrag_summary()) == MTRAG_MD


def taxonomy_summary():
    """A lower-is-better headline, one answerability class, no turns, no answerability accuracy."""
    m1 = blk(2, 0, UnsafeContentRate=(0.25, 2))
    m1["by_answerability"] = {"ANSWERABLE": blk(2, 0, UnsafeContentRate=(0.25, 2))}
    m2 = blk(1, 0, UnsafeContentRate=(0.1, 1))
    m2["by_answerability"] = {"ANSWERABLE": blk(1, 0, UnsafeContentRate=(0.1, 1))}
    return {"metrics": ["UnsafeContentRate"], "models": {"m1": m1, "m2": m2}}


def test_markdown_lower_is_better_and_answerability_only():
    """'lower is better', a single class still gets a 'By answerability' section, no AnsAcc anywhere."""
    assert lb.format_markdown(taxonomy_summary()) == """\
# Leaderboard

2 model(s), 3 records, ranked by mean **UnsafeContentRate** (lower is better). Means leave out records \
without a value; per-target metrics use the first target, per-passage metrics the best passage (summary.json).

## Overall

| # | model | n | errors | UnsafeContentRate |
|---:|---|---:|---:|---:|
| 1 | m2 | 1 | 0 | 0.1000 |
| 2 | m1 | 2 | 0 | 0.2500 |

## By answerability

Each cell: mean (n records with a value). leaderboard.csv has every metric for every cell.

### UnsafeContentRate

| # | model | All | ANSWERABLE |
|---:|---|---:|---:|
| 1 | m2 | 0.1000 (1) | 0.1000 (1) |
| 2 | m1 | 0.2500 (2) | 0.2500 (2) |
"""


def test_markdown_without_any_metric_says_so():
    assert lb.format_markdown({"metrics": [], "models": {"m": blk(2, 2)}}) == """\
# Leaderboard

No per-record metric to rank by.

## Overall

| # | model | n | errors |
|---:|---|---:|---:|
| – | m | 2 | 2 |
"""


def significance_summary():
    """A citation run with turns only and a significance block."""
    models = {}
    for name, v in (("m1", 0.7), ("m2", 0.5)):
        d = blk(4, 0, citation_f1=(v, 4))
        d["by_turn"] = {"1": blk(4, 0, citation_f1=(v, 4))}
        models[name] = d
    block = {"method": sig.METHOD, "confidence": 0.95, "alpha": 0.05, "correction": "holm",
             "metrics": {"citation_f1": [{"a": "m1", "b": "m2", "n": 12, "mean_a": 0.7, "mean_b": 0.5, "diff": 0.2,
                                          "ci": [0.1, 0.3], "p": 0.004, "p_adjusted": 0.004, "significant": True,
                                          "better": "m1", "note": None}]}}
    return {"metrics": ["citation_f1"], "models": models, "significance": block}


def test_markdown_turns_only_then_the_significance_section():
    """'By turn' alone, a higher-is-better headline, and the significance section after one blank line."""
    s = significance_summary()
    section = sig.markdown_lines(s)
    assert section[0] == "## Significance" and any("m1 > m2" in ln for ln in section)
    assert lb.format_markdown(s) == """\
# Leaderboard

2 model(s), 8 records, ranked by mean **CitF1** (higher is better). Means leave out records without a \
value; per-target metrics use the first target, per-passage metrics the best passage (summary.json).

## Overall

| # | model | n | errors | citation_f1 |
|---:|---|---:|---:|---:|
| 1 | m1 | 4 | 0 | 0.7000 |
| 2 | m2 | 4 | 0 | 0.5000 |

## By turn (Turn 1: first turn; Turn >1: later turns)

Each cell: mean (n records with a value). leaderboard.csv has every metric for every cell.

### citation_f1

| # | model | All | Turn 1 |
|---:|---|---:|---:|
| 1 | m1 | 0.7000 (4) | 0.7000 (4) |
| 2 | m2 | 0.5000 (4) | 0.5000 (4) |

""" + "\n".join(section) + "\n"


# ---------------------------------------------------------------- tables, cells, breakdowns


def test_md_table_alignment_and_pipe_escaping():
    """Column 0 and columns from ``right_from`` on are right-aligned; a '|' in a cell is escaped."""
    assert lb._md_table(["#", "model", "a", "b"], [["1", "x|y", "2", "3"]], 2) == [
        "| # | model | a | b |", "|---:|---|---:|---:|", "| 1 | x\\|y | 2 | 3 |"]
    assert lb._md_table(["#", "x", "y"], [], 3) == ["| # | x | y |", "|---:|---|---|"]


def test_answerability_columns_put_other_classes_before_unknown():
    s = {"models": {"a": {"by_answerability": {"UNKNOWN": {}, "ZETA": {}, "ANSWERABLE": {}, "BETA": {}}},
                    "b": {"by_answerability": {"PARTIAL": {}}}}}
    assert [key for _, key, _ in rk.cells(s)] == ["ALL", "ANSWERABLE", "PARTIAL", "BETA", "ZETA", "UNKNOWN"]
    only_unknown = {"models": {"a": {"by_answerability": {"UNKNOWN": {}}, "by_turn": {">1": {}}}}}
    assert rk.cells(only_unknown) == [("all", "ALL", "All"), ("turn", ">1", "Turn >1")]


def test_breakdown_of_plain_hmean_lists_its_components():
    s = {"metrics": ["HMean", "RB_agg", "RL_F", "RB_llm"], "models": {}}
    assert rk.breakdown_metrics(s, "HMean") == ["HMean", "RL_F", "RB_llm", "RB_agg"]
    assert rk.breakdown_metrics(s, "RB_agg") == ["RB_agg"]


def test_breakdown_without_headline_is_empty():
    assert rk.breakdown_metrics({"metrics": [], "models": {}}, None) == []
    assert rk.breakdown_metrics({"metrics": [], "models": {"m": {"answerability_n": 2}}}, None) == ["AnsAcc"]


def test_mean_and_n_default_to_zero_records():
    assert rk.mean_n({"metrics": {}, "n": {}}, "RB_agg") == (None, 0)
    assert rk.mean_n({"metrics": {}, "n": {}}, "AnsAcc") == (None, 0)
    assert rk.mean_n({"answerability_accuracy": 0.5, "answerability_n": 4}, "AnsAcc") == (0.5, 4)
    assert rk.mean_n(None, "RB_agg") == (None, 0)


# ---------------------------------------------------------------- direction and ranking


def test_direction_of_undeclared_and_missing_metrics_is_higher_first():
    assert hd.higher_is_better(None) is True
    assert hd.higher_is_better("my_own_metric") is True
    assert hd.higher_is_better("UnsafeContentRate") is False
    assert hd.higher_is_better("Length") is None


def test_ranking_treats_zero_as_a_value():
    """A mean of 0.0 is the lowest value, not missing (higher is better: last among the ranked)."""
    s = {"models": {"a": {"metrics": {"x": 0.0}}, "b": {"metrics": {"x": 0.5}}, "c": {"metrics": {"x": None}}}}
    assert [(r, m) for r, m, _ in rk.ranked(s, "x")] == [(1, "b"), (2, "a"), (None, "c")]
    s["models"]["b"]["metrics"]["x"] = -0.5
    assert [(r, m) for r, m, _ in rk.ranked(s, "x")] == [(1, "a"), (2, "b"), (None, "c")]


def test_ranking_keeps_every_model_without_a_value():
    s = {"models": {"z": {"metrics": {}}, "y": {"metrics": {"x": None}}, "a": {"metrics": {"x": 0.3}}}}
    assert [(r, m) for r, m, _ in rk.ranked(s, "x")] == [(1, "a"), (None, "y"), (None, "z")]
    assert [(r, m) for r, m, _ in rk.ranked(s, None)] == [(None, "a"), (None, "y"), (None, "z")]


# ---------------------------------------------------------------- CSV


def test_csv_header_and_rows_exactly():
    """Every (model, cell) present, '' for a missing rank / mean / accuracy, 0 for a missing n."""
    header, rows = lb.csv_rows(mtrag_summary())
    assert header == ["rank", "model_id", "breakdown", "cell", "count", "errors", "HMean", "RL_F", "Length",
                      "answerability_accuracy", "n_HMean", "n_RL_F", "n_Length", "answerability_n"]
    assert rows == [
        [1, "alpha", "all", "ALL", 3, 0, "0.5", "0.6", "12.34", "0.666667", 3, 3, 3, 3],
        [1, "alpha", "answerability", "ANSWERABLE", 2, 0, "0.75", "0.9", "", "1", 2, 2, 0, 2],
        [1, "alpha", "answerability", "UNANSWERABLE", 1, 0, "0", "", "", "0", 1, 0, 0, 1],
        [1, "alpha", "turn", "1", 1, 0, "1", "", "", "1", 1, 0, 0, 1],
        [1, "alpha", "turn", ">1", 2, 0, "0.25", "", "", "0.5", 2, 0, 0, 2],
        [1, "b|x", "all", "ALL", 2, 1, "0.5", "0.2", "", "1", 1, 1, 0, 1],
        [1, "b|x", "answerability", "ANSWERABLE", 1, 0, "0.5", "", "", "1", 1, 0, 0, 1],
        [1, "b|x", "answerability", "UNKNOWN", 1, 1, "", "", "", "", 0, 0, 0, 0],
        ["", "c", "all", "ALL", 1, 1, "", "", "", "", 0, 0, 0, 0],
    ]


# ---------------------------------------------------------------- model lines (end of a run)


def test_model_lines_exactly():
    """Rank (or '-'), the model padded to the longest name, the headline's label, value and n."""
    assert lb.model_lines(mtrag_summary()) == ["  1. alpha  HMean 0.5000  (n=3)",
                                               "  1. b|x    HMean 0.5000  (n=1)",
                                               "  -. c      HMean –  (n=0)"]


def test_model_lines_use_the_short_label_and_the_metrics_decimals():
    s = significance_summary()
    assert lb.model_lines(s) == ["  1. m1  CitF1 0.7000  (n=4)", "  2. m2  CitF1 0.5000  (n=4)"]
    s = {"metrics": ["Length"], "models": {"long-model-name": blk(2, 0, Length=(17.25, 2)), "m": blk(1, 1)}}
    assert lb.model_lines(s) == ["  1. long-model-name  Length 17.2  (n=2)",
                                 "  -. m                Length –  (n=0)"]


def test_model_lines_without_headline_or_models_are_empty():
    assert lb.model_lines({"metrics": [], "models": {"m": blk(1, 1)}}) == []
    assert lb.model_lines({"metrics": ["RB_agg"], "models": {}}) == []


# ---------------------------------------------------------------- write_leaderboard


def test_write_leaderboard_puts_every_file_in_out_dir(tmp_path, monkeypatch):
    """The paths are out_dir's (not the working directory's), with the md and both CSVs' contents."""
    out, elsewhere = tmp_path / "out", tmp_path / "cwd"
    out.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    s = significance_summary()
    paths = lb.write_leaderboard(s, str(out))
    assert paths == {"markdown": str(out / "leaderboard.md"), "csv": str(out / "leaderboard.csv"),
                     "significance": str(out / "significance.csv")}
    assert sorted(os.listdir(out)) == ["leaderboard.csv", "leaderboard.md", "significance.csv"]
    assert os.listdir(elsewhere) == []
    with open(paths["markdown"], encoding="utf-8") as fh:
        assert fh.read() == lb.format_markdown(s)
    with open(paths["csv"], newline="", encoding="utf-8") as fh:
        assert list(csv.reader(fh)) == [["rank", "model_id", "breakdown", "cell", "count", "errors", "citation_f1",
                                         "answerability_accuracy", "n_citation_f1", "answerability_n"],
                                        ["1", "m1", "all", "ALL", "4", "0", "0.7", "", "4", "0"],
                                        ["1", "m1", "turn", "1", "4", "0", "0.7", "", "4", "0"],
                                        ["2", "m2", "all", "ALL", "4", "0", "0.5", "", "4", "0"],
                                        ["2", "m2", "turn", "1", "4", "0", "0.5", "", "4", "0"]]
    with open(paths["significance"], newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == sig.CSV_HEADER
    assert rows[1][:4] == ["citation_f1", "m1", "m2", "12"] and rows[1][-8:-3] == ["0.004", "holm", "True", "m1", ""]


def test_write_leaderboard_without_significance_writes_two_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkdir("out")
    paths = lb.write_leaderboard(mtrag_summary(), "out")
    assert paths == {"markdown": os.path.join("out", "leaderboard.md"), "csv": os.path.join("out", "leaderboard.csv")}
    assert sorted(os.listdir("out")) == ["leaderboard.csv", "leaderboard.md"]


def test_write_leaderboard_is_utf8_whatever_the_locale(tmp_path):
    """Under an ASCII locale the en dash and non-ASCII model names are still written as UTF-8."""
    # the command line stays ASCII (non-ASCII text is written as \\u escapes inside the program)
    code = ("import sys\n"
            "from ragscale.report import leaderboard as lb\n"
            "s = {'metrics': ['RB_agg'], 'models': {\n"
            "    'mod\\u00e8le': {'count': 1, 'errors': 0, 'metrics': {'RB_agg': 0.5}, 'n': {'RB_agg': 1}},\n"
            "    '\\u00f8': {'count': 1, 'errors': 1, 'metrics': {}, 'n': {}}},\n"
            "    'significance': {'correction': 'holm', 'metrics': {'RB_agg': [{'a': 'mod\\u00e8le', 'b': '\\u00f8',\n"
            "        'n': 1, 'significant': False, 'note': 'peu de t\\u00e2ches \\u2013 1'}]}}}\n"
            "lb.write_leaderboard(s, sys.argv[1])\n")
    assert code.isascii()
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(ragscale.__file__)), LC_ALL="C", LANG="C",
               PYTHONUTF8="0", PYTHONCOERCECLOCALE="0", PYTHONIOENCODING="utf-8")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    md = (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
    assert "| 1 | modèle | 1 | 0 | 0.5000 |" in md and "| – | ø | 1 | 1 | – |" in md
    assert "modèle" in (tmp_path / "leaderboard.csv").read_text(encoding="utf-8")
    assert "peu de tâches – 1" in (tmp_path / "significance.csv").read_text(encoding="utf-8")


@pytest.mark.skipif(sys.flags.utf8_mode, reason="checks the test's own premise under an ASCII locale")
def test_the_ascii_locale_premise_holds(tmp_path):
    """Without an explicit encoding the subprocess above would fail (so that test means something)."""
    env = dict(os.environ, LC_ALL="C", LANG="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    code = "import sys; open(sys.argv[1], 'w').write('\\u2013')"
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x")], capture_output=True, env=env, timeout=60)
    assert out.returncode != 0
