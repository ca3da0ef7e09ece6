"""benchmarks/judges.py's engine-ceiling helpers: the recording wrapper, the replay grouping
and the JSON figures (no engine, no model)."""

from __future__ import annotations

import pytest

from conftest import load_benchmark
from ragscale.actors.engines import Generation

bench = load_benchmark("judges")


class FakeEngine:
    name, model, last_stats = "fake", "m", {"retries": 2}

    def __init__(self):
        self.seen = []

    def generate(self, prompts, temperature=0.0, seed=None, on_done=None):
        self.seen.append((list(prompts), temperature, seed, on_done))
        if on_done is not None:
            on_done(len(prompts))
        return [Generation(f"{p}@{temperature}", 3, 1) for p in prompts]


def test_recording_engine_records_without_changing_the_call():
    inner, done = FakeEngine(), []
    rec = bench.RecordingEngine(inner)
    assert (rec.name, rec.model, rec.last_stats) == ("fake", "m", {"retries": 2})
    out = rec.generate(["a", "b"], temperature=0.0, seed=0, on_done=done.append)
    assert [g.text for g in out] == ["a@0.0", "b@0.0"]
    assert inner.seen == [(["a", "b"], 0.0, 0, done.append)] and done == [2]  # on_done still reaches the engine
    rec.generate(["c"], 0.7, 1001)  # positional sampling is recorded under its names
    assert rec.calls == [(["a", "b"], {"temperature": 0.0, "seed": 0}), (["c"], {"temperature": 0.7, "seed": 1001})]
    assert rec.busy_s >= 0.0


def test_recording_engine_counts_time_of_a_failing_call():
    class Boom(FakeEngine):
        def generate(self, prompts, **kw):
            raise RuntimeError("down")

    rec = bench.RecordingEngine(Boom())
    with pytest.raises(RuntimeError):
        rec.generate(["a"], temperature=0.0, seed=0)
    assert rec.calls == [(["a"], {"temperature": 0.0, "seed": 0})]


def test_replay_groups_merge_calls_per_sampling_in_first_call_order():
    calls = [
        (["r1a", "r1b"], {"temperature": 0.0, "seed": 0}),
        (["s1"], {"seed": 3, "temperature": 0.5}),  # key order does not matter
        ([], {"temperature": 0.9, "seed": 9}),  # an empty call adds no group
        (["r2a", "r1a"], {"seed": 0, "temperature": 0.0}),  # a repeated prompt of a later round is kept
        (["s2"], {"temperature": 0.5, "seed": 3}),
    ]
    assert bench.replay_groups(calls) == [
        ({"temperature": 0.0, "seed": 0}, ["r1a", "r1b", "r2a", "r1a"]),
        ({"seed": 3, "temperature": 0.5}, ["s1", "s2"]),
    ]
    assert bench.replay_groups([]) == []


def test_ceiling_figures_fraction_idle_and_rates():
    judge, ceiling, fraction = bench.ceiling_figures(
        judge_s=10.0, judge_tokens={"generations": 6, "prompt_tokens": 900, "completion_tokens": 100},
        calls=4, busy_s=7.5, load_s=1.234, ceiling_s=4.0, ceiling_calls=2, prompts=6,
        ceiling_tokens={"generations": 6, "prompt_tokens": 900, "completion_tokens": 104})
    assert judge == {"tok_per_s": 100.0, "engine_generate_calls": 4, "engine_busy_s": 7.5, "engine_idle_s": 2.5,
                     "engine_idle_fraction": 0.25}
    assert ceiling == {"engine_load_s": 1.23, "wall_s": 4.0, "generate_calls": 2, "prompts": 6, "generations": 6,
                       "prompt_tokens": 900, "completion_tokens": 104, "tok_per_s": 251.0, "completion_tok_per_s": 26.0}
    assert fraction == 0.4  # same prompts: ceiling time / judge time


def test_ceiling_figures_never_divide_by_zero_nor_go_negative():
    judge, ceiling, fraction = bench.ceiling_figures(0.0, {}, 0, 0.0, 0.0, 0.0, 0, 0, {})
    assert judge["engine_idle_fraction"] == 0.0 and judge["tok_per_s"] == 0.0
    assert ceiling["tok_per_s"] == 0.0 and fraction == 0.0
    judge, _, _ = bench.ceiling_figures(1.0, {}, 1, 1.0000001, 0.0, 0.5, 1, 1, {})  # timer jitter: busy > wall
    assert judge["engine_idle_fraction"] == 0.0


def test_engine_options_keep_numbers_and_switches_only():
    kw = {"engine": "openai", "model": "m", "base_url": "http://h:8000/v1", "api_key_env": "KEY_VAR",
          "concurrency": 8, "timeout_s": 60.0, "stream": True, "extra": None}
    assert bench.engine_options(kw) == {"concurrency": 8, "stream": True, "timeout_s": 60.0}
