"""Judges on records that carry one question and no MT-RAG conversation (ragas' layout, a
mapped table, open-rag-eval's CSV): the question reaches every prompt that shows the user's
inquiry, in each protocol. (Before, the IDK, RADBench and faithfulness judges rendered such a
record with an empty inquiry: they read only MT-RAG's ``input`` turns.)"""

from __future__ import annotations

import json

import pytest

from ragscale.judges import faithfulness, idk, radbench
from ragscale.judges.judge_input import judge_input
from ragscale.record import read_record

QUESTION = "Which surcharge applies to irrigation accounts in a Stage 2 drought?"


def _row(obj: dict, columns: dict | None = None) -> dict:
    row = read_record(json.dumps(obj), key="k", model_id="m", task_id=None, source_file="f", source_line=1,
                      need_targets=False, columns=columns).to_row()
    assert row["error"] is None, row["error"]
    return row


def _first_prompt(run) -> str:  # noqa: ANN001 - a JudgeRun generator
    step = next(run)
    prompt = step[0] if isinstance(step, tuple) else step[0][0]
    return "\n".join(m["content"] for m in prompt.messages)


RAGAS = {"user_input": QUESTION, "response": "The Drought Surcharge.", "reference": "The Drought Surcharge.",
         "retrieved_contexts": ["Irrigation accounts pay the Drought Surcharge in a Stage 2 drought."]}
MAPPED = {"query": QUESTION, "generated": "The Drought Surcharge.", "gold": "The Drought Surcharge.",
          "docs": ["Irrigation accounts pay the Drought Surcharge in a Stage 2 drought."]}
MAP = {"question": "query", "answer": "generated", "reference": "gold", "contexts": "docs"}


@pytest.mark.parametrize("protocol", ["constrained", "reference"])
@pytest.mark.parametrize("obj, columns", [(RAGAS, None), (MAPPED, MAP)], ids=["ragas", "mapped"])
def test_judges_see_the_question_of_a_single_question_record(obj, columns, protocol):
    row = _row(obj, columns)
    inp = judge_input(row)
    assert QUESTION in _first_prompt(idk.JUDGE_SPECS[0].start(inp, protocol=protocol))
    assert QUESTION in _first_prompt(radbench.JUDGE_SPECS[0].start(inp, protocol=protocol))
    assert QUESTION in _first_prompt(faithfulness.JUDGE_SPECS[0].start(inp, protocol=protocol))


def test_faithfulness_asks_ragas_question_as_ragas_does():
    """ragas' user_input is the question itself (no ``user:`` prefix) for a single-turn sample."""
    row = _row(RAGAS)
    prompt = _first_prompt(faithfulness.JUDGE_SPECS[0].start(judge_input(row), protocol="reference"))
    assert f"user: {QUESTION}" not in prompt and QUESTION in prompt


def test_mtrag_conversations_are_unchanged():
    """An MT-RAG record's judges still read its whole conversation."""
    turns = [{"speaker": "user", "text": "First question?"}, {"speaker": "agent", "text": "An answer."},
             {"speaker": "user", "text": QUESTION}]
    row = _row({"input": turns, "predictions": [{"text": "The Drought Surcharge."}],
                "targets": [{"text": "The Drought Surcharge."}], "contexts": [{"text": "Irrigation accounts pay it."}]})
    prompt = _first_prompt(idk.JUDGE_SPECS[0].start(judge_input(row)))
    assert "user: First question?\nagent: An answer.\nuser: " + QUESTION in prompt
