"""ragscale.secrets' rules stated one by one (issue 37): which names are credentials, which values
may stand for a variable's NAME, why an override is refused (the reason a user reads), and a
composed config checked raw and resolved, nested at any depth in dicts and lists. Beside
tests/unit/test_secrets.py, which covers every known key format and ordinary values."""

from __future__ import annotations

import secrets as _random

import pytest
from omegaconf import OmegaConf

from ragscale.errors import UserError
from ragscale.secrets import (config_problem, credential_name, environment_paths, looks_like_env_name,
                              override_problem, refuse_secrets, secret_paths)


def _key() -> str:
    """A fresh key of OpenAI's shape (no secret-shaped literal in the repository)."""
    alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "sk-" + "".join(_random.choice(alnum) for _ in range(40)) + "A1b"


@pytest.mark.parametrize("name", ["dbpasswd", "DB_PASSWD", "clientsecret", "openaiapikey", "OPENAIAPIKEY",
                                  "hftoken", "adminpassword", "api_keys", "access-keys", "signingKeys"])
def test_a_credential_word_at_the_end_of_a_name_or_keys_after_a_qualifier(name):
    """The name's last word decides: it ends with token, password, passwd, secret or apikey (one word
    written together), or it is key/keys after a qualifier (api_keys)."""
    assert credential_name(name)


@pytest.mark.parametrize("name", ["keys", "key", "monkeys", "passwd_file", "secret_santa_count", "token_count"])
def test_names_whose_last_word_is_not_a_credential(name):
    assert not credential_name(name)


@pytest.mark.parametrize("value", ["my_key_var", "OPENAI_API_KEY", "MY_KEY_2", "OPENAI_API_KEY_2_PROD",
                                   "MY_ABCDEFGHIJKLMNOPQ", "abcdefghijklmnopqrstuvwxyz"])
def test_names_of_environment_variables(value):
    """Any case, digits in short segments, long segments without digits: a variable's name."""
    assert looks_like_env_name(value)


@pytest.mark.parametrize("value", ["ABCDEFGH12345678", "abcdefgh12345678", "MY_Ab3dEf9hIj2lMn4p", "1KEY",
                                   "MY-KEY", "MY KEY", ""])
def test_values_that_are_not_a_variables_name(value):
    """A segment of 16+ characters mixing letters and digits (a key pasted in place of its
    variable's name, in any case), or characters a name cannot hold."""
    assert not looks_like_env_name(value)


def _refusal(override: str) -> str:
    with pytest.raises(UserError) as e:
        refuse_secrets([override])
    return str(e.value)


@pytest.mark.parametrize("override", ["+judge.options.api_key=", "+judge.options.api_key=null",
                                      "+judge.options.api_key=true", "+judge.options.api_key=false",
                                      "+judge.options.api_key= "])
def test_a_credential_named_key_set_to_nothing_or_a_switch_passes(override):
    assert override_problem(override) is None


@pytest.mark.parametrize("override", ["+judge.options.api_key=abc", "+judge.options.token.value=abc",
                                      "+judge.options.api_key@pkg=abc"])
def test_a_value_under_a_credential_named_key_at_any_depth(override):
    """Any part of the dotted key (the value nested under it), the key of a package override
    (``key@package=``)."""
    message = _refusal(override)
    assert "(named like a credential; not shown)" in message and "abc" not in message


@pytest.mark.parametrize("key", ["judge.options.api_key_env", "judge.options.api-key-env", "api_key_env"])
@pytest.mark.parametrize("value", ["abc-def", "[abc-def,MY_KEY]", "MY_KEY,abc-def"])
def test_a_key_given_where_its_variables_name_goes(key, value):
    """``api_key_env`` takes a NAME: any value of a sweep or list that cannot be one is refused."""
    message = _refusal(f"{key}={value}")
    assert message == (f"refusing {key} on the command line: its value is or looks like a secret (not the NAME "
                       "of an environment variable; not shown); secrets are read from environment variables only "
                       "(e.g. judge.options.api_key_env=MY_KEY_VAR)")


@pytest.mark.parametrize("override", ["judge.options.api_key_env='MY_KEY'", 'judge.options.api_key_env="MY_KEY"',
                                      "judge.options.api_key_env=[MY_KEY,OTHER_KEY]",
                                      "judge.options.api_key_env=MY_KEY,OTHER_KEY",
                                      "judge.options.api_key_env=[MY_KEY,X2FA_KEY]"])
def test_names_of_variables_quoted_or_swept_pass(override):
    assert override_problem(override) is None


@pytest.mark.parametrize("override", ["+judge.options={api-key: abc}", "+judge.options={n_ctx: 1, Cookie: abc}",
                                      "+judge.options=choice({n_ctx: 1},{api-key: abc})"])
def test_a_mapping_with_a_credential_named_key(override):
    """A mapping's keys are names too, in any value of a sweep."""
    assert override_problem(override) == (
        "judge.options", "its value is or looks like a secret (a key of the mapping is named like a credential; "
        "not shown); secrets are read from environment variables only (e.g. judge.options.api_key_env=MY_KEY_VAR)")


@pytest.mark.parametrize("override", ["+judge.options={n_ctx: 4096}", "+judge.options=choice({n_ctx: 1},{seed: 2})",
                                      "+judge.options={api_key_env: MY_KEY}"])
def test_a_mapping_without_one_passes(override):
    assert override_problem(override) is None


def _config_problem(conf: dict) -> str | None:
    return config_problem(OmegaConf.create(conf))


def test_every_value_that_reads_the_environment_is_named():
    problem = _config_problem({"a": "${oc.env:HOME}", "b": {"c": ["x", "${env:USER}"]}})
    assert problem is not None and problem.startswith(
        "refusing to run: config value(s) a, b.c[1] read environment variables (${oc.env:...}; not shown)")
    assert environment_paths("${oc.env:HOME}") == ["<value>"] and environment_paths(["x"]) == []


def test_a_secret_made_by_an_interpolation_is_found_resolved():
    """Found once resolved: a key split over two values, in a dict or a list, beside a value that
    cannot be resolved here (left out, the others still checked); its path as the config names it."""
    key = _key()
    head, tail = key[:3], key[3:]
    base = {"head": head, "skip": "${absent.node}"}  # resolves nowhere (${hydra:...} does in a Hydra run)
    assert _config_problem({**base, "m": "${head}" + tail}) == (
        "refusing to run: config value(s) m look like secrets (not shown); secrets are read from environment "
        "variables only")
    assert "value(s) l[1] look like" in _config_problem({**base, "l": ["x", "${head}" + tail]})
    nested = {"skip": "${absent.node}", "l": ["${head}" + tail]}
    assert "value(s) d.l[0] look like" in _config_problem({**base, "d": nested})
    assert _config_problem({**base, "m": "${head}" + "ordinary"}) is None


def test_a_secret_beside_a_value_that_cannot_be_resolved_is_found_raw():
    key = _key()
    assert "value(s) m look like" in _config_problem({"m": f"{key} ${{absent.node}}"})


def test_a_key_that_itself_looks_like_a_secret_is_not_shown():
    key = _key()
    problem = _config_problem({"opts": {key: 1}})
    assert problem is not None and key not in problem and "config value(s) a key (not shown) look like" in problem


def test_a_bare_value_and_credential_names_set_to_nothing():
    key = _key()
    assert secret_paths(key) == ["<value>"] and secret_paths([key]) == ["[0]"]
    assert secret_paths({"api_key": "null", "token": None, "password": "", "secret": {}, "apikeys": [],
                         "auth_token": False}) == []
    assert secret_paths({"api_key": "NULL"}) == ["api_key"]  # only YAML's own null spelling is nothing


PREFIX = ("judge.options.api_key_env must be the NAME of an environment variable holding the key "
          "(e.g. OPENAI_API_KEY), never the key itself")
UNSHOWN = " (the value given is not shown: it may be a key)"


@pytest.mark.parametrize("env, tail", [
    ("my key", ", got 'my key'"),                                   # short, no key's shape: shown
    ("x-" * 19 + "ab", ", got '" + "x-" * 19 + "ab'"),               # 40 characters: shown
    ("x-" * 20 + "a", UNSHOWN),                                     # 41: not shown
    ("id-AbCdEfGh12345678", UNSHOWN),                               # a run of 16 letters and digits
    ("id-abcdefghijklmnop", UNSHOWN),                               # ... of lower-case letters alone too
    ("sk-" + "a1" * 24, UNSHOWN),                                   # an OpenAI key's shape
    (12345, UNSHOWN),                                               # not text
    ("k" + "a1b2" * 8, UNSHOWN),                                    # a name-like key: letters and digits mixed
])
def test_an_api_key_env_that_is_no_name_is_refused_and_a_key_never_shown(env, tail):
    from ragscale.actors.engines.openai_endpoint import key_env

    with pytest.raises(UserError) as e:
        key_env(env)
    assert str(e.value) == PREFIX + tail
    assert key_env("OPENAI_API_KEY") == "OPENAI_API_KEY" and key_env("my_key_2") == "my_key_2"
