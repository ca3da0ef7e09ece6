"""Every module of ragscale/ is either in the mutation scope (pyproject's ``[tool.mutmut]
only_mutate``) or left out of it in docs/testing.md's table with its reason (issue 37): a new module
is put on one side or the other, never forgotten. And the scope's tooling: ``make mutate
MODULES=...`` picks modules of the scope by path or dotted name, refuses a name outside it, and the
report's floors (tests/mutation_floors.json) name modules of the scope, each with its reason."""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import mutation_report  # noqa: E402 - scripts/mutation_report.py

ROW = re.compile(r"^\| `(ragscale/[\w/]+\.py)` \| (.+?) \|$")


def scope() -> set[str]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        return set(tomllib.load(fh)["tool"]["mutmut"]["only_mutate"])


def left_out() -> dict[str, str]:
    with open(os.path.join(ROOT, "docs", "testing.md"), encoding="utf-8") as fh:
        return {m[1]: m[2].strip() for m in map(ROW.match, fh.read().splitlines()) if m}


def modules() -> set[str]:
    found = set()
    for root, _, names in os.walk(os.path.join(ROOT, "ragscale")):
        found |= {os.path.relpath(os.path.join(root, n), ROOT) for n in names if n.endswith(".py")}
    return found


def test_every_module_is_in_the_scope_or_left_out_with_a_reason():
    inside, outside = scope(), left_out()
    assert not inside & set(outside), "in the scope and left out at once"
    assert sorted(modules() - inside - set(outside)) == [], "modules neither in the mutation scope nor left out"
    assert sorted((inside | set(outside)) - modules()) == [], "the scope or the table names modules that do not exist"
    assert all(len(why.split()) >= 3 for why in outside.values()), "every module left out says why"


def test_modules_are_picked_by_path_or_dotted_name_and_only_from_the_scope():
    assert mutation_report.select("ragscale/secrets.py, ragscale.io.output") == ["ragscale.io.output", "ragscale.secrets"]
    assert mutation_report.dotted("ragscale/io/output.py") == "ragscale.io.output" == mutation_report.dotted("ragscale.io.output")
    with pytest.raises(SystemExit, match="not in the mutation scope.*ragscale.cli"):
        mutation_report.select("ragscale/cli.py")


def test_floors_name_modules_of_the_scope_with_a_reason():
    path = os.path.join(ROOT, "tests", "mutation_floors.json")
    own = json.load(open(path)) if os.path.exists(path) else {}
    in_scope = set(mutation_report.scope())
    for module, entry in own.items():
        assert module in in_scope and 0 <= entry["floor"] < 95 and len(entry["why"].split()) >= 5, module


def test_a_module_under_its_floor_fails_the_report():
    result = {"modules": {"a": {"score": 94.9}, "b": {"score": 80.0}, "c": {"score": None}}}
    assert mutation_report.below_floor(result, {"b": 75.0}, 95.0) == ["a 94.9% < 95.0%"]
    assert mutation_report.below_floor(result, {"a": 90.0, "b": 80.0}, 95.0) == []
