"""The judges' prompt renderers and output parsers that mutation testing found unpinned (make
mutate): the JudgePrompt each renderer builds (judge name, version, role, schema, token budget),
the exact parse errors (judge name and reason shown to users), the scores and details parsed
from hand-written model outputs, and the record-level judge runs (which fields they read, when a
metric is null and why). No LLM: every run is driven by ``drive`` with scripted outputs."""

from __future__ import annotations

import json

import pytest

from ragscale.judges import (citation, factual_consistency, faithfulness, idk, no_answer, radbench, umbrela,
                             underspecified)
from ragscale.judges.base import JudgeParseError, JudgeResult, Undefined, drive
from judge_inputs import judge_input_of


def parse_error(parse, raw):
    """The JudgeParseError ``parse(raw)`` raises."""
    with pytest.raises(JudgeParseError) as e:
        parse(raw)
    return e.value


def scripted(*outputs):
    """A respond() that returns the outputs in order and records the prompts it was asked."""
    asked = []
    it = iter(outputs)

    def respond(prompt):
        asked.append(prompt)
        return next(it)

    respond.asked = asked
    return respond


def only_user(prompt) -> str:
    """The content of a single-user-message prompt."""
    assert [m["role"] for m in prompt.messages] == ["user"]
    return prompt.messages[0]["content"]


# --- parse errors: judge name and reason -----------------------------------------------------------


@pytest.mark.parametrize("parse, judge", [
    (citation.parse, "citation"), (factual_consistency.parse, "factual_consistency"),
    (faithfulness.parse_statements, "ragas_faithfulness"), (faithfulness.parse_verdicts, "ragas_faithfulness"),
    (idk.parse, "idk"), (no_answer.parse, "no_answer"), (radbench.parse, "radbench"), (umbrela.parse, "umbrela"),
    (underspecified.parse, "underspecified"),
])
def test_non_json_output_error_names_the_judge(parse, judge):
    """Output that is not JSON raises a JudgeParseError naming the judge."""
    e = parse_error(parse, "not json")
    assert (e.judge, e.reason, e.raw) == (judge, "output is not JSON", "not json")
    assert str(e) == f"{judge}: output is not JSON"


@pytest.mark.parametrize("parse, raw, message", [
    (citation.parse, '{"support": "maybe"}',
     "citation: support 'maybe' is not full_support, partial_support or no_support"),
    (factual_consistency.parse, '{"reason": "r", "label": "sort of"}',
     "factual_consistency: label 'sort of' is not one of consistent, partially_consistent, inconsistent"),
    (faithfulness.parse_statements, '{"statements": ["a", 1]}',
     "ragas_faithfulness: statements is not a list of strings"),
    (faithfulness.parse_verdicts, '{"statements": "all true"}', "ragas_faithfulness: statements is not a list"),
    (faithfulness.parse_verdicts, '{"statements": [{"statement": "s", "reason": "r", "verdict": true}]}',
     "ragas_faithfulness: verdict entry {'statement': 's', 'reason': 'r', 'verdict': True} lacks statement, "
     "reason or an integer verdict"),
    (idk.parse, '{"label": "maybe"}', "idk: label 'maybe' is not one of yes, partial, no"),
    (no_answer.parse, '{"answered": "maybe"}', "no_answer: answered 'maybe' is not yes or no"),
    (radbench.parse, '{"explanation": "e", "rating": "11"}', "radbench: rating '11' is not one of 1..10"),
    (umbrela.parse, '{"score": "4"}', "umbrela: score '4' is not one of 0, 1, 2, 3"),
    (underspecified.parse, '{"decision": "maybe", "explanation": "e"}',
     "underspecified: decision 'maybe' is not yes or no"),
])
def test_unusable_label_error_message(parse, raw, message):
    """A label outside the schema raises with the exact user-facing message and keeps the raw text."""
    e = parse_error(parse, raw)
    assert str(e) == message
    assert e.judge == message.split(":")[0] and e.raw == raw


def test_parse_verdicts_non_object_entry_is_a_parse_error():
    """A verdict entry that is not an object is a JudgeParseError, not a crash."""
    e = parse_error(faithfulness.parse_verdicts, '{"statements": [1]}')
    assert e.reason == "verdict entry 1 lacks statement, reason or an integer verdict"


# --- parsing hand-written outputs -------------------------------------------------------------------


@pytest.mark.parametrize("raw, expected", [
    ('{"reason": "all supported", "label": "consistent"}', (1.0, "all supported")),
    ('{"reason": "some", "label": " partially_consistent "}', (0.5, "some")),
    ('{"reason": "contradicted", "label": "inconsistent"}', (0.0, "contradicted")),
    ('{"label": "consistent"}', (1.0, "")),
])
def test_factual_consistency_parse(raw, expected):
    """The label gives the score; the reason comes back as is ("" when missing)."""
    assert factual_consistency.parse(raw) == expected


def test_faithfulness_parse_outputs():
    """Statements and verdicts come back as lists; the score is the share of truthy verdicts."""
    assert faithfulness.parse_statements('{"statements": ["a", "b"]}') == ["a", "b"]
    raw = json.dumps({"statements": [{"statement": "a", "reason": "r", "verdict": 1},
                                     {"statement": "b", "reason": "r", "verdict": 0}]})
    assert faithfulness.parse_verdicts(raw) == [1, 0]
    assert faithfulness.score([1, 0, 1, 1]) == 0.75
    assert faithfulness.score([]) == Undefined("the verdict list is empty")


# --- rendered prompts: name, version, role, schema, token budget -----------------------------------


@pytest.mark.parametrize("prompt, judge, version, schema, max_tokens", [
    (lambda: citation.render("s", "c"), "citation", "open-rag-eval-citation-v1", citation.SCHEMA, 32),
    (lambda: no_answer.render("q", "a"), "no_answer", "open-rag-eval-no-answer-v1", no_answer.SCHEMA, 32),
    (lambda: umbrela.render("q", "p"), "umbrela", "open-rag-eval-umbrela-v1", umbrela.SCHEMA, 32),
    (lambda: factual_consistency.render(["p"], "a"), "factual_consistency", "ragscale-factual-consistency-v1",
     factual_consistency.SCHEMA, 96),
    (lambda: idk.render([{"speaker": "user", "text": "q"}], "r"), "idk", "mtrag-idk-v1", idk.SCHEMA, 16),
    (lambda: radbench.render([{"speaker": "user", "text": "q"}], "ref", ["d"], "r"), "radbench",
     "mtrag-radbench-v1", radbench.SCHEMA, 160),
    (lambda: underspecified.render("r"), "underspecified", "mtrag-underspecified-v1", underspecified.SCHEMA, 160),
    (lambda: faithfulness.statements_prompt("q", "a"), "ragas_faithfulness", "ragas-0.4.3-faithfulness-v1",
     faithfulness.STATEMENTS_SCHEMA, 1024),
])
def test_prompt_identity_and_budget(prompt, judge, version, schema, max_tokens):
    """Each renderer names its judge and prompt version, constrains with its schema, caps the tokens."""
    p = prompt()
    assert (p.judge, p.version, p.max_tokens) == (judge, version, max_tokens)
    assert p.schema == schema and p.schema is not None


@pytest.mark.parametrize("render", [
    lambda: factual_consistency.render(["p"], "a"),
    lambda: idk.render([{"speaker": "user", "text": "q"}], "r"),
    lambda: radbench.render([{"speaker": "user", "text": "q"}], "ref", ["d"], "r"),
    lambda: underspecified.render("r"),
    lambda: faithfulness.statements_prompt("q", "a"),
    lambda: faithfulness.verdicts_prompt("c", ["s"]),
])
def test_single_user_message_prompts(render):
    """The MT-RAG / ragas / ragscale prompts are one message with role "user"."""
    p = render()
    assert p.messages == ({"role": "user", "content": p.messages[0]["content"]},)


def test_verdicts_prompt_budget_and_schema():
    """The NLI prompt budgets 64 + 200 tokens per statement and asks for exactly one verdict each."""
    p = faithfulness.verdicts_prompt("ctx", ["a", "b", "c"])
    assert (p.judge, p.version, p.max_tokens) == ("ragas_faithfulness", "ragas-0.4.3-faithfulness-v1", 664)
    item = {"type": "object",
            "properties": {"statement": {"type": "string", "maxLength": 400},
                           "reason": {"type": "string", "maxLength": 200},
                           "verdict": {"type": "integer", "enum": [0, 1]}},
            "required": ["statement", "reason", "verdict"]}
    assert p.schema == {"type": "object",
                        "properties": {"statements": {"type": "array", "items": item, "minItems": 3, "maxItems": 3}},
                        "required": ["statements"]}
    assert faithfulness.verdicts_prompt("ctx", ["a"]).max_tokens == 264


def test_factual_consistency_prompt_joins_passages_and_truncates():
    """Passages are joined by one space, truncated to max_chars, and the answer comes last."""
    text = only_user(factual_consistency.render(["alpha", "beta"], "the answer"))
    assert "<passages>\nalpha beta\n</passages>\n\n<answer>\nthe answer\n</answer>\n" in text
    assert text.endswith("</answer>\n")
    short = only_user(factual_consistency.render(["abcdef", "ghi"], "x", max_chars=8))
    assert "<passages>\nabcdef g\n</passages>" in short


def test_radbench_without_turns_has_empty_question():
    """A record without conversation turns renders empty previous-conversation and question sections."""
    text = only_user(radbench.render([], "ref", ["doc"], "resp"))
    assert "[The Start of Current Turn Question]\n\n[The End of Current Turn Question]" in text
    assert "[The Start of Previous Conversation]\n\n[The End of Previous Conversation]" in text


# --- record-level runs ------------------------------------------------------------------------------


TURNS = [{"speaker": "user", "text": "Who wrote Hamlet?"}, {"speaker": "agent", "text": "Shakespeare."},
         {"speaker": "user", "text": "When?"}]


def test_factual_consistency_start_scores_and_keeps_reason():
    """One prompt over the passages and the answer without citation markers; score and reason come back."""
    respond = scripted('{"reason": "supported", "label": "partially_consistent"}')
    run = factual_consistency.start(judge_input_of(passages=["P one.", "P two."], prediction="It is so [1]."))
    res = drive(run, respond)
    assert isinstance(res, JudgeResult)
    assert res.metrics == {"factual_consistency_judge": 0.5} and res.details == {"reason": "supported"}
    text = only_user(respond.asked[0])
    assert "<passages>\nP one. P two.\n</passages>" in text and "<answer>\nIt is so\n</answer>" in text


@pytest.mark.parametrize("row, reason", [
    ({"passages": [], "prediction": "an answer"}, "no passages"),
    ({"passages": ["p"], "prediction": None}, "no generated answer"),
    ({"passages": ["p"], "prediction": "   "}, "no generated answer"),
])
def test_factual_consistency_start_undefined(row, reason):
    """No passages or no answer: null with that reason, nothing asked."""
    respond = scripted()
    assert drive(factual_consistency.start(judge_input_of(row=row)), respond) == Undefined(reason)
    assert respond.asked == []


def test_faithfulness_from_record_uses_the_conversation_as_question():
    """The statement prompt's question is the whole conversation as speaker lines; the score follows."""
    verdicts = {"statements": [{"statement": "s1", "reason": "r", "verdict": 1},
                               {"statement": "s2", "reason": "r", "verdict": 0}]}
    respond = scripted('{"statements": ["s1", "s2"]}', json.dumps(verdicts))
    run = faithfulness.from_record(judge_input_of({"input": TURNS}, prediction="In 1600.", passages=["c1", "c2"]))
    assert drive(run, respond) == 0.5
    first = only_user(respond.asked[0])
    question = json.dumps({"question": "user: Who wrote Hamlet?\nagent: Shakespeare.\nuser: When?",
                           "answer": "In 1600."}, indent=4)
    assert first.endswith("input: " + question + "\nOutput: ")
    assert '"context": "c1\\nc2"' in only_user(respond.asked[1])


def test_faithfulness_from_record_without_input():
    """A record without turns asks with an empty question."""
    respond = scripted('{"statements": []}')
    run = faithfulness.from_record(judge_input_of(row={"prediction": "a", "passages": ["c"]}))
    assert drive(run, respond) == Undefined("no statements could be extracted from the response")
    assert '"question": ""' in only_user(respond.asked[0])


def test_faithfulness_run_no_passages():
    """No passages: null with that reason, nothing asked."""
    assert drive(faithfulness.run("q", "a", []), scripted()) == Undefined("no passages to check the response against")


def test_idk_start_renders_conversation_and_response():
    """The IDK run asks about the record's conversation and its prediction, and scores the label."""
    respond = scripted('{"label": "partial"}')
    assert drive(idk._start(judge_input_of({"input": TURNS}, {"prediction": "I am not sure."})), respond) == 0.5
    text = only_user(respond.asked[0])
    assert text.endswith("[Inquiry]\nuser: Who wrote Hamlet?\nagent: Shakespeare.\nuser: When?\n\n"
                         "[Response]\nI am not sure.\n\n[Output]\n")
    assert (respond.asked[0].judge, respond.asked[0].max_tokens) == ("idk", 16)


def test_idk_start_without_input():
    """A record without turns renders an empty inquiry."""
    respond = scripted('{"label": "no"}')
    assert drive(idk._start(judge_input_of(row={"prediction": "resp"})), respond) == 0.0
    assert only_user(respond.asked[0]).endswith("[Inquiry]\n\n\n[Response]\nresp\n\n[Output]\n")


def test_radbench_start_reads_first_target_passages_and_prediction():
    """RADBench sees the conversation, the first reference, the passages and the prediction."""
    respond = scripted('{"explanation": "ok", "rating": "7"}')
    row = {"targets": ["first ref", "second ref"], "passages": ["doc A", "doc B"], "prediction": "the response"}
    assert drive(radbench._start(judge_input_of({"input": TURNS}, row)), respond) == 0.7
    text = only_user(respond.asked[0])
    assert "[The Start of Previous Conversation]\nuser: Who wrote Hamlet?\nagent: Shakespeare.\n[The End" in text
    assert "[The Start of Current Turn Question]\nWhen?\n[The End" in text
    assert "[The Start of Reference Answer]\nfirst ref\n[The End" in text
    assert "[The Start of Document]\ndoc A\n\ndoc B\n[The End" in text
    assert text.endswith("[The Start of Assistant's Answer]\nthe response\n[The End of Assistant's Answer]\n")


def test_radbench_start_without_input():
    """A record without turns still renders (empty question)."""
    respond = scripted('{"explanation": "ok", "rating": "10"}')
    row = {"targets": ["ref"], "passages": ["doc"], "prediction": "resp"}
    assert drive(radbench._start(judge_input_of(row=row)), respond) == 1.0
    assert "[The Start of Current Turn Question]\n\n[The End" in only_user(respond.asked[0])


def test_underspecified_start_renders_prediction():
    """The underspecified run asks about the prediction (last) and scores the decision."""
    respond = scripted('{"decision": "yes", "explanation": "asks back"}')
    assert drive(underspecified._start(judge_input_of(row={"prediction": "Which city do you mean?"})), respond) == 1.0
    assert only_user(respond.asked[0]).endswith("Response: \n    Which city do you mean?\n\n    ")


@pytest.mark.parametrize("status", ["NO_ANSWER", "missing"])
def test_no_answer_status_short_circuits(status):
    """An input marked as not answered is answered=0.0 without asking, with its source in the details."""
    respond = scripted()
    res = drive(no_answer._start(judge_input_of({"query": "q", "answer_status": status}, {"prediction": "x"})), respond)
    assert res.metrics == {"answered": 0.0}
    assert res.details == {"query_answered": "no", "source": f"input ({status})"}
    assert respond.asked == []


def test_no_answer_other_status_asks_the_judge():
    """Any other status asks the judge with the query and the answer text."""
    respond = scripted('{"answered": "yes"}')
    inp = judge_input_of({"query": "the query", "answer_status": "ok"}, prediction="An answer [1].")
    res = drive(no_answer._start(inp), respond)
    assert res.metrics == {"answered": 1.0} and res.details == {"query_answered": "yes"}
    assert "Query: the query\n" in respond.asked[0].messages[1]["content"]
    assert "Answer: An answer\n" in respond.asked[0].messages[1]["content"]


def test_no_answer_missing_prediction_is_undefined():
    """A row without a prediction is null, nothing asked."""
    respond = scripted()
    assert drive(no_answer.start(judge_input_of({"query": "q"}, {})), respond) == Undefined("no generated answer")
    assert respond.asked == []


def test_citation_without_judgeable_pairs_yields_no_round():
    """An answer whose citations point at no passage finishes without any round of prompts."""
    obj = {"query": "q", "passages": [{"id": "[1]", "text": "p"}]}
    run = citation.start(judge_input_of(obj, {"prediction": "Claim [7].", "passages": ["p"]}))
    with pytest.raises(StopIteration) as stop:
        next(run)
    res = stop.value.value
    assert res.metrics == {"citation_precision": 0.0, "citation_recall": 0.0, "citation_f1": 0.0}


def test_citation_failed_pair_details_keep_id():
    """A failed judgment is shown with its citation id, a null support and the failure reason."""
    obj = {"query": "q", "passages": [{"id": "[1]", "text": "p1"}, {"id": "[2]", "text": "p2"}]}
    respond = scripted('{"support": "full_support"}', "garbage")
    res = drive(citation.start(judge_input_of(obj, {"prediction": "A [1][2].", "passages": ["p1", "p2"]})), respond)
    assert res.metrics == {"citation_precision": None, "citation_recall": None, "citation_f1": None}
    assert res.details == {"parts": [{"text": "A", "citations": [
        {"id": "[1]", "support": "full_support"},
        {"id": "[2]", "support": None, "failed": "output is not JSON"}]}]}
