"""The nugget judge's reference-protocol prompts (ragscale.judges.nuggets, ``judge.protocol=reference``):
open-rag-eval's ``AutoNuggetMetric`` requests (templates/orag_nuggets_{create,importance,assign}_v1.txt)
and its structured outputs, read as its OpenAI client reads them."""

from __future__ import annotations

from typing import Sequence

from ragscale.judges.templates import Markers, declare_markers
from ragscale.judges.base import JudgePrompt
from ragscale.judges.nugget_prompts import MAX_NUGGETS, NAME
from ragscale.judges.umbrela import OragOutput, reference_prompt
from ragscale.metrics.nuggets import ASSIGNMENT_SCORES, IMPORTANCES

REFERENCE_VERSION = "openrageval-autonugget-ref-v1"
NUGGETS_OUTPUT = OragOutput("Nuggets", "nuggets", many=True)
IMPORTANCE_OUTPUT = OragOutput("NuggetImportance", "importance", IMPORTANCES, "NuggetImportanceValues", many=True)
ASSIGNMENT_OUTPUT = OragOutput("NuggetAssignment", "assignment", tuple(ASSIGNMENT_SCORES), "NuggetAssignmentValues",
                               many=True)
declare_markers("orag_nuggets_create_v1", Markers(labels=("Search Query:", "Context:", "Initial Nugget List:",
                                                          "Initial Nugget List Length:", "Updated Nugget List:")))
declare_markers("orag_nuggets_importance_v1", Markers(labels=("Search Query:", "Nugget List:", "Labels:")))
declare_markers("orag_nuggets_assign_v1", Markers(labels=("Search Query:", "Passage:", "Nugget List:", "Labels:")))
_CREATE_TAIL = "\n        "  # _NUGGET_CREATION_PROMPT's source string ends with 8 spaces, the others with 4


def render_create_reference(query: str, passages: Sequence[str], nuggets: Sequence[str]) -> JudgePrompt:
    """One creation iteration as open-rag-eval sends it (``passages``: those graded >= 1)."""
    context = "\n".join(f"[{i + 1}] {p}" for i, p in enumerate(passages))
    values = {"max_nuggets": str(MAX_NUGGETS), "query": query, "context": context,
              "initial_nuggets": str(list(nuggets)), "initial_nuggets_length": str(len(nuggets))}
    return reference_prompt(NAME, REFERENCE_VERSION, "orag_nuggets_create_v1", values, NUGGETS_OUTPUT,
                            tail=_CREATE_TAIL)


def render_importance_reference(query: str, nuggets: Sequence[str]) -> JudgePrompt:
    """One importance batch as open-rag-eval sends it."""
    values = {"query": query, "len_nuggets": str(len(nuggets)), "nuggets": str(list(nuggets))}
    return reference_prompt(NAME, REFERENCE_VERSION, "orag_nuggets_importance_v1", values, IMPORTANCE_OUTPUT)


def render_assign_reference(query: str, answer: str, nuggets: Sequence[str]) -> JudgePrompt:
    """One assignment batch as open-rag-eval sends it (``answer``: the answer parts' texts joined by spaces)."""
    values = {"query": query, "len_nuggets": str(len(nuggets)), "nuggets": str(list(nuggets)),
              "generated_passage": answer}
    return reference_prompt(NAME, REFERENCE_VERSION, "orag_nuggets_assign_v1", values, ASSIGNMENT_OUTPUT)


def parse_nuggets_reference(raw: str) -> list[str]:
    """``Nuggets.nuggets`` as open-rag-eval reads it: any list of strings, kept as it is (may be empty)."""
    return NUGGETS_OUTPUT.parse(NAME, raw)


def parse_importance_reference(raw: str) -> list[str]:
    """``NuggetImportance.importance``: a list of "vital"/"okay" of any length."""
    return IMPORTANCE_OUTPUT.parse(NAME, raw)


def parse_assignment_reference(raw: str) -> list[str]:
    """``NuggetAssignment.assignment``: a list of "support"/"partial_support"/"not_support" of any length."""
    return ASSIGNMENT_OUTPUT.parse(NAME, raw)
