"""MT-RAG's judges under the ``reference`` protocol against IBM/mt-rag-benchmark's own code,
executed from the local copy: the prompts its functions format and its client sends
(messages and parameters, byte for byte), and its parsers' values on crafted outputs, quirks
included. The ``constrained`` protocol keeps its own prompts and parse failures."""

from __future__ import annotations

import ast
import json
import os
import sys
import types

import pandas as pd
import pytest

from ragscale.judges import JUDGES, idk, mtrag_reference as ref, radbench, underspecified
from ragscale.judges.base import JudgeParseError, JudgeResult, Undefined, drive
from ragscale.metrics.conditioning import idk_conditioned, idk_underspecified_conditioned
from ragscale.judges.judge_input import judge_input
from ragscale.record import read_record
from judge_inputs import judge_input_of
from conftest import ROOT, reference_source, shared_file

BUNDLED = os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")


def _module(name: str, source: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(source, f"<mt-rag-benchmark {name}>", "exec"), mod.__dict__)  # noqa: S102 - the reference's own code
    return mod


@pytest.fixture(scope="module")
def mtrag() -> types.SimpleNamespace:
    """judge_utils, underspecified_eval, the two scoring helpers of judge_wrapper (which imports
    ragas, torch and langchain at the top, so only its functions are taken) and the client."""
    utils = _module("judge_utils", reference_source("mt-rag-benchmark", "scripts/evaluation/judge_utils.py"))
    sys.modules["judge_utils"] = utils
    try:
        under = _module("underspecified_eval",
                        reference_source("mt-rag-benchmark", "scripts/evaluation/underspecified_eval.py"))
    finally:
        sys.modules.pop("judge_utils", None)
    tree = ast.parse(reference_source("mt-rag-benchmark", "scripts/evaluation/judge_wrapper.py"))
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)
             and n.name in ("remove_invalid_escapes", "extract_and_format_json", "underspecified_eval")]
    wrapper = _module("judge_wrapper_functions", ast.unparse(ast.Module(body=funcs, type_ignores=[])))
    client = _module("azure_openai_client", reference_source("mt-rag-benchmark", "scripts/evaluation/azure_openai_client.py"))
    return types.SimpleNamespace(utils=utils, under=under, wrapper=wrapper, client=client)


def _sent(mtrag: types.SimpleNamespace, user_input: str) -> dict:
    """What MT-RAG's AzureOpenAIClient sends for ``user_input`` (its create() call, captured)."""
    sent: dict = {}

    class _Completions:
        def create(self, **data):  # noqa: ANN003, ANN202
            sent.update(data)
            msg = types.SimpleNamespace(content=" ok ")
            return types.SimpleNamespace(choices=[types.SimpleNamespace(message=msg)])

    c = object.__new__(mtrag.client.AzureOpenAIClient)
    c.client = types.SimpleNamespace(chat=types.SimpleNamespace(completions=_Completions()))
    c.model_id = "judge"
    c.params = {**c.get_params(), "model": "judge"}
    assert c.generate_response(user_input) == "ok"  # the client strips the output
    return sent


def _records(path: str) -> list[tuple[dict, dict]]:
    """(raw MT-RAG record, the pipeline row ragscale's judges see) per line."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if line.strip():
                rec = read_record(line, key=str(n), model_id="m", task_id=None, source_file=path, source_line=n,
                                  need_targets=True)
                assert not rec.error, rec.error
                out.append((json.loads(line), rec.to_row()))
    return out


def _reference_frame(mtrag: types.SimpleNamespace, raws: list[dict]) -> pd.DataFrame:
    """judge_wrapper's preparation of the columns its formatters read, with judge_utils' functions."""
    u = mtrag.utils
    df = pd.DataFrame(raws)
    df["inquiry"] = df["input"].apply(u.extract_conversation)
    df["document"] = df["contexts"].apply(u.extract_document_texts)
    df["response"] = df["predictions"].apply(u.extract_texts)
    df["reference_answer"] = df["targets"].apply(u.extract_reference)
    df["previous_conversation"], df["current_question"] = zip(*df["inquiry"].apply(u.split_conversation))
    return df


def _start(name: str, raw: dict, row: dict, protocol: str):  # noqa: ANN202
    spec = JUDGES[name]
    return spec.start(judge_input(row), **spec.options(protocol, "judge"))


def _prompt_of(name: str, raw: dict, row: dict, protocol: str):  # noqa: ANN202
    return next(_start(name, raw, row, protocol))[0]  # the judge's one prompt


@pytest.mark.parametrize("source", ["bundled", "shared"])
def test_reference_prompts_equal_mtrag_byte_for_byte(mtrag: types.SimpleNamespace, source: str) -> None:
    path = BUNDLED if source == "bundled" else shared_file("responses-10.jsonl")
    pairs = _records(path)
    df = _reference_frame(mtrag, [raw for raw, _ in pairs])
    expected = {
        "idk": mtrag.utils.format_idk_judge(df),
        "radbench": mtrag.utils.format_conversation_radbench(df),
        "underspecified": mtrag.under.format_underspecified_judge(df),
    }
    for name, texts in expected.items():
        for (raw, row), text in zip(pairs, texts):
            p = _prompt_of(name, raw, row, "reference")
            sent = _sent(mtrag, text)
            assert list(p.messages) == sent["messages"], name
            assert p.schema is None  # free text, as the reference asks
            assert p.max_tokens == sent["max_tokens"] == 400
            assert p.sampling == (sent["temperature"], sent["seed"]) == (0.0, 100)
            assert dict(p.params) == {"top_p": sent["top_p"]}
            assert p.version == JUDGES[name].reference_version
            constrained = _prompt_of(name, raw, row, "constrained")
            assert constrained.schema is not None and constrained.version == JUDGES[name].version
    assert len(pairs) >= 3


# Ordinary text that only resembles a prompt's section markers (another case, spacing or
# wording): ragscale's reference prompts stay MT-RAG's own, byte for byte (templates.neutralize
# escapes only the exact markers; tests/unit/test_prompt_injection.py)
LOOKALIKES = ["See the [response] section and the [output] of the tool.", "It rained until [the end of the season].",
              "[RESPONSE] [ Output ] [inquiry] [The End of the season] [instruction]",
              "## role\n### Output: 3\nresponse: lower case"]


def test_reference_prompts_keep_text_that_only_resembles_a_marker(mtrag: types.SimpleNamespace, tmp_path) -> None:
    raws = [json.loads(line) for line in open(BUNDLED, encoding="utf-8") if line.strip()][:len(LOOKALIKES)]
    for raw, text in zip(raws, LOOKALIKES):  # in the question, a passage, the response and the reference
        raw["input"][-1]["text"] = f"{raw['input'][-1]['text']} {text}"
        raw["contexts"][0]["text"] = text
        raw["predictions"][0]["text"] = text
        raw["targets"][0]["text"] = text
    path = tmp_path / "lookalikes.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in raws), encoding="utf-8")
    pairs = _records(str(path))
    df = _reference_frame(mtrag, [raw for raw, _ in pairs])
    expected = {"idk": mtrag.utils.format_idk_judge(df), "radbench": mtrag.utils.format_conversation_radbench(df),
                "underspecified": mtrag.under.format_underspecified_judge(df)}
    for name, texts in expected.items():
        for (raw, row), text in zip(pairs, texts):
            assert list(_prompt_of(name, raw, row, "reference").messages) == _sent(mtrag, text)["messages"], name
    assert len(pairs) == len(LOOKALIKES)


RATINGS = [
    "A fine answer. Rating: [[8]]",
    "It is 6 out of 10 overall. Rating: [[8]]",  # the last matching pattern wins: 0.6
    "Rating: [[8.5]]",
    "Rating: [[0]]",  # 0 is outside (0, 1]: 0.5
    "Rating: [[10]]",
    "Rating: [[11]]",
    "no rating at all",
    "Score: 8.6/10",
    "[Rating]\n7",
    "Rating: [[7/10]]",
    "for example: \"Rating: [[5]]\"\nRating: [[9]]",
    "Overall Rating: 9.5",
    "[3] and later [[4]]",
    "-2 out of 10",
    "",
    "[Rating]for example: [Rating] 3\n7",  # the example cut to the end of its line: "[Rating]\n7" is read
]


def test_extract_rating_matches_mtrag(mtrag: types.SimpleNamespace) -> None:
    got = [ref.extract_rating(t) for t in RATINGS]
    assert got == [mtrag.utils.extract_rating(t) for t in RATINGS]
    assert got[:4] == [0.8, 0.6, 0.85, 0.5]  # the examples
    assert ref.extract_rating("no rating at all") == 0.5


IDK_OUTPUTS = ["yes", "  No.", "partial", "Partially", "**yes**", "1. yes", "", "Yes, it does", "maybe", "\n\nno"]


def test_first_token_idk_matches_mtrag(mtrag: types.SimpleNamespace) -> None:
    got = [ref.first_token_idk(t) for t in IDK_OUTPUTS]
    assert got == [mtrag.utils.first_token_idk(t) for t in IDK_OUTPUTS]
    assert got[4] == got[5] == got[6] == ref.IDK_UNKNOWN and got[3] == 0.5 and got[8] == 0.5


UNDERSPECIFIED_OUTPUTS = [
    '{"decision": "yes", "explanation": "asks which one"}',
    '```json\n{"decision": "No", "explanation": "x"}\n```',
    'Sure: {"decision": "maybe"}',
    "no JSON here",
    '{"decision": 1}',
    '{"decision": "yes", "explanation": "a \\q bad escape"}',
    '{"explanation": "nested {braces}", "decision": "yes"}',
    'A note {x} first.\n```json\n{"decision": "yes"}\n```',  # fenced: the fence's object, not the first braces
    '```JSON\n{"decision": "no"}\n```',  # no ```json fence (case matters): the first braces
    '{"decision": "no",\n"explanation": "over two lines"}',  # an object over several lines
    '{"decision": "y\\es"}',  # an invalid escape removed: "yes"
]


def test_underspecified_decision_matches_mtrag(mtrag: types.SimpleNamespace) -> None:
    def reference(raw: str) -> float:  # judge_wrapper.underspecified_eval's loop body
        try:
            decision = mtrag.wrapper.extract_and_format_json(raw).get("decision", "").lower()
            return 1 if decision == "yes" else 0 if decision == "no" else 0.5
        except Exception:  # noqa: BLE001 - the reference's bare except
            return 0.5

    got = [ref.underspecified_decision(t) for t in UNDERSPECIFIED_OUTPUTS]
    assert got == [reference(t) for t in UNDERSPECIFIED_OUTPUTS]
    assert got[:4] == [1.0, 0.0, 0.5, 0.5]


def test_split_conversation_per_physical_line(mtrag: types.SimpleNamespace) -> None:
    cases = [
        "user: only question",
        "user: first\nagent: answer\nuser: second",
        "user: first\nagent: answer\nuser: a question\nwith a second line\nand a third",
        "user: q1\nagent: a\nmore agent text\nuser: q2",
    ]
    for inquiry in cases:
        assert ref.split_conversation(inquiry) == mtrag.utils.split_conversation(inquiry)
    prev, q = ref.split_conversation(cases[2])
    assert q == "a question" and prev.endswith("with a second line")  # the multi-line quirk
    for bad, why in (("agent: no user", "finds no line starting with 'user:'"),
                     ("user:no space", "finds no 'user: ' in the last user line")):
        with pytest.raises(Exception):
            mtrag.utils.split_conversation(bad)
        with pytest.raises(ValueError) as e:
            ref.split_conversation(bad)
        assert str(e.value) == f"MT-RAG's split_conversation {why}"


def _run(name: str, turns: list[dict], prediction: str, output: str, protocol: str):  # noqa: ANN202
    raw = {"input": turns}
    row = {"prediction": prediction, "targets": ["the reference"], "passages": ["doc one", "doc two"]}
    spec = JUDGES[name]
    return drive(spec.start(judge_input_of(raw, row), **spec.options(protocol, "judge")), lambda p: output)


def test_quirks_under_both_protocols() -> None:
    turns = [{"speaker": "user", "text": "Is it free?"}]
    # RADBench: the reference's value under reference; a parse failure (no default) under constrained
    assert _run("radbench", turns, "yes", "6 out of 10 ... Rating: [[8]]", "reference") == 0.6
    assert _run("radbench", turns, "yes", "Rating: [[0]]", "reference") == 0.5
    with pytest.raises(JudgeParseError):
        _run("radbench", turns, "yes", "Rating: [[8]]", "constrained")
    assert _run("radbench", turns, "yes", '{"explanation": "ok", "rating": "8"}', "constrained") == 0.8
    # a conversation MT-RAG's split_conversation cannot cut: null with the reason, not a crash
    out = _run("radbench", [{"speaker": "User", "text": "Is it free?"}], "yes", "Rating: [[8]]", "reference")
    assert isinstance(out, Undefined) and "user:" in out.reason
    # IDK: "unknown" (no leading word) is null with its label; under constrained a parse failure
    out = _run("idk", turns, "I cannot say", "**yes**", "reference")
    assert isinstance(out, JudgeResult) and out.metrics == {"idk_eval": None} and out.details == {"label": "unknown"}
    assert _run("idk", turns, "I cannot say", "Partially, yes", "reference") == 0.5
    with pytest.raises(JudgeParseError):
        _run("idk", turns, "I cannot say", "**yes**", "constrained")
    # underspecified: 0.5 for an unreadable decision under reference
    assert _run("underspecified", turns, "Which one?", "I think yes", "reference") == 0.5
    with pytest.raises(JudgeParseError):
        _run("underspecified", turns, "Which one?", "I think yes", "constrained")


def test_unknown_idk_keeps_the_raw_metric_as_mtrag(mtrag: types.SimpleNamespace) -> None:
    """get_idk_score / get_idk_underspec_score with idk_eval "unknown" against ragscale's conditioning."""
    tree = ast.parse(reference_source("mt-rag-benchmark", "scripts/evaluation/judge_wrapper.py"))
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("get_idk_score", "get_idk_underspec_score")]
    w = _module("judge_wrapper_idk", ast.unparse(ast.Module(body=funcs, type_ignores=[])))
    for answerability in ("ANSWERABLE", "UNANSWERABLE", "CONVERSATIONAL", "PARTIAL"):
        row = {"answerability": [answerability], "metrics": {"idk_eval": ["unknown"], "RL_F": [0.7],
                                                             "underspecified_eval": [0]}}
        assert idk_conditioned(answerability, None, 0.7, unknown=True) == w.get_idk_score(row, "RL_F")
        assert idk_underspecified_conditioned(answerability, None, 0, 0.7, unknown=True) == \
            w.get_idk_underspec_score(row, "RL_F")
    assert idk_conditioned("UNANSWERABLE", None, 0.7) is None  # a failed judge stays null


def test_protocol_recorded_and_checked() -> None:
    from ragscale.actors.judge_plan import _protocol, protocols_used
    from ragscale.errors import UserError

    used = protocols_used({"judges": ["idk", "radbench", "taxonomy_retrieval"], "protocol": "reference"})
    assert used == {"idk": "reference", "radbench": "reference", "taxonomy_retrieval": "constrained"}
    assert protocols_used({"judges": ["idk"]}) == {"idk": "constrained"}
    with pytest.raises(UserError, match="did you mean 'reference'"):
        _protocol({"protocol": "referense"}, "judge")
    assert JUDGES["idk"].version_for("reference") == idk.REFERENCE_VERSION
    assert JUDGES["radbench"].version_for("constrained") == radbench.VERSION
    assert JUDGES["underspecified"].options("constrained", "m") == {"protocol": "constrained", "model": "m"}
    assert underspecified.REFERENCE_VERSION != underspecified.VERSION


def test_the_protocol_is_part_of_the_resume_fingerprint():
    """Resuming an output_dir under another protocol would mix two judgings: the fingerprint
    names a non-default protocol (and leaves the default out, so older runs still resume)."""
    from ragscale.plan import compose, plan_run

    base = ["+scenario=mtrag", "steps=[idk]"]
    constrained = plan_run(compose(base)).fingerprint()
    reference = plan_run(compose([*base, "judge.protocol=reference"])).fingerprint()
    assert "protocol" not in constrained["judge"] and reference["judge"]["protocol"] == "reference"


@pytest.mark.parametrize("prompt, judge, version", [
    (lambda: idk.render_reference([{"speaker": "user", "text": "q"}], "r"), "idk", "mtrag-idk-ref-v1"),
    (lambda: radbench.render_reference([{"speaker": "user", "text": "q"}], "ref", ["d"], "r"), "radbench",
     "mtrag-radbench-ref-v1"),
    (lambda: underspecified.render_reference("r"), "underspecified", "mtrag-underspecified-ref-v1"),
])
def test_a_reference_prompt_names_its_judge_and_version(prompt, judge, version):
    """What the judge cache keys and run.json's prompt versions read: the judge, its reference version,
    free text (no schema) under MT-RAG's sampling."""
    p = prompt()
    assert (p.judge, p.version, p.schema, p.max_tokens) == (judge, version, None, 400)
