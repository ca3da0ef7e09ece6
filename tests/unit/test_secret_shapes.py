"""How random a 40-character token must look to be an AWS secret access key, and a 12-character run
to be a key's body (ragscale.secrets, issue 37): upper case, lower case and digits all present and
the character class changing at least 12 times; two of the three classes in a run of 12 or more."""

from __future__ import annotations

from ragscale import secrets


def token(changes: int, classes: str = "Aa1") -> str:
    """40 characters whose class changes exactly ``changes`` times, cycling through ``classes``."""
    segments = changes + 1
    sizes = [40 // segments + (1 if i < 40 % segments else 0) for i in range(segments)]
    return "".join(classes[i % len(classes)] * n for i, n in enumerate(sizes))


def test_an_aws_secret_needs_three_classes_changing_often():
    assert len(token(12)) == 40 and secrets._random_40(token(12))
    assert not secrets._random_40(token(11))
    assert not secrets._random_40(token(20, "Aa"))  # no digit
    assert not secrets._random_40(token(20, "a1"))  # no upper case
    assert not secrets._random_40(token(20, "A1"))  # no lower case
    assert secrets._random_40(token(14, "Aa1/"))  # other characters are a class of their own
    assert secrets.looks_like_secret(f"key {token(12)} end") and not secrets.looks_like_secret(f"key {token(11)} end")


def test_a_key_body_mixes_two_classes_in_a_run_of_12():
    assert secrets._random_run("abcdefghijk1") and secrets._random_run("ABCDEFGHIJKl")
    assert not secrets._random_run("abcdefghij1")  # 11 characters
    assert not secrets._random_run("abcdefghijkl") and not secrets._random_run("123456789012")
    assert not secrets._random_run("cache_directory_for_models")
    assert secrets._random_run("x-" + "abcdefghijk1")
