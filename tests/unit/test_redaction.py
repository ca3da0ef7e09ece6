"""Redaction reaches every value (issue 37): a secret nested at any depth of a config, in dicts,
lists and tuples, as a value, inside a longer string, under a credential-named key or as a dict key
itself, is never written by what run.json and MLflow's params show of a config
(ragscale.provenance.redact, ragscale.tracking.params_of); what is not a secret is written as it
was (docs/security.md, "API keys")."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ragscale.provenance import redact
from ragscale.secrets import secret_paths
from ragscale.tracking import params_of

# keys and tokens of the shapes ragscale.secrets.SHAPES names (made up, not real credentials)
SECRETS = ["sk-proj-Ab3De6Gh9Jk2Mn5Pq8St1Vw4", "hf_Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk", "AKIAABCDEFGHIJKLMNOP",
           "ghp_1a2B3c4D5e6F7g8H9i0JkLmN", "0123456789abcdef0123456789abcdef",
           "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"]
PLAIN = st.sampled_from(["llama.cpp", "gpt-4o-mini", "0.0", "judge", "/tmp/cache", "max_tokens", ""])
NAMES = st.sampled_from(["model", "engine", "options", "path", "n", "base_url", "headers"])
CREDENTIAL_NAMES = st.sampled_from(["api_key", "Authorization", "X-Api-Key", "password", "hf_token", "clientSecret"])


@st.composite
def planted(draw) -> tuple[object, str]:
    """A nested config (dicts, lists, tuples, any depth up to 6) with one secret planted somewhere."""
    secret = draw(st.sampled_from(SECRETS))
    how = draw(st.sampled_from(["value", "in text", "url", "credential name", "dict key"]))
    leaf: object = {"value": secret, "in text": f"Bearer {secret} was used", "url": f"https://u:{secret}@host/v1",
                    "credential name": {draw(CREDENTIAL_NAMES): secret.replace("-", "")[:10]},
                    "dict key": {secret: draw(PLAIN)}}[how]
    if how == "credential name":  # a credential-named key's value is a secret whatever it looks like
        secret = next(iter(leaf.values()))  # type: ignore[union-attr]
    for _ in range(draw(st.integers(0, 6))):
        wrap = draw(st.sampled_from(["dict", "list", "tuple"]))
        siblings = draw(st.lists(PLAIN, max_size=2))
        if wrap == "dict":
            leaf = {draw(NAMES): leaf, **{f"k{i}": s for i, s in enumerate(siblings)}}
        else:
            items = [*siblings, leaf]
            leaf = items if wrap == "list" else tuple(items)
    return leaf, secret


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(planted())
def test_a_secret_at_any_depth_is_never_written(case: tuple[object, str]) -> None:
    config, secret = case
    assert secret_paths(config), "the check and the redaction must agree on what is a secret"
    for written in (json.dumps(redact(config), default=str), json.dumps(params_of({"c": config}))):
        assert secret not in written


@settings(max_examples=100, derandomize=True, database=None, deadline=None)
@given(st.recursive(PLAIN | st.integers() | st.booleans() | st.none(),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(NAMES, c, max_size=3), max_leaves=10))
def test_what_is_no_secret_is_written_as_it_was(config: object) -> None:
    assert redact(config) == config


def test_a_tuple_is_redacted_like_a_list() -> None:
    assert redact({"headers": ("x", "Bearer " + SECRETS[0])}) == {"headers": ["x", "Bearer ***"]}
