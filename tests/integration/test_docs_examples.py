"""Every code block of README.md, CONTRIBUTING.md and docs/*.md is checked, and every example
is executed, so that an example can never rot (docs/testing.md, "Documentation examples").

- Every fenced block carries a language tag. ``python`` and shell blocks (``bash``, ``sh``,
  ``shell``, ``console``) are executed; ``text``, ``json``, ``jsonl``, ``yaml``, ``csv`` and
  ``toml`` blocks are data or output (``json``/``jsonl``/``yaml``/``toml`` must parse).
- ``<!-- not run: REASON -->`` on the line before a block leaves it out (a reason is required);
  the list is printed. ``<!-- file: NAME -->`` before a data block writes it to NAME in the
  document's working folder, for the examples after it to read.
- The examples of one document run in order in a fresh working folder that mirrors the checkout
  (symlinks to its tracked top-level entries and ``.venv``): Python blocks in one interpreter, as
  a notebook (a last expression's value is printed), each shell command line in ``bash``.
  ``ragscale run`` / ``ragscale prompts`` lines (and ``python -m ragscale.run`` / ``.dryrun``)
  without a ``limit=`` get ``limit=3``; ``make run`` runs as written (a 9-record slice).
  A command must exit 0, or the code its comment states: ``# refused (exit code 2)``.
- Runs share the session's Ray instance and judge cache (tests/conftest.py), so a judged example
  over records an earlier example judged is served from the cache (README.md runs first).
"""

from __future__ import annotations

import csv
import glob
import io
import json
import os
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = ["README.md", "CONTRIBUTING.md",
        *sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))]
SHELL = {"bash", "sh", "shell", "console"}
RUN = {"python", *SHELL}
DATA = {"text", "json", "jsonl", "yaml", "csv", "toml"}
LIMIT = 3  # added to ragscale run / prompts lines that set none
TIMEOUT = 600  # seconds per command or Python block
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
NOT_RUN = re.compile(r"^<!--\s*not run\b(.*?)-->$")
FILE = re.compile(r"^<!--\s*file:\s*(.*?)\s*-->$")
EXIT = re.compile(r"\(exit code (\d+)\)")
RAGSCALE_RUN = re.compile(r"(?:^|[\s/;&|(])(?:ragscale\s+(?:run|prompts)|-m\s+ragscale\.(?:run|dryrun))(?=\s|$)")
# gitignored outputs of runs: never mirrored into a working folder (an example writes its own)
NOT_MIRRORED = {".git", "outputs", "multirun", "mlflow.db", "mlruns", ".pytest_cache", "mutants", ".ragscale_cache",
                "build", "dist"}


@dataclass
class Block:
    doc: str
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    not_run: str | None = None  # the reason, "" when the marker has none
    file: str | None = None  # <!-- file: NAME -->

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(doc: str) -> list[Block]:
    """The fenced code blocks of ``doc`` (a path relative to the checkout), with their markers."""
    with open(os.path.join(ROOT, doc), encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.groups()
        close = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        j, body = i + 1, []
        while j < len(lines) and not close.match(lines[j]):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        before = lines[k].strip() if k >= 0 else ""
        block = Block(doc, i + 1, info.strip().split()[0].lower() if info.strip() else "", "\n".join(body) + "\n")
        if (nr := NOT_RUN.match(before)) is not None:
            block.not_run = nr.group(1).strip().lstrip(":").strip()
        elif (fm := FILE.match(before)) is not None:
            block.file = fm.group(1)
        out.append(block)
        i = j + 1
    return out


def all_blocks() -> list[Block]:
    return [b for doc in DOCS if os.path.exists(os.path.join(ROOT, doc)) for b in blocks(doc)]


def problems(block: Block) -> list[str]:
    """What is wrong with a block as written (no execution)."""
    where = block.where
    if not block.lang:
        return [f"{where}: a code block without a language tag (python, bash, text, json, ...)"]
    if block.lang not in RUN | DATA:
        return [f"{where}: unknown language tag {block.lang!r} (run: {sorted(RUN)}; data: {sorted(DATA)})"]
    found = []
    if block.not_run is not None:
        if not block.not_run:
            found.append(f"{where}: <!-- not run --> without a reason (<!-- not run: REASON -->)")
        if block.lang in DATA:
            found.append(f"{where}: <!-- not run --> before a {block.lang} block, which is never run")
    if block.file is not None and block.lang not in DATA:
        found.append(f"{where}: <!-- file: ... --> before a {block.lang} block (only data blocks are written)")
    try:
        if block.lang == "json":
            json.loads(block.text)
        elif block.lang == "jsonl":
            for line in block.text.splitlines():
                if line.strip():
                    json.loads(line)
        elif block.lang == "yaml":
            import yaml

            yaml.safe_load(block.text)
        elif block.lang == "toml" and sys.version_info >= (3, 11):
            import tomllib

            tomllib.loads(block.text)
        elif block.lang == "csv":
            rows = list(csv.reader(io.StringIO(block.text)))
            if len({len(r) for r in rows if r}) > 1:
                found.append(f"{where}: csv rows of different lengths")
        elif block.lang == "python":
            compile(block.text, where, "exec")
    except Exception as e:  # noqa: BLE001 - any parse error is the finding
        found.append(f"{where}: {block.lang} block does not parse: {type(e).__name__}: {str(e)[:200]}")
    return found


def link_problems(doc: str) -> list[str]:
    """Relative links (and their #anchors) and docs/NAME.md mentions that point nowhere."""
    path = os.path.join(ROOT, doc)
    text = open(path, encoding="utf-8").read()
    text_out_of_code = re.sub(r"(?ms)^\s*(```|~~~).*?^\s*\1\s*$", "", text)
    found = []
    for target, anchor in re.findall(r"\]\(([^)\s#]*)(#[^)\s]*)?\)", text_out_of_code):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s):, mailto:
        dest = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
        if not os.path.exists(dest):
            found.append(f"{doc}: link to {target} (missing)")
        elif anchor and dest.endswith(".md") and anchor[1:] not in slugs(dest):
            found.append(f"{doc}: link to {target}{anchor} (no such heading)")
    for name in sorted(set(re.findall(r"\bdocs/([\w.-]+\.md)\b", text))):
        if not os.path.exists(os.path.join(ROOT, "docs", name)):
            found.append(f"{doc}: mentions docs/{name} (missing)")
    return found


def slugs(path: str) -> set[str]:
    """GitHub's anchors of a markdown file's headings."""
    heads = re.findall(r"(?m)^#{1,6}\s+(.*?)\s*$", re.sub(r"(?ms)^\s*(```|~~~).*?^\s*\1\s*$", "",
                                                          open(path, encoding="utf-8").read()))
    return {re.sub(r"[^\w\- ]", "", h.lower().replace("`", "")).replace(" ", "-") for h in heads}


def test_every_block_is_tagged_parses_and_every_link_resolves(capsys):
    """Static checks of every document (no execution); prints the blocks that are not run."""
    found = [p for b in all_blocks() for p in problems(b)]
    found += [p for doc in DOCS if os.path.exists(os.path.join(ROOT, doc)) for p in link_problems(doc)]
    skipped = [b for b in all_blocks() if b.not_run and b.lang in RUN]
    with capsys.disabled():
        print(f"\n[docs] {len(skipped)} code blocks not run:")
        for b in skipped:
            print(f"[docs]   {b.where} ({b.lang}): {b.not_run}")
    assert not found, "\n".join(found)


def test_parser_reads_markers_and_finds_faults(tmp_path, monkeypatch):
    """The checks themselves: an untagged block, a reasonless not-run, invalid JSON are found."""
    doc = tmp_path / "x.md"
    doc.write_text("```\nls\n```\n\n<!-- not run -->\n```bash\nls\n```\n\n<!-- not run: needs a GPU -->\n"
                   "```bash\nnvidia-smi\n```\n\n```json\n{\"a\": 1, ...}\n```\n\n<!-- file: a.csv -->\n"
                   "```csv\nq,a\nx,y\n```\n\n```bash\nragscale run +scenario=custom  # note (exit code 2)\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path))
    found = blocks("x.md")
    assert [b.lang for b in found] == ["", "bash", "bash", "json", "csv", "bash"]
    assert [b.not_run for b in found][:3] == [None, "", "needs a GPU"] and found[4].file == "a.csv"
    msgs = [p for b in found for p in problems(b)]
    assert len(msgs) == 3 and "language tag" in msgs[0] and "without a reason" in msgs[1] and "json" in msgs[2]
    assert command_of(found[5].text.strip()) == ("ragscale run +scenario=custom limit=3  # note (exit code 2)", 2)
    assert command_of("ragscale run --help") == ("ragscale run --help", 0)
    assert command_of("ragscale run 'input=a #b.jsonl' limit=2") == ("ragscale run 'input=a #b.jsonl' limit=2", 0)
    assert command_of("make run") == ("make run", 0)


def test_inputs_needs_table_is_the_catalog():
    """docs/inputs.md's "What each metric needs" lists every metric under the fields the catalog
    says it needs (ragscale.catalog), no more, no less. The catalog is read in a fresh interpreter:
    this process's also holds the metrics other test modules declare (test_new_metric.py)."""
    import json
    import subprocess
    import sys

    text = open(os.path.join(ROOT, "docs", "inputs.md"), encoding="utf-8").read()
    section = text.split("## What each metric needs", 1)[1].split("\n## ", 1)[0]
    documented = {}
    for needs, names in re.findall(r"(?m)^\| ([a-z, ]+) \| (`.*`) \|$", section):
        documented[frozenset(needs.split(", "))] = set(re.findall(r"`([^`]+)`", names))
    rows = subprocess.run([sys.executable, "-m", "ragscale.commands.metrics", "--json"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.splitlines()
    catalog: dict = {}
    for row in map(json.loads, rows):
        catalog.setdefault(frozenset(row["needs"]), set()).add(row["name"])
    assert documented == catalog


# ---- execution ----------------------------------------------------------------------------------

def split_comment(line: str) -> tuple[str, str]:
    """``line`` as (code, trailing shell comment), quotes respected."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i:]
    return line, ""


def command_of(line: str) -> tuple[str, int]:
    """The command a documented line runs (a ``limit=`` added to a ragscale run that has none)
    and the exit code it must end with (its comment's ``(exit code N)``, else 0)."""
    code, comment = split_comment(line)
    if RAGSCALE_RUN.search(code) and not re.search(r"(?:^|\s)['\"]?limit=", code) and not re.search(
            r"\s(--help|-h)(\s|$)", code):
        code = f"{code} limit={LIMIT}"
    expected = EXIT.search(comment)
    return (f"{code}  {comment}" if comment else code), int(expected.group(1)) if expected else 0


def shell_lines(block: Block) -> list[str]:
    """The command lines of a shell block: continuations joined, comments and blank lines left
    out; in a ``console`` block only the ``$ `` lines (the others are output)."""
    out, pending = [], ""
    for raw in block.text.splitlines():
        if block.lang == "console":
            if not raw.startswith("$ "):
                continue
            raw = raw[2:]
        line = pending + raw
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        if line.strip() and not line.strip().startswith("#"):
            out.append(line.strip())
    return out


KERNEL = r'''
import ast, json, os, sys, traceback
proto = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)  # everything the blocks print goes to the log
ns = {"__name__": "__main__"}
for request in sys.stdin:
    req = json.loads(request)
    try:
        tree = ast.parse(req["code"], req["name"])
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, req["name"], "exec"), ns)
        if last is not None:  # a notebook shows the value of a block's last expression
            value = eval(compile(ast.Expression(last.value), req["name"], "eval"), ns)
            if value is not None:
                print(repr(value))
        reply = {"ok": True}
    except BaseException:
        reply = {"ok": False, "error": traceback.format_exc()}
    sys.stdout.flush()
    sys.stderr.flush()
    proto.write(json.dumps(reply) + "\n")
'''


class Notebook:
    """One Python interpreter for a document's Python blocks, in its working folder."""

    def __init__(self, cwd: str, env: dict, log) -> None:
        self.proc = subprocess.Popen([sys.executable, "-u", "-c", KERNEL], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=log, text=True)

    def run(self, code: str, name: str) -> dict:
        self.proc.stdin.write(json.dumps({"code": code, "name": name}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT)
        if not ready:
            return {"ok": False, "error": f"no answer within {TIMEOUT} s"}
        line = self.proc.stdout.readline()
        return json.loads(line) if line else {"ok": False, "error": f"the interpreter ended ({self.proc.poll()})"}

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def mirror(workdir: str) -> None:
    """``workdir`` as a checkout: symlinks to the tracked top-level entries and the venvs."""
    try:
        tracked = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True).stdout
        names = {p.split("/", 1)[0] for p in tracked.splitlines() if p}
    except (OSError, subprocess.CalledProcessError):
        names = set(os.listdir(ROOT)) - NOT_MIRRORED
    names |= {n for n in (".venv", ".venv-vllm") if os.path.exists(os.path.join(ROOT, n))}
    for name in sorted(names):
        if os.path.lexists(os.path.join(ROOT, name)):
            os.symlink(os.path.join(ROOT, name), os.path.join(workdir, name))


def write_file(workdir: str, block: Block) -> None:
    dest = os.path.join(workdir, block.file)
    parent = os.path.realpath(os.path.dirname(dest))
    assert parent.startswith(os.path.realpath(workdir)), f"{block.where}: {block.file} is outside the working folder"
    os.makedirs(parent, exist_ok=True)
    with open(dest, "w", encoding="utf-8") as fh:
        fh.write(block.text)


def runnable_docs() -> list[str]:
    return [d for d in DOCS if os.path.exists(os.path.join(ROOT, d))
            and any(b.lang in RUN and b.not_run is None for b in blocks(d))]


@pytest.mark.integration
@pytest.mark.parametrize("doc", runnable_docs())
def test_examples_run_as_written(doc, tmp_path, capsys):
    """Every example of ``doc``, in order, in a working folder that mirrors the checkout."""
    workdir = str(tmp_path / "work")
    os.makedirs(workdir)
    mirror(workdir)
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    env.pop("PYTHONPATH", None)
    log_path = str(tmp_path / "examples.log")
    timings: list[tuple[str, str, float]] = []
    notebook = None
    with open(log_path, "w") as log:
        def fail(what: str) -> None:
            log.flush()
            tail = open(log_path, errors="replace").read()[-6000:]
            pytest.fail(f"{what}\n--- the examples' output (last lines) ---\n{tail}", pytrace=False)

        try:
            for block in blocks(doc):
                if block.file is not None:
                    write_file(workdir, block)
                if block.lang not in RUN or block.not_run is not None:
                    continue
                if block.lang == "python":
                    notebook = notebook or Notebook(workdir, env, log)
                    print(f"\n>>> {block.where} (python)", file=log, flush=True)
                    start = time.monotonic()
                    reply = notebook.run(block.text, block.where)
                    timings.append((block.where, "python block", time.monotonic() - start))
                    if not reply["ok"]:
                        fail(f"{block.where}: the Python block raised:\n{reply['error']}")
                    continue
                for line in shell_lines(block):
                    command, expected = command_of(line)
                    if re.match(r"^make\s", command):
                        # the mirror must never set up a venv of its own (setup.sh is a no-op when current)
                        subprocess.run(["bash", "scripts/setup.sh", "run"], cwd=ROOT, check=True,
                                       capture_output=True, timeout=TIMEOUT)
                    print(f"\n>>> {block.where}: {command}", file=log, flush=True)
                    start = time.monotonic()
                    try:
                        rc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=workdir, env=env,
                                            stdout=log, stderr=subprocess.STDOUT, timeout=TIMEOUT).returncode
                    except subprocess.TimeoutExpired:
                        fail(f"{block.where}: `{command}` ran past {TIMEOUT} s")
                    timings.append((block.where, command, time.monotonic() - start))
                    if rc != expected:
                        fail(f"{block.where}: `{command}` exited {rc}, expected {expected}")
        finally:
            if notebook is not None:
                notebook.close()
    with capsys.disabled():
        print(f"\n[docs] {doc}: {len(timings)} examples in {sum(t for *_, t in timings):.1f} s")
        for where, command, seconds in timings:
            print(f"[docs]   {seconds:6.1f} s  {where}  {command[:110]}")
