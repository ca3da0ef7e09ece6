"""The mutation score after ``mutmut run`` (``make mutate``, docs/testing.md).

Reads mutmut's results, sets aside the mutants listed as equivalent in
tests/mutation_equivalents.json (each with its reason), and writes mutants/report.md and
mutants/report.json: the score per module and overall, and every surviving mutant with its diff.
Exits 1 when a module scores below its floor (``--floor``, or its own in
tests/mutation_floors.json) or mutants were left unchecked. ``--select`` prints the modules of
the scope that a ``MODULES=`` value names (``make mutate MODULES=...``), ``--survivors`` the
mutants not caught so far (``make mutate RECHECK=1``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENTS = ROOT / "tests" / "mutation_equivalents.json"
FLOORS = ROOT / "tests" / "mutation_floors.json"  # {module: {"floor": percent, "why": reason}}
# mutmut's statuses that count as caught; the rest (survived, no tests, suspicious, segfault)
# count as not caught. A timeout is a mutant that made the tests hang: caught. Mutants not
# checked yet (an interrupted or partial run) are counted apart and left out of the score.
CAUGHT = {"killed", "timeout", "caught by type check"}
UNCHECKED = {"not checked", "check was interrupted by user", "skipped"}
_LINE = re.compile(r"^\s+(\S+): (.+)$")
# "ragscale.metrics.aggregate.x_rb_agg__mutmut_3" or "ragscale.record.xǁRecordǁparse__mutmut_1"
_MODULE = re.compile(r"^(.+?)\.x[_ǁ]")


def mutmut(*args: str) -> str:
    """Run the mutmut command of this interpreter's environment; its stdout."""
    exe = Path(sys.executable).with_name("mutmut")
    return subprocess.run([str(exe), *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def diff(name: str) -> str:
    """The survivor's diff: mutmut's own function (in process: ``mutmut show`` costs a second
    per mutant), else ``mutmut show``."""
    try:
        from mutmut.mutation.diff_apply import get_diff_for_mutant

        return get_diff_for_mutant(name, path=module_of(name).replace(".", "/") + ".py")
    except Exception:  # noqa: BLE001 - another mutmut version: its command
        return mutmut("show", name)


def parse_results(text: str) -> dict[str, str]:
    """``mutmut results --all true``'s lines ``    NAME: STATUS`` as {name: status}."""
    return {m.group(1): m.group(2).strip() for m in map(_LINE.match, text.splitlines()) if m}


def module_of(name: str) -> str:
    m = _MODULE.match(name)
    return m.group(1) if m else name.rsplit(".", 1)[0]


def score(statuses: dict[str, str], equivalent: dict[str, str]) -> dict:
    """Per module and overall: mutants, caught, equivalent, not caught, and the score
    caught / (mutants - equivalent) in percent."""
    per: dict[str, Counter] = defaultdict(Counter)
    for name, status in statuses.items():
        c = per[module_of(name)]
        if status in UNCHECKED:
            c["unchecked"] += 1
            continue
        c["mutants"] += 1
        c["equivalent" if name in equivalent else "caught" if status in CAUGHT else "not_caught"] += 1

    keys = ("mutants", "caught", "equivalent", "not_caught", "unchecked")
    per = {m: {k: c[k] for k in keys} for m, c in per.items()}
    total = {k: sum(c[k] for c in per.values()) for k in keys}

    def pct(c: dict) -> float | None:
        n = c["mutants"] - c["equivalent"]
        return round(100.0 * c["caught"] / n, 2) if n else None

    return {"overall": {**total, "score": pct(total)},
            "modules": {m: {**c, "score": pct(c)} for m, c in sorted(per.items())}}


def equivalents(statuses: dict[str, str], listed: dict[str, str],
                in_scope: set[str]) -> tuple[dict[str, str], list[str]]:
    """The entries of tests/mutation_equivalents.json that hold (their mutant exists and no test
    catches it) and the stale ones of the modules in scope, each with why: "(no such mutant)", or
    "(caught)" (a test tells it apart: a wrong reason, or mutants renumbered by a change)."""
    kept = {n: why for n, why in listed.items() if n in statuses and statuses[n] not in CAUGHT}
    stale = sorted(f"{n} (no such mutant)" if n not in statuses else f"{n} (caught)"
                   for n in set(listed) - set(kept) if module_of(n) in in_scope)
    return kept, stale


def scope() -> list[str]:
    """The modules in pyproject's ``[tool.mutmut] only_mutate``, as dotted names."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    return [dotted(p) for p in conf["only_mutate"]]


def dotted(name: str) -> str:
    """``ragscale/io/output.py`` or ``ragscale.io.output`` -> ``ragscale.io.output``."""
    name = name.strip().removesuffix(".py").strip("/")
    return name.replace("/", ".")


def changed(base: str | None) -> list[str]:
    """The Python files under ragscale/ that differ from ``base`` (default: origin/main if there
    is one, else main), committed or not, and the untracked ones."""
    def git(*args: str) -> list[str]:
        r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return r.stdout.split() if r.returncode == 0 else []
    if not base:
        base = "origin/main" if git("rev-parse", "--verify", "-q", "origin/main") else "main"
    merge_base = (git("merge-base", base, "HEAD") or [base])[0]
    files = git("diff", "--name-only", merge_base, "--", "ragscale") + git(
        "ls-files", "--others", "--exclude-standard", "--", "ragscale")
    return [f for f in files if f.endswith(".py")]


def select(modules: str, base: str | None = None) -> list[str]:
    """The modules of the scope that ``modules`` names: paths or dotted names separated by spaces
    or commas, or ``changed`` (see :func:`changed`). A name outside the scope is an error."""
    in_scope = scope()
    names = changed(base) if modules.strip() == "changed" else modules.replace(",", " ").split()
    picked = [dotted(n) for n in names]
    if modules.strip() != "changed":
        outside = [n for n in picked if n not in in_scope]
        if outside:
            raise SystemExit(f"make mutate: not in the mutation scope (pyproject's [tool.mutmut]): {', '.join(outside)}")
    return [m for m in in_scope if m in picked]


def floors(default: float) -> dict[str, float]:
    """Each module's floor: its own in tests/mutation_floors.json, else ``default``."""
    own = json.loads(FLOORS.read_text()) if FLOORS.exists() else {}
    return {m: float(own[m]["floor"]) if m in own else default for m in scope()}


def below_floor(result: dict, floor: dict[str, float], default: float) -> list[str]:
    """The modules whose score is under their floor, as ``module score < floor`` lines."""
    return [f"{m} {c['score']}% < {floor.get(m, default)}%" for m, c in result["modules"].items()
            if c["score"] is not None and c["score"] < floor.get(m, default)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--floor", type=float, default=95.0,
                    help="the lowest score in percent a module may have (default 95; "
                         "tests/mutation_floors.json may set a module's own)")
    ap.add_argument("--modules", nargs="*", help="report these modules only (dotted names)")
    ap.add_argument("--select", metavar="MODULES", help="print the modules of the scope MODULES names, one a line")
    ap.add_argument("--base", default=None, help="with --select changed: the branch to compare with")
    ap.add_argument("--survivors", action="store_true",
                    help="print the mutants not caught so far (of --modules), one a line, and nothing else")
    args = ap.parse_args(argv)
    if args.select is not None:
        print("\n".join(select(args.select, args.base or None)))
        return 0
    statuses = parse_results(mutmut("results", "--all", "true"))
    in_scope = set(args.modules or scope())
    statuses = {n: s for n, s in statuses.items() if module_of(n) in in_scope}
    if args.survivors:
        equivalent = json.loads(EQUIVALENTS.read_text())
        print("\n".join(n for n, s in sorted(statuses.items()) if s not in CAUGHT and n not in equivalent))
        return 0
    if not statuses:
        print("no mutation results: run `mutmut run` first (make mutate)", file=sys.stderr)
        return 2
    # {mutant name: why it is equivalent}
    equivalent, stale = equivalents(statuses, json.loads(EQUIVALENTS.read_text()), in_scope)
    result = score(statuses, equivalent)
    floor = floors(args.floor)
    low = below_floor(result, floor, args.floor)
    survivors = sorted(n for n, s in statuses.items() if s not in CAUGHT | UNCHECKED and n not in equivalent)
    diffs = {n: diff(n) for n in survivors}
    out = ROOT / "mutants"
    (out / "report.json").write_text(json.dumps({**result, "below_floor": low,
                                                 "not_caught": {n: statuses[n] for n in survivors},
                                                 "equivalent": equivalent, "stale_equivalents": stale}, indent=2))
    o = result["overall"]
    lines = [f"# Mutation score: {o['score']}% ({o['caught']} of {o['mutants'] - o['equivalent']} caught, "
             f"{o['equivalent']} equivalent)", "",
             *([f"**Incomplete: {o['unchecked']} mutants not checked** (run `make mutate` to the end).", ""]
               if o.get("unchecked") else []), "| module | mutants | caught | equivalent | not caught | score | floor |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {m} | {c['mutants']} | {c['caught']} | {c['equivalent']} | {c['not_caught']} | {c['score']} "
              f"| {floor.get(m, args.floor)} |" for m, c in result["modules"].items() if c["mutants"]]
    if low:
        lines += ["", f"## Below the floor ({len(low)})", "", *(f"- {x}" for x in low)]
    lines += ["", f"## Not caught ({len(survivors)})", ""]
    for n in survivors:
        lines += [f"### {n} ({statuses[n]})", "", "```diff", diffs[n].strip(), "```", ""]
    if stale:
        lines += ["## Stale entries in tests/mutation_equivalents.json", "", *(f"- {n}" for n in stale), ""]
    (out / "report.md").write_text("\n".join(lines))
    print(f"mutation score {o['score']}%: {o['caught']} caught, {len(survivors)} not caught, "
          f"{o['equivalent']} equivalent" + (f", {o['unchecked']} NOT CHECKED" if o.get("unchecked") else "")
          + f"; report: {out / 'report.md'}")
    for x in low:
        print(f"below the floor: {x}")
    return 0 if o["score"] is not None and not low and not o.get("unchecked") else 1


if __name__ == "__main__":
    sys.exit(main())
