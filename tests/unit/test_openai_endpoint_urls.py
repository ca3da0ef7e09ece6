"""An OpenAI-compatible endpoint's URL and key name (ragscale.actors.engines.openai_endpoint): the host,
which endpoints always want a key, the base URL's normal form and its checks, and a key pasted where
the variable's name goes, refused without being shown."""

from __future__ import annotations

import pytest

from ragscale.actors.engines.openai_endpoint import chat_base_url, host, is_azure, key_env, needs_key
from ragscale.errors import UserError


@pytest.mark.parametrize("url, expected", [
    ("https://API.OpenAI.com/v1", "api.openai.com"),
    ("http://127.0.0.1:8000/v1", "127.0.0.1"),
    ("/v1", ""),
    ("http:///v1", ""),
    ("", ""),
])
def test_host_is_the_lower_case_host_name_or_empty(url, expected):
    assert host(url) == expected


@pytest.mark.parametrize("url, key, azure", [
    ("https://api.openai.com/v1", True, False),
    ("https://my-res.openai.azure.com/openai", True, True),
    ("https://My-Res.OpenAI.Azure.COM/openai", True, True),
    ("https://azure.com.example.org/v1", False, False),
    ("https://notazure.com/v1", False, False),
    ("http://127.0.0.1:8000/v1", False, False),
    ("/v1", False, False),
])
def test_openai_and_azure_endpoints_always_want_a_key(url, key, azure):
    assert (needs_key(url), is_azure(url)) == (key, azure)


@pytest.mark.parametrize("base_url, model, expected", [
    (None, "gpt-4o-mini", "https://api.openai.com/v1"),
    ("", "o3-mini", "https://api.openai.com/v1"),
    (" http://127.0.0.1:8000/v1/ ", "qwen", "http://127.0.0.1:8000/v1"),
    ("http://127.0.0.1:8000/v1//", "qwen", "http://127.0.0.1:8000/v1"),
    ("http://127.0.0.1:8000/v1/chat/completions", "qwen", "http://127.0.0.1:8000/v1"),
    ("https://proxy.example/route-X/", "qwen", "https://proxy.example/route-X"),
    ("https://proxy.example/XX", "qwen", "https://proxy.example/XX"),
])
def test_the_base_url_loses_trailing_slashes_and_chat_completions_only(base_url, model, expected):
    assert chat_base_url(base_url, model) == expected


@pytest.mark.parametrize("base_url", ["http:///v1", "ftp://host/v1", "127.0.0.1:8000/v1"])
def test_a_base_url_without_http_scheme_or_host_is_refused(base_url):
    with pytest.raises(UserError) as e:
        chat_base_url(base_url, "qwen")
    assert str(e.value) == f"judge.options.base_url must be an http(s) URL, got {base_url.rstrip('/')!r}"


def test_a_non_openai_model_without_a_base_url_is_refused():
    with pytest.raises(UserError) as e:
        chat_base_url(None, "qwen")
    assert str(e.value) == ("judge engine 'openai': set judge.options.base_url to the server's OpenAI-compatible "
                            "URL (e.g. http://127.0.0.1:8000/v1) for model 'qwen'")


HIDDEN = " (the value given is not shown: it may be a key)"


@pytest.mark.parametrize("env, shown", [
    ("my key", ", got 'my key'"),
    ("https://user:pw@example.com", HIDDEN),
    ("Bearer abc12345", HIDDEN),
    ("x-" * 21, HIDDEN),
    ("x-" * 20, ", got " + repr("x-" * 20)),
    ("abcdefgh12345678 z", HIDDEN),
    (3, HIDDEN),
])
def test_a_key_env_that_is_no_variable_name_is_refused_and_a_key_like_value_not_shown(env, shown):
    with pytest.raises(UserError) as e:
        key_env(env)
    assert str(e.value) == ("judge.options.api_key_env must be the NAME of an environment variable holding the key "
                            f"(e.g. OPENAI_API_KEY), never the key itself{shown}")


def test_a_variable_name_is_returned():
    assert key_env("OPENAI_API_KEY") == "OPENAI_API_KEY"
