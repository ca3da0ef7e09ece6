"""The judge actor's round protocol (ragscale/actors/judge.py) with a scripted engine: fan-out rounds
batched across records, a failed item kept as data, empty rounds, judges in phases."""

from __future__ import annotations

import json

import pytest

from ragscale.judges import JUDGES
from ragscale.record import read_record
from ragscale.row import detail, judge_error_entries
from rows import rows_of, table  # tests/rows.py


def _row(key, query, answer, passages):
    raw = {"format": "open-rag-eval-csv", "query_id": key, "query": query, "query_run": 1,
           "passages": [{"id": f"[{i + 1}]", "text": p} for i, p in enumerate(passages)],
           "generated_answer": answer, "answer_status": "ok"}
    return read_record(json.dumps(raw), key=key, model_id="m", task_id=key, source_file="f", source_line=1,
                       need_targets=False).to_row()


@pytest.fixture
def actor_with(monkeypatch, tmp_path):
    import ragscale.actors.judge as judge_mod
    from ragscale.actors.engines import Generation

    calls: list[list[str]] = []

    def make(respond, judges):
        class Engine:
            name, model = "scripted", "scripted"

            def generate(self, prompts, temperature=0.0, seed=None, on_done=None):
                calls.append([p.judge for p in prompts])
                out = []
                for p in prompts:
                    out.append(Generation(respond(p), 10, 3))
                    if on_done is not None:
                        on_done(1)
                return out

        monkeypatch.setattr(judge_mod, "build", lambda kwargs: Engine())
        from ragscale.pipeline.stage import process_table

        class Actor(judge_mod.JudgeActor):  # called on an Arrow batch as the pipeline's adapter does
            def __call__(self, table):
                return process_table(self, "judge", table)

        return Actor({}, judges, str(tmp_path / "c.sqlite"), max_retries=1)

    return make, calls


def _batch(rows, judges):
    """The Arrow batch of ``rows`` the judge stage receives: its metrics struct holds the judges' metrics."""
    return table(rows, [m for j in judges for m in JUDGES[j].metrics])


def test_fan_out_round_spans_records_and_keeps_a_failed_item(actor_with):
    make, calls = actor_with

    def respond(p):
        text = p.messages[-1]["content"]
        return "not json" if "BROKEN" in text else json.dumps({"score": "3" if "Paris" in text else "0"})

    rows = [_row("a", "Capital of France?", "Paris [1].", ["Paris is the capital.", "BROKEN passage"]),
            _row("b", "Capital of Italy?", "Rome [1].", ["Rome is the capital.", "Paris is in France."]),
            _row("c", "No passages?", "None.", [])]
    out = rows_of(make(respond, ["umbrela"])(_batch(rows, ["umbrela"])))
    # one engine call for all four passages of two records, then one re-ask for the broken one
    assert calls == [["umbrela"] * 4, ["umbrela"]]
    a, b, c = (r["metrics"] for r in out)
    assert a == {"umbrela_scores": [3, None], "umbrela_mean": 3.0}
    assert b == {"umbrela_scores": [0, 3], "umbrela_mean": 1.5}
    assert c == {"umbrela_scores": None, "umbrela_mean": None}
    errs = judge_error_entries(out[0])
    assert errs == [{"judge": "umbrela", "item": 1, "reason": "output is not JSON", "raw": "not json"}]
    assert judge_error_entries(out[2]) == [{"judge": "umbrela", "reason": "no passages", "undefined": True}]
    assert detail(out[0]["details"], "umbrela") == {"[1]": 3, "[2]": None}
    stats = json.loads(out[0]["stats"])
    assert stats["judge_prompts"] == 4 and stats["judge_parse_failures"] == 1 and stats["judge_retries"] == 1


def test_phases_run_nuggets_after_umbrela_and_empty_rounds_finish(actor_with):
    make, calls = actor_with

    def respond(p):
        if p.judge == "umbrela":
            return json.dumps({"score": "2"})
        if p.judge == "citation":
            return json.dumps({"support": "full_support"})
        schema = p.schema["properties"]
        if "nuggets" in schema:
            return json.dumps({"nuggets": ["Paris is the capital"]})
        if "importance" in schema:
            return json.dumps({"importance": ["vital"]})
        return json.dumps({"assignment": ["support"]})

    rows = [_row("a", "Capital of France?", "Paris [1].", ["Paris is the capital."]),
            _row("b", "Capital?", "No citations here.", ["Paris is the capital."])]  # citation: empty fan-out
    judges = ["nuggets", "citation", "umbrela"]
    out = rows_of(make(respond, judges)(_batch(rows, judges)))
    assert sorted(calls[0]) == ["citation", "umbrela", "umbrela"]  # b's citation round is empty: nothing asked
    assert all(set(c) == {"nuggets"} for c in calls[1:])  # phase 2 only after phase 1's grades
    a, b = (r["metrics"] for r in out)
    assert a["umbrela_scores"] == [2] and a["nuggets_all"] == 1.0 and a["nuggets_count"] == 1 and a["citation_f1"] == 1.0
    assert b["citation_f1"] == 0.0 and b["nuggets_vital"] == 1.0  # no citations; the scripted judge says "support"


def test_identical_prompts_in_a_round_are_generated_once_and_share_the_answer(actor_with):
    make, calls = actor_with
    n = iter(range(100))

    def respond(p):  # a different grade per generation: sharing must not depend on the engine
        return json.dumps({"score": str(next(n) % 4)})

    # a sweep: two models gave the same answer to one task (identical prompts), a third differs
    rows = [_row("a", "Capital of France?", "Paris [1].", ["Paris is the capital."]),
            _row("b", "Capital of France?", "Paris [1].", ["Paris is the capital."]),
            _row("c", "Capital of Italy?", "Rome [1].", ["Rome is the capital."])]
    out = rows_of(make(respond, ["umbrela"])(_batch(rows, ["umbrela"])))
    assert calls == [["umbrela", "umbrela"]]  # two unique prompts, one engine call
    a, b, c = (r["metrics"] for r in out)
    assert a["umbrela_scores"] == b["umbrela_scores"] and a["umbrela_scores"] != c["umbrela_scores"]
    stats = json.loads(out[0]["stats"])
    assert stats["judge_prompts"] == 3 and stats["judge_generations"] == 2 and stats["judge_dedup_hits"] == 1


def test_reasked_samples_stay_different_draws(actor_with):
    """ragas' answer relevancy asks one prompt n times with seeds 0..n-1. When every sample fails
    to parse, the re-asks must still be n draws (distinct seeds), not one generation shared as
    identical prompts of a round; non-sampled prompts keep seed = attempt."""
    from ragscale.actors.judge import reask_sampling
    from ragscale.judges import ragas_metrics

    samples = [ragas_metrics.relevance_prompt("Paris is the capital of France.", i) for i in range(3)]
    first = [reask_sampling(p, 0) for p in samples]
    assert [s["seed"] for s in first] == [0, 1, 2] and {s["temperature"] for s in first} == {samples[0].sampling[0]}
    for attempt in (1, 2):
        again = [reask_sampling(p, attempt) for p in samples]
        assert len({s["seed"] for s in again}) == 3 and {s["temperature"] for s in again} == {0.7}
    plain = ragas_metrics.precision_prompt("q", "c", "a")
    assert reask_sampling(plain, 0) == {"temperature": 0.0, "seed": 0}
    assert reask_sampling(plain, 2) == {"temperature": 0.7, "seed": 2}

    make, calls = actor_with
    actor = make(lambda p: "not json", ["umbrela"])
    seen: list[tuple[float, int, int]] = []
    engine_generate = actor.engine.generate

    def generate(prompts, temperature=0.0, seed=None, on_done=None):
        seen.append((temperature, seed, len(prompts)))
        return engine_generate(prompts, temperature=temperature, seed=seed)

    actor.engine.generate = generate
    from ragscale.actors.judge_runs import JudgeStats

    stats = JudgeStats()
    out = actor._generate(samples, 1, stats)
    assert sorted(seen) == [(0.7, 1, 1), (0.7, 1001, 1), (0.7, 2001, 1)]  # three draws, none merged
    assert len(out) == 3 and not stats.d.get("judge_dedup_hits")


def test_progress_counts_each_rounds_prompts_as_they_finish(actor_with):
    """The actor reports a round's prompts when the round starts (labelled with its judges) and
    each one as the engine finishes it; re-asks add to the round; cache hits count at once."""
    make, _ = actor_with

    def respond(p):
        text = p.messages[-1]["content"]
        return "not json" if "BROKEN" in text else json.dumps({"score": "3" if "Paris" in text else "0"})

    rows = [_row("a", "Capital of France?", "Paris [1].", ["Paris is the capital.", "BROKEN passage"]),
            _row("b", "Capital of Italy?", "Rome [1].", ["Rome is the capital."])]
    batch = _batch(rows, ["umbrela"])
    actor = make(respond, ["umbrela"])
    events: list[tuple] = []
    actor.progress = lambda key, done=0, total=0, label=None: events.append((key, done, total, label))
    actor(batch)
    assert events[0] == ("round 1", 0, 0, "(umbrela)")
    totals = {k: (sum(e[1] for e in events if e[0] == k), sum(e[2] for e in events if e[0] == k)) for k, *_ in events}
    assert totals == {"round 1": (4, 4)}  # 3 passages, then the broken one's re-ask
    assert [e[1] for e in events if e[1]] == [1, 1, 1, 1]  # one by one, as the engine finishes them

    events.clear()
    actor(batch)  # every prompt is in the cache now
    assert {k: (sum(e[1] for e in events if e[0] == k), sum(e[2] for e in events if e[0] == k))
            for k, *_ in events} == {"round 1": (4, 4)}
