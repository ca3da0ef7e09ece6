"""The taxonomy's label annotators (ragscale.judges.taxonomy, issue 37), driven with a scripted
engine: the input's labels win and the judge is asked only for what is missing, each label's source
is recorded, a chunk or a record whose judge output failed keeps its input labels and says so, the
parser refuses anything but 0/1, and malformed input labels are the record's input error."""

from __future__ import annotations

import json

import pytest

from ragscale.errors import RecordError
from ragscale.judges import taxonomy as tx
from ragscale.judges.base import JudgeParseError, JudgeResult, Undefined, drive
from judge_inputs import judge_input_of
from ragscale.metrics.taxonomy import ANSWER_LABELS, CHUNK_LABELS, GENERATION_LABELS


def engine(answers: dict[str, dict | str]):
    """A scripted judge: the first answer whose key is in the prompt's text; the prompts asked."""
    asked = []

    def respond(prompt):
        asked.append(prompt)
        for key, out in answers.items():
            if key in prompt.messages[-1]["content"]:
                return out if isinstance(out, str) else json.dumps(out)
        raise AssertionError("unexpected prompt")
    return respond, asked


def test_retrieval_asks_only_for_the_chunks_missing_labels():
    obj = {"query": "q?", "labels": {"chunks": [dict.fromkeys(CHUNK_LABELS, 1), {"misleading": 0}, {"misleading": 1}]}}
    row = {"passages": ["c0", "c1", "c2-unparsable", "c3", "c4", "c5"]}
    respond, asked = engine({"c1": {"topically_relevant": 1, "evidence_sufficient": 0, "misleading": 1},
                             "c2-unparsable": "no json", "c3": dict.fromkeys(CHUNK_LABELS, 0),
                             "c4": dict.fromkeys(CHUNK_LABELS, 1)})
    res = drive(tx.retrieval(judge_input_of(obj, row), k=5), respond)
    assert isinstance(res, JudgeResult) and len(asked) == 4  # c0 fully labelled; c5 beyond K
    d = res.details
    assert d["k"] == 5 and d["failed_chunks"] == [2] and "warning" not in d
    assert d["chunks"][1] == {"misleading": 0, "topically_relevant": 1, "evidence_sufficient": 0}  # the input's 0 kept
    assert d["sources"][1] == {"misleading": "input", "topically_relevant": "judge", "evidence_sufficient": "judge"}
    assert d["chunks"][2] == {"misleading": 1} and d["sources"][2] == {"misleading": "input"}
    assert d["sources"][0] == dict.fromkeys(CHUNK_LABELS, "input") and d["sources"][3] == dict.fromkeys(CHUNK_LABELS, "judge")
    assert all(p.judge == tx.RETRIEVAL and p.version == tx.VERSION for p in asked)
    assert asked[0].max_tokens == 16 * len(CHUNK_LABELS) + 16 and asked[0].schema["required"] == list(CHUNK_LABELS)


def test_retrieval_edges():
    full = dict.fromkeys(CHUNK_LABELS, 1)
    res = drive(tx.retrieval(judge_input_of({"labels": {"chunks": [full] * 3}}, passages=["a"]), k=None), engine({})[0])
    assert res.details["warning"] == "2 input chunk label(s) beyond the 1 retrieved chunks ignored"
    assert res.details["k"] == 1 and "failed_chunks" not in res.details
    none = drive(tx.retrieval(judge_input_of(row={"passages": []})), engine({})[0])
    assert none == Undefined("no retrieved chunks: the retrieval metrics are undefined")
    every = drive(tx.retrieval(judge_input_of({"labels": {"chunks": [full] * 7}}, passages=list("abcdefg")), k=None),
                  engine({})[0])
    assert every.details["k"] == 7


@pytest.mark.parametrize("family, labels, start", [(tx.GROUNDING, ANSWER_LABELS, tx.grounding),
                                                    (tx.GENERATION, GENERATION_LABELS, tx.generation)])
def test_record_families(family, labels, start):
    given = {labels[0]: 1}
    respond, asked = engine({"<answer": {lab: 0 for lab in labels}})
    res = drive(start(judge_input_of({"query": "q?", "labels": given}, prediction="the answer", passages=["p1", "p2"])),
                respond)
    assert len(asked) == 1 and asked[0].judge == family
    assert res.details["labels"] == {labels[0]: 1, **{lab: 0 for lab in labels[1:]}}
    assert res.details["sources"] == {labels[0]: "input", **{lab: "judge" for lab in labels[1:]}}
    # every label in the input: no prompt
    respond, asked = engine({})
    res = drive(start(judge_input_of({"labels": dict.fromkeys(labels, 1)}, {"prediction": "x"})), respond)
    assert not asked and res.details["sources"] == dict.fromkeys(labels, "input")
    # no answer and labels missing: undefined, nothing asked
    assert drive(start(judge_input_of({"labels": given}, prediction="  ")), engine({})[0]) == Undefined(tx.NO_ANSWER)
    # a judge output that does not parse: the input's labels stay, the failure is said
    respond, _ = engine({"<answer": "not json"})
    res = drive(start(judge_input_of({"labels": given}, {"prediction": "x"})), respond)
    assert res.details["labels"] == given and res.details["failed"] == "output is not JSON"


def test_grounding_details():
    labels = dict.fromkeys(ANSWER_LABELS, 1) | {"source_cited": 0}
    res = drive(tx.grounding(judge_input_of({"labels": labels}, prediction="x", passages=list("abcdefg"))),
                engine({})[0])
    assert res.details["k"] == tx.DEFAULT_K
    assert res.details["undefined"] == {"ConditionalFabricationRate": "nothing is cited (source_cited = 0)"}
    cited = drive(tx.grounding(judge_input_of({"labels": dict.fromkeys(ANSWER_LABELS, 1)}, prediction="x")),
                  engine({})[0])
    assert "undefined" not in cited.details and cited.details["k"] == 0


def test_prompts():
    p = tx.answer_prompt("q", [], "a")
    assert "(no context was retrieved)" in p.messages[0]["content"]
    text = tx.answer_prompt("q", ["first", "second"], "a").messages[0]["content"]
    assert "[1] first\n[2] second" in text
    assert tx.generation_prompt("conv", "a").max_tokens == 16 * len(GENERATION_LABELS) + 16
    # the generation prompt's conversation: the turns as speaker lines, else the question
    assert judge_input_of({"query": "plain q"}).user_input == "plain q"
    turns = [{"speaker": "user", "text": "hello"}, {"speaker": "agent", "text": "hi"}, {"speaker": "user", "text": "q2"}]
    assert judge_input_of({"input": turns, "query": "ignored"}).user_input == "user: hello\nagent: hi\nuser: q2"


def test_the_parser_takes_only_0_or_1():
    parse = tx.parser(tx.GENERATION, ["a", "b"])
    assert parse('{"a": 1, "b": 0, "c": 5}') == {"a": 1, "b": 0}
    for raw, why in (('{"a": true, "b": 0}', "a is True, not 0 or 1"), ('{"a": 1}', "b is None, not 0 or 1"),
                     ('{"a": 2, "b": 0}', "a is 2, not 0 or 1"), ("[1]", "output is not a JSON object")):
        with pytest.raises(JudgeParseError) as e:
            parse(raw)
        assert e.value.reason == why and e.value.judge == tx.GENERATION and e.value.raw == raw
    assert parse('{"a": 1.0, "b": 0}') == {"a": 1, "b": 0}


@pytest.mark.parametrize("labels, message", [
    ("yes", "input labels must be an object, got str"),
    ({"chunks": {"a": 1}}, "input labels.chunks must be a list of objects (one per retrieved chunk, in rank order)"),
    ({"chunks": [1]}, "input labels.chunks must be a list of objects"),
    ({"chunks": [{"misleading": 2}]}, "input labels.chunks[0].misleading must be 0 or 1 (or true/false), got 2"),
    ({"helpful": "very"}, "input labels.helpful must be 0 or 1 (or true/false), got 'very'"),
])
def test_malformed_input_labels_are_the_records_input_error(labels, message):
    with pytest.raises(RecordError, match=None) as e:
        tx.input_labels(judge_input_of({"labels": labels}).labels)
    assert message in str(e.value) and e.value.stage == "input"


def test_input_labels():
    assert tx.input_labels(None) == ([], {})
    labels = {"chunks": [{"misleading": True, "topically_relevant": None}], "helpful": 0.0, "source_cited": False,
              "unknown": 1}
    chunks, record = tx.input_labels(judge_input_of({"labels": labels}).labels)
    assert chunks == [{"misleading": 1}] and record == {"helpful": 0, "source_cited": 0}
    assert type(record["helpful"]) is int
