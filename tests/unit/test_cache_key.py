"""The judge cache's key (ragscale.judges.base.cache_key, issue 37): a generation is reused only
for the same generation. Every field that changes what an engine generates changes the key (engine,
model, the messages and how they are split into turns, the output schema, max tokens, temperature,
seed, the extra sampling parameters); what does not change it leaves the key alone (the order of a
dict's keys in the schema, the sampling or a message). The extra parameters are keyed in the order
the judge declares them, which its prompt version fixes (sorting them would have re-keyed every
cached UMBRELA reference-protocol generation for nothing). The judge's
name and prompt version are part of the key on purpose: a version names a change of meaning (a new
parse rule, a new scale) even where the rendered text stays, and a cache must not serve the old
generation to the new one (docs/judges.md, "Judge cache")."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from ragscale.actors.judge_runs import reask_sampling
from ragscale.judges.base import JudgePrompt, cache_key

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}},
          "required": ["score"]}
BASE = JudgePrompt(judge="idk", version="v1", messages=({"role": "system", "content": "You grade."},
                                                        {"role": "user", "content": "Q: a\nA: b"}),
                   schema=SCHEMA, max_tokens=256)
GREEDY = {"temperature": 0.0, "seed": 0}


def key(prompt: JudgePrompt = BASE, engine: str = "llama.cpp", model: str = "m.gguf", sampling: dict = GREEDY) -> str:
    return cache_key(engine, model, prompt, sampling)


def test_every_field_of_a_generation_changes_the_key() -> None:
    base = key()
    changed = {
        "engine": key(engine="vllm"),
        "model": key(model="other.gguf"),
        "judge": key(dataclasses.replace(BASE, judge="radbench")),
        "version": key(dataclasses.replace(BASE, version="v2")),
        "a message's text": key(dataclasses.replace(BASE, messages=(BASE.messages[0], {"role": "user", "content": "Q: a\nA: c"}))),
        "a message's role": key(dataclasses.replace(BASE, messages=({"role": "user", "content": "You grade."}, BASE.messages[1]))),
        "a message less": key(dataclasses.replace(BASE, messages=BASE.messages[1:])),
        "schema": key(dataclasses.replace(BASE, schema={**SCHEMA, "required": []})),
        "no schema (free text)": key(dataclasses.replace(BASE, schema=None)),
        "max_tokens": key(dataclasses.replace(BASE, max_tokens=512)),
        "temperature": key(sampling={"temperature": 0.7, "seed": 0}),
        "seed": key(sampling={"temperature": 0.0, "seed": 1}),
        "a sampling parameter": key(dataclasses.replace(BASE, params=(("presence_penalty", 0.5),))),
        "its value": key(dataclasses.replace(BASE, params=(("presence_penalty", 0.6),))),
    }
    assert base not in changed.values()
    assert len(set(changed.values())) == len(changed), "two different generations share a key"


def test_what_does_not_change_a_generation_leaves_the_key() -> None:
    base = key()
    reordered_schema = {"required": ["score"], "properties": SCHEMA["properties"], "type": "object"}
    assert key(dataclasses.replace(BASE, schema=reordered_schema)) == base
    assert key(sampling={"seed": 0, "temperature": 0.0}) == base
    assert key(dataclasses.replace(BASE, messages=tuple({"content": m["content"], "role": m["role"]}
                                                        for m in BASE.messages))) == base
    # an equal prompt rendered again is the same generation
    assert key(JudgePrompt(**{f.name: getattr(BASE, f.name) for f in dataclasses.fields(BASE)})) == base


def test_turns_split_differently_are_different_generations() -> None:
    """One message holding the text of two turns is not the same request as the two turns."""
    one = dataclasses.replace(BASE, messages=({"role": "system", "content": "You grade.\n<user>\nQ: a\nA: b"},))
    assert one.text() == BASE.text()  # the rendered text alone cannot tell them apart
    assert key(one) != key()


def test_reasks_and_samples_are_distinct_generations() -> None:
    """The first ask, each re-ask, and each of n samples of one prompt have keys of their own (a
    re-ask samples at 0.7 with a seed spread by the sample's index: sample 0's re-asks are the
    greedy prompt's re-asks, the same generations, so the samples here start at 1)."""
    samples = [dataclasses.replace(BASE, sampling=(0.3, i)) for i in range(1, 4)]
    keys = {key(p, sampling=reask_sampling(p, attempt)) for p in samples for attempt in range(3)}
    keys |= {key(BASE, sampling=reask_sampling(BASE, attempt)) for attempt in range(3)}
    assert len(keys) == 12


# texts made of the pieces a turn start is made of, so that collisions of the rendered text are common
TEXTS = st.lists(st.sampled_from(["a", "b", "\n", "<", ">", "<user>", "<system>", "\n<user>\n", "<assistant>\n"]),
                 max_size=6).map("".join)
MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]),
                                           "content": TEXTS}), min_size=1, max_size=3).map(tuple)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(MESSAGES, MESSAGES)
def test_different_messages_never_share_a_key(a: tuple, b: tuple) -> None:
    """Two message lists share a key only when they are the same list."""
    same = key(dataclasses.replace(BASE, messages=a)) == key(dataclasses.replace(BASE, messages=b))
    assert same == (list(a) == list(b))


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]), "content": TEXTS}),
                min_size=2, max_size=4), st.data())
def test_turns_merged_into_one_message_are_another_key(messages: list, data: st.DataObject) -> None:
    """Two adjacent turns written as one message render to the same text, yet are another request."""
    i = data.draw(st.integers(0, len(messages) - 2))
    a, b = messages[i], messages[i + 1]
    merged = [*messages[:i], {"role": a["role"], "content": f"{a['content']}\n<{b['role']}>\n{b['content']}"},
              *messages[i + 2:]]
    split, joined = (dataclasses.replace(BASE, messages=tuple(m)) for m in (messages, merged))
    assert split.text() == joined.text()
    assert key(split) != key(joined)


def test_keys_stay_the_same_from_one_release_to_the_next():
    """A key is part of every user's judge cache (and of the golden replays' recorded cache): the
    same generation must keep its key, or every cached judgement is generated again. These are the
    keys main had before the turn-splitting fix (the first three) and the key of a prompt whose
    text does not tell its turns apart (new with it)."""
    assert key() == "f71132aeb432c169b28da75b5c9eb3f6b6b5cb6541eccd8ef5c3ae5b97ea6fe0"
    params = dataclasses.replace(BASE, params=(("top_p", 1.0), ("presence_penalty", 0.5)))
    assert key(params) == "96deaada6e1df09372d007a9bcedb2d17a034a8b21dfdfebd2834627d74e4188"
    free = dataclasses.replace(BASE, schema=None)
    assert key(free, engine="openai", model="gpt-4o-mini", sampling={"temperature": 0.3, "seed": 2}) == \
        "e57b9363460eeade25c300512c2ac7ca6be91c753c3e7e097501cdd28db77c83"
    one = dataclasses.replace(BASE, messages=({"role": "system", "content": "You grade.\n<user>\nQ: a\nA: b"},))
    assert key(one) == "21ae5ab732fb4e8e9ef415ae8c9cd277d038e889d95e28223c511bcb5eab8dae"
