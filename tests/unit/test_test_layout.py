"""The test tree itself: pytest can collect all of it in one run, and the docs name tests that exist.

pytest imports test files by basename (rootdir import mode, no packages), so two files with one
name in tests/unit and tests/integration collect separately but fail together ("import file
mismatch") — the full `make test` run is the one that breaks. A guarantee in docs/ names the
test that holds it; a renamed or removed test must not leave the doc pointing at nothing.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
DOCS = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _prose(doc: Path) -> str:
    """The doc without its fenced code blocks (those show commands, e.g. a placeholder test file)."""
    return FENCE.sub("", doc.read_text(encoding="utf-8"))


def test_no_two_test_files_share_a_basename() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        seen[path.name].append(str(path.relative_to(ROOT)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"pytest cannot collect these together (rename one): {clashes}"


def test_every_test_the_docs_name_exists() -> None:
    defined: set[str] = set()
    for path in TESTS.rglob("*.py"):
        defined |= set(re.findall(r"^\s*(?:async )?def (test_\w+)", path.read_text(encoding="utf-8"), re.M))
    missing: list[str] = []
    for doc in DOCS:
        if not doc.exists():
            continue
        text = _prose(doc)
        name = doc.relative_to(ROOT)
        missing += [f"{name}: {p}" for p in sorted(set(re.findall(r"tests/[\w/]+\.py", text))) if not (ROOT / p).exists()]
        named = set(re.findall(r"`(?:[\w/.]*::)?(test_\w+)`", text)) | set(re.findall(r"::(test_\w+)", text))
        missing += [f"{name}: {t}" for t in sorted(named - defined)]
    assert not missing, "the docs name tests that do not exist:\n" + "\n".join(missing)
