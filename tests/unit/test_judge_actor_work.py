"""The judge actor's accounting (ragscale/actors/judge.py) on both paths with a scripted engine: the
counters run.json's judge_work reports (in total and per judge), what the judge cache keeps and
replays, the errors and warnings written per record (``@tag`` on a panel), the rounds' progress,
and the actor's defaults."""

from __future__ import annotations

import copy
import dataclasses
import json
from concurrent.futures import Future

import pytest

from ragscale.actors.engines import Generation
from ragscale.row import judge_error_entries
from test_faithfulness import scripted
from test_judge_streaming import mtrag_rows

IDK_YES = json.dumps({"label": "yes"})  # 16 characters
PADDED = IDK_YES + " " * 30  # a judgement with trailing blanks: 46 characters, parses cut to 20 or not
FIRST = "additional keys does not increase throughput"  # in the first sample record's answer only
NO_CLARIFICATION = json.dumps({"decision": "no", "explanation": "x"})


class Engine:
    """``generate`` only (the round path): ``respond(prompt)`` gives the text, or a Generation (an
    engine error); every generation counts 7 prompt and 3 completion tokens."""

    name, model = "fake", "fake"

    def __init__(self, respond, last_stats=None):
        self.respond, self.last_stats = respond, last_stats
        self.asked: list[str] = []

    def answer(self, prompt) -> Generation:
        self.asked.append(prompt.judge)
        out = self.respond(prompt)
        return out if isinstance(out, Generation) else Generation(out, 7, 3)

    def generate(self, prompts, temperature=0.0, seed=None, on_done=None):
        out = []
        for p in prompts:
            out.append(self.answer(p))
            if on_done is not None:
                on_done(1)
        return out


class StreamingEngine(Engine):
    """An engine that also offers ``submit`` (the streaming path)."""

    def __init__(self, respond, last_stats=None):
        super().__init__(respond, last_stats)
        self.submitted = 0

    def submit(self, prompt, temperature, seed):
        self.submitted += 1
        f: Future = Future()
        f.set_result(self.answer(prompt))
        return f


@pytest.fixture
def make(monkeypatch, tmp_path):
    """make(respond, judges, streaming, **kw) -> (JudgeActor, engine), its cache in tmp_path."""
    import ragscale.actors.judge as judge_mod

    def build(respond, judges, streaming, cache="c.sqlite", last_stats=None, **kw):
        engine = (StreamingEngine if streaming else Engine)(respond, last_stats)
        monkeypatch.setattr(judge_mod, "build", lambda kwargs: engine)
        kw.setdefault("max_retries", 0)
        path = str(tmp_path / cache) if cache else None
        return judge_mod.JudgeActor({}, judges, path, **kw), engine

    return build


def counters(**per_judge) -> dict:
    """The stats of a batch: ``judge_<c>`` in total and ``judgeby|<judge>|<c>`` per judge."""
    out: dict = {}
    for judge, counts in per_judge.items():
        for c, n in counts.items():
            out[f"judge_{c}"] = out.get(f"judge_{c}", 0) + n
            out[f"judgeby|{judge}|{c}"] = n
    return out


def two_judges(prompt):
    """IDK answers a long judgement; underspecified's first record gets an engine error, its second
    an output that never parses."""
    if prompt.judge == "idk":
        return PADDED
    if FIRST in prompt.messages[-1]["content"]:
        return Generation("", error="endpoint down")
    return "not json"


def cut_warning(judge: str) -> str:
    return (f"judge {judge}: an output of 46 characters cut to judge.max_raw_chars=20 (26 dropped; "
            "the judge read the cut text; the record and the judge cache keep it)")


def two_rows() -> list[dict]:
    rows = mtrag_rows()[:2]
    assert FIRST in rows[0]["prediction"] and FIRST not in rows[1]["prediction"]
    return rows


@pytest.mark.parametrize("streaming", [True, False])
def test_a_batch_counts_its_work_per_judge_and_keeps_each_failure_on_its_record(make, streaming):
    a, _ = make(two_judges, ["idk", "underspecified"], streaming, max_retries=1, max_raw_chars=20)
    rows = two_rows()
    stats = a.process(rows)
    assert stats == counters(
        idk={"prompts": 2, "generations": 2, "prompt_tokens": 14, "completion_tokens": 6,
             "outputs_cut": 2, "raw_chars_dropped": 52},
        underspecified={"prompts": 2, "engine_errors": 1, "generations": 2, "prompt_tokens": 14,
                        "completion_tokens": 6, "retries": 1, "parse_failures": 1})
    assert [r["metrics"]["idk_eval"] for r in rows] == [[1.0], [1.0]]
    assert [r["metrics"]["underspecified_eval"] for r in rows] == [None, None]
    assert judge_error_entries(rows[0]) == [{"judge": "underspecified", "reason": "engine error: endpoint down",
                                             "raw": ""}]
    assert judge_error_entries(rows[1]) == [{"judge": "underspecified", "reason": "output is not JSON",
                                             "raw": "not json"}]
    assert [r["warnings"] for r in rows] == [[cut_warning("idk")]] * 2  # an engine error cuts nothing
    assert all(r["error"] is None for r in rows)


@pytest.mark.parametrize("streaming", [True, False])
def test_the_cache_keeps_every_generation_as_cut_with_its_tokens_and_never_an_engine_error(make, streaming):
    a, _ = make(two_judges, ["idk", "underspecified"], streaming, max_retries=1, max_raw_chars=20)
    a.process(two_rows())
    entries = sorted((text, json.loads(meta)) for text, meta in a.cache.db.execute("SELECT text, meta FROM generations"))
    tokens = {"prompt_tokens": 7, "completion_tokens": 3}
    assert entries == sorted([(PADDED[:20], tokens)] * 2 + [("not json", tokens)] * 2)  # an ask and its re-ask


@pytest.mark.parametrize("streaming", [True, False])
def test_a_cached_output_longer_than_the_cap_is_cut_when_replayed_and_counted(make, streaming):
    first, _ = make(lambda p: PADDED, ["idk"], streaming)
    first.process(two_rows())
    a, engine = make(lambda p: pytest.fail("asked again"), ["idk"], streaming, max_raw_chars=20)
    rows = two_rows()
    stats = a.process(rows)
    assert not engine.asked
    assert stats == counters(idk={"prompts": 2, "cache_hits": 2, "outputs_cut": 2, "raw_chars_dropped": 52})
    assert [r["metrics"]["idk_eval"] for r in rows] == [[1.0], [1.0]]
    assert [r["warnings"] for r in rows] == [[cut_warning("idk")]] * 2


@pytest.mark.parametrize("streaming", [True, False])
def test_retry_unparsed_judges_a_cached_output_as_cut_to_the_cap(make, streaming):
    first, _ = make(lambda p: IDK_YES + " and more", ["idk"], streaming)  # no JSON object alone: fails
    rows = two_rows()
    first.process(rows)
    assert [r["metrics"]["idk_eval"] for r in rows] == [None, None]
    a, engine = make(lambda p: pytest.fail("asked again"), ["idk"], streaming, max_raw_chars=16,
                     retry_unparsed=True)
    rows = two_rows()
    stats = a.process(rows)
    assert not engine.asked
    assert stats == counters(idk={"prompts": 2, "cache_hits": 2, "outputs_cut": 2, "raw_chars_dropped": 18})
    assert [r["metrics"]["idk_eval"] for r in rows] == [[1.0], [1.0]]


@pytest.mark.parametrize("streaming", [True, False])
def test_an_unparsed_cached_output_asked_again_for_two_identical_prompts_counts_once(make, streaming):
    row = mtrag_rows()[0]
    twins = [row, {**copy.deepcopy(row), "key": "twin"}]
    first, _ = make(lambda p: "I am not a judge.", ["idk"], streaming)
    first.process(copy.deepcopy(twins))
    a, engine = make(lambda p: IDK_YES, ["idk"], streaming, retry_unparsed=True)
    rows = copy.deepcopy(twins)
    stats = a.process(rows)
    assert engine.asked == ["idk"]
    assert stats == counters(idk={"prompts": 2, "cache_unparsed": 1, "dedup_hits": 1, "generations": 1,
                                  "prompt_tokens": 7, "completion_tokens": 3})
    assert [r["metrics"]["idk_eval"] for r in rows] == [[1.0], [1.0]]


def test_the_engines_http_counters_of_each_call_are_added_to_the_batch(make):
    a, _ = make(lambda p: IDK_YES, ["idk"], False, last_stats={"requests": 2, "http_retries": 1, "note": "x"})
    stats = a.process(two_rows())
    assert stats == {**counters(idk={"prompts": 2, "generations": 2, "prompt_tokens": 14, "completion_tokens": 6}),
                     "judge_http_requests": 2, "judge_http_retries": 1}


def test_rounds_report_their_prompts_under_numbered_keys_with_their_judges(make):
    def respond(p):
        return IDK_YES if p.judge == "idk" else scripted(p.messages[-1]["content"])

    a, _ = make(respond, ["idk", "ragas_faithfulness"], False)
    calls: list[tuple] = []
    a.progress = lambda key, done, total, label: calls.append((key, done, total, label))
    row = next(r for r in mtrag_rows() if r["passages"])
    rows = [row, {**copy.deepcopy(row), "key": "twin"}]  # identical prompts: generated once, done for both
    for _ in range(2):  # the second batch is replayed from the cache, its rounds numbered from 1 again
        calls.clear()
        a.process(copy.deepcopy(rows))
        labels = {k: lab for k, _, _, lab in calls if lab}
        assert labels == {"round 1": "(idk, ragas_faithfulness)", "round 2": "(ragas_faithfulness)"}
        for key in labels:
            done = sum(d for k, d, _, _ in calls if k == key)
            total = sum(t for k, _, t, _ in calls if k == key)
            assert (done, total) == ((4, 4) if key == "round 1" else (2, 2)), (key, calls)


@pytest.mark.parametrize("streaming", [True, False])
def test_a_panel_member_tags_its_metrics_errors_and_warnings(make, streaming):
    a, _ = make(two_judges, ["idk", "underspecified"], streaming, tag="b", max_raw_chars=20)
    rows = two_rows()
    a.process(rows)
    assert rows[0]["metrics"]["idk_eval@b"] == [1.0] and rows[0]["metrics"]["underspecified_eval@b"] is None
    assert judge_error_entries(rows[0]) == [{"judge": "underspecified", "reason": "engine error: endpoint down",
                                             "raw": "", "tag": "b"}]
    assert judge_error_entries(rows[1]) == [{"judge": "underspecified", "reason": "output is not JSON",
                                             "raw": "not json", "tag": "b"}]
    assert [r["warnings"] for r in rows] == [[cut_warning("idk@b")]] * 2


@pytest.mark.parametrize("streaming", [True, False])
def test_a_record_keeps_the_first_input_error_its_judges_find(make, monkeypatch, streaming):
    import ragscale.judges as judges
    from ragscale.errors import RecordError

    def failing(spec, message):
        def start(inp, **kw):
            if inp.task_id == bad:
                raise RecordError("input", message)
            return (yield from spec.start(inp, **kw))
        return start

    idk, under = judges.JUDGES["idk"], judges.JUDGES["underspecified"]
    monkeypatch.setitem(judges.JUDGES, "idk", dataclasses.replace(idk, start=failing(idk, "first")))
    monkeypatch.setitem(judges.JUDGES, "underspecified", dataclasses.replace(
        under, start=failing(under, "second"), after=("idk",)))  # a later phase
    respond = {"idk": IDK_YES, "underspecified": NO_CLARIFICATION}
    a, _ = make(lambda p: respond[p.judge], ["idk", "underspecified"], streaming)
    assert [[s.name for s in ph] for ph in a.phases] == [["idk"], ["underspecified"]]
    rows = two_rows()
    bad = rows[0]["task_id"]
    a.process(rows)
    assert json.loads(rows[0]["error"]) == {"stage": "input", "message": "first"}
    assert rows[1]["error"] is None and rows[1]["metrics"]["underspecified_eval"] == [0.0]


def test_the_options_of_a_judge_reach_its_start_with_the_protocol_and_model(make, monkeypatch):
    import ragscale.judges as judges

    seen = []
    idk = judges.JUDGES["idk"]

    def start(inp, **kw):
        seen.append(kw)
        return (yield from idk.start(inp, protocol=kw["protocol"], model=kw["model"]))

    monkeypatch.setitem(judges.JUDGES, "idk", dataclasses.replace(idk, start=start))
    options = {"idk": {"k": 3}}
    a, _ = make(lambda p: IDK_YES, ["idk"], False, options=options)
    a.process(mtrag_rows()[:1])
    assert seen == [{"k": 3, "protocol": "constrained", "model": "fake"}]
    assert options == {"idk": {"k": 3}}  # the caller's mapping is left as it was


def test_by_default_the_actor_streams_to_an_engine_that_can_and_without_a_cache_asks_every_time(make):
    a, engine = make(lambda p: IDK_YES, ["idk"], True, cache=None)
    for _ in range(2):
        stats = a.process(two_rows())
        assert stats == counters(idk={"prompts": 2, "generations": 2, "prompt_tokens": 14, "completion_tokens": 6})
    assert engine.submitted == 4 and a.cache is None
