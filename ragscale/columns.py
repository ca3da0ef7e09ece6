"""The fields ragscale reads from a record, by their canonical names, and the column names
other tools use for them. ``column_map`` / ``columns.<field>=<name>`` name the user's own
column for a field; this table is the one definition the reader, the config schema, the input
check and docs/inputs.md use.
"""

from __future__ import annotations

# field -> what it is (docs/inputs.md shows this table)
FIELDS: dict[str, str] = {
    "question": "the user's question (a string)",
    "answer": "the evaluated answer (a string)",
    "contexts": "the retrieved passages (a list of strings or of {text} objects; one string is one passage)",
    "reference": "the reference answer (a string, or a list of strings for several references)",
    "model_id": "the model that answered (a string; default: the file's or the data's name)",
    "task_id": "the task (question) id, shared by every model's answer to it",
    "answerability": "MT-RAG's answerability label (ANSWERABLE, UNANSWERABLE, PARTIAL, ...)",
}

# field -> names other tools and datasets use for it, most common first (for the suggestion
# a refused input gets: "column_map={'answer': 'generated'}")
SYNONYMS: dict[str, tuple[str, ...]] = {
    "question": ("question", "user_input", "query", "prompt", "input", "instruction", "q"),
    "answer": ("answer", "response", "generated_answer", "generated", "generation", "prediction", "output",
               "completion", "model_answer", "pred", "a"),
    "contexts": ("contexts", "retrieved_contexts", "context", "passages", "documents", "docs", "retrieved",
                 "chunks", "sources", "evidence"),
    "reference": ("reference", "ground_truth", "gold", "gold_answer", "expected", "expected_answer", "target",
                  "targets", "label", "answer_gt", "ideal"),
    "model_id": ("model_id", "model", "system", "run", "model_name"),
    "task_id": ("task_id", "question_id", "query_id", "qid", "id", "sample_id"),
    "answerability": ("answerability",),
}
