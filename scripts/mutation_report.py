"""The mutation score of the core after ``mutmut run`` (``make mutate``, docs/testing.md).

Reads mutmut's results, sets aside the mutants listed as equivalent in
tests/mutation_equivalents.json (each with its reason), and writes mutants/report.md and
mutants/report.json: the score per module and overall, and every surviving mutant with its diff.
Exits 1 when the score is below ``--min`` (percent).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENTS = ROOT / "tests" / "mutation_equivalents.json"
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min", type=float, default=90.0, help="the lowest acceptable score in percent (default 90)")
    args = ap.parse_args(argv)
    statuses = parse_results(mutmut("results", "--all", "true"))
    if not statuses:
        print("no mutation results: run `mutmut run` first (make mutate)", file=sys.stderr)
        return 2
    equivalent = json.loads(EQUIVALENTS.read_text())  # {mutant name: why it is equivalent}
    stale = sorted(set(equivalent) - set(statuses))
    result = score(statuses, equivalent)
    survivors = sorted(n for n, s in statuses.items() if s not in CAUGHT | UNCHECKED and n not in equivalent)
    diffs = {n: diff(n) for n in survivors}
    out = ROOT / "mutants"
    (out / "report.json").write_text(json.dumps({**result, "not_caught": {n: statuses[n] for n in survivors},
                                                 "equivalent": equivalent, "stale_equivalents": stale}, indent=2))
    o = result["overall"]
    lines = [f"# Mutation score: {o['score']}% ({o['caught']} of {o['mutants'] - o['equivalent']} caught, "
             f"{o['equivalent']} equivalent)", "",
             *([f"**Incomplete: {o['unchecked']} mutants not checked** (run `make mutate` to the end).", ""]
               if o.get("unchecked") else []), "| module | mutants | caught | equivalent | not caught | score |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {m} | {c['mutants']} | {c['caught']} | {c['equivalent']} | {c['not_caught']} | {c['score']} |"
              for m, c in result["modules"].items() if c["mutants"]]
    lines += ["", f"## Not caught ({len(survivors)})", ""]
    for n in survivors:
        lines += [f"### {n} ({statuses[n]})", "", "```diff", diffs[n].strip(), "```", ""]
    if stale:
        lines += ["## Stale entries in tests/mutation_equivalents.json", "", *(f"- {n}" for n in stale), ""]
    (out / "report.md").write_text("\n".join(lines))
    print(f"mutation score {o['score']}%: {o['caught']} caught, {len(survivors)} not caught, "
          f"{o['equivalent']} equivalent" + (f", {o['unchecked']} NOT CHECKED" if o.get("unchecked") else "")
          + f"; report: {out / 'report.md'}")
    return 0 if o["score"] is not None and o["score"] >= args.min and not o.get("unchecked") else 1


if __name__ == "__main__":
    sys.exit(main())
