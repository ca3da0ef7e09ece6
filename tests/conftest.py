"""Shared fixtures. Data in ../shared/data is used where present; tests needing it skip otherwise."""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("RAGSCALE_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
MTRAG = os.path.join(SHARED, "data", "mtrag")
sys.path.insert(0, os.path.join(ROOT, "scripts"))


def shared_file(name: str) -> str:
    """Path of a file under ../shared/data/mtrag, or skip the test with the reason."""
    path = os.path.join(MTRAG, name)
    if not os.path.exists(path):
        pytest.skip(f"needs ../shared/data/mtrag/{name} (not present in a user's clone)")
    return path


@pytest.fixture
def responses10() -> str:
    return shared_file("responses-10.jsonl")


@pytest.fixture
def mtragun() -> str:
    return shared_file("mtragun-reference.jsonl")
