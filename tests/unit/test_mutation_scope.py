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


def _fake_tree(tmp_path, survivors: str):
    """A copy of scripts/mutate.sh beside a fake ``.venv``: its python answers mutation_report.py's
    ``--survivors`` with ``survivors`` and its mutmut writes the names it was given to calls.txt."""
    import shutil
    import stat

    (tmp_path / "scripts").mkdir()
    shutil.copy(os.path.join(ROOT, "scripts", "mutate.sh"), tmp_path / "scripts" / "mutate.sh")
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    (tmp_path / "survivors.txt").write_text(survivors)
    fakes = {"python": '#!/bin/sh\ncase "$*" in *--survivors*) cat "$(dirname "$0")/../../survivors.txt";; '
                       '*--floor*) echo "report $*" >> "$(dirname "$0")/../../calls.txt";; esac\n',
             "mutmut": '#!/bin/sh\necho "mutmut $*" >> "$(dirname "$0")/../../calls.txt"\n'}
    for name, text in fakes.items():
        (bin_ / name).write_text(text)
        (bin_ / name).chmod((bin_ / name).stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize("survivors", ["", "ragscale.secrets.x_f__mutmut_1\nragscale.secrets.x_f__mutmut_2\n"])
def test_a_recheck_runs_only_the_mutants_left(tmp_path, survivors):
    """``make mutate RECHECK=1`` gives mutmut the names of the mutants not caught; with none left it
    reports the last run and runs no mutant (mutmut given no name runs every one of the scope: on main
    an empty list did that, hours on 2 cores)."""
    import subprocess

    _fake_tree(tmp_path, survivors)
    # the variables the script reads set by the test alone (make mutate exports MODULES to the tests it runs)
    env = {k: v for k, v in os.environ.items() if k not in ("MODULES", "BASE", "MUTATE_FLOOR", "MUTATE_JOBS")}
    env.update(RECHECK="1", MUTATE_JOBS="3")
    res = subprocess.run(["bash", str(tmp_path / "scripts" / "mutate.sh")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    runs = [c for c in calls if c.startswith("mutmut")]
    if survivors:
        assert runs == ["mutmut run --max-children 3 ragscale.secrets.x_f__mutmut_1 "
                        "ragscale.secrets.x_f__mutmut_2"]
        assert "re-checking 2 mutant(s)" in res.stdout
    else:
        assert runs == [] and "no mutant left to re-check" in res.stdout
    assert calls[-1].startswith("report scripts/mutation_report.py --floor 95")


def test_an_equivalent_entry_whose_mutant_a_test_catches_is_stale_and_counts_as_caught():
    """An entry of tests/mutation_equivalents.json names a mutant no test can tell apart: if a test
    catches it (the entry's reason was wrong, or the module's mutants were renumbered and the name
    now names another mutant) it is listed as stale and counts as caught, not as equivalent."""
    statuses = {"m.x_f__mutmut_1": "killed", "m.x_f__mutmut_2": "survived", "m.x_f__mutmut_3": "timeout",
                "m.x_f__mutmut_4": "not checked", "m.x_f__mutmut_5": "survived"}
    listed = {f"m.x_f__mutmut_{i}": "why" for i in (1, 2, 3, 4, 9)} | {"other.x_g__mutmut_1": "why"}
    kept, stale = mutation_report.equivalents(statuses, listed, {"m"})
    assert kept == {"m.x_f__mutmut_2": "why", "m.x_f__mutmut_4": "why"}
    assert stale == ["m.x_f__mutmut_1 (caught)", "m.x_f__mutmut_3 (caught)", "m.x_f__mutmut_9 (no such mutant)"]
    counts = mutation_report.score(statuses, kept)["modules"]["m"]
    assert (counts["caught"], counts["equivalent"], counts["not_caught"], counts["unchecked"]) == (2, 1, 1, 1)
