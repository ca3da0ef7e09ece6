"""The package's layers, enforced on the source (every import, module level or inside a
function) and on what importing the pure modules loads.

record/row/record_fields/metrics/judges/io: pure (no Ray, torch, vLLM or transformers; no pipeline, report,
actors); stats/: pure and reads no records (numbers in, numbers out); actors/ (workers): no pipeline, no report, no Ray; pipeline/: no report; report/:
no pipeline, actors, Ray or torch. Only cli/commands/api/plan/driver know everything; no layer imports the
command line (cli, commands/) but a package's ``__main__`` entry point.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

# mutmut runs the unit tests in its copy (mutants/), whose modules carry its trampolines: several
# times their lines and an import of mutmut. The layout is the source's, the same for every mutant.
pytestmark = pytest.mark.skipif("MUTANT_UNDER_TEST" in os.environ, reason="checks the source tree, not mutmut's copy")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "ragscale")
HEAVY = ("ray", "torch", "vllm", "transformers", "llama_cpp")

# layer (a module or package under ragscale/) -> import prefixes it must never use
RULES = {
    "record.py": HEAVY + ("ragscale.pipeline", "ragscale.report", "ragscale.actors"),
    "row.py": HEAVY + ("ragscale.pipeline", "ragscale.report", "ragscale.actors"),
    "record_fields.py": HEAVY + ("ragscale.pipeline", "ragscale.report", "ragscale.actors"),
    "registry.py": HEAVY + ("ragscale.pipeline", "ragscale.report", "ragscale.actors"),
    "stage_kinds.py": HEAVY + ("ragscale.pipeline", "ragscale.report", "ragscale.actors"),  # the workers import it
    "metrics": ("ray", "vllm", "llama_cpp", "ragscale.pipeline", "ragscale.report", "ragscale.actors"),
    "judges": HEAVY + ("ragscale.pipeline", "ragscale.report", "ragscale.actors"),
    "io": HEAVY + ("ragscale.pipeline", "ragscale.report", "ragscale.actors"),
    "stats": HEAVY + ("ragscale.pipeline", "ragscale.report", "ragscale.actors", "ragscale.io", "ragscale.judges"),
    "actors": ("ray", "ragscale.pipeline", "ragscale.report"),
    "pipeline": ("ragscale.report",),
    "report": ("ray", "torch", "vllm", "llama_cpp", "ragscale.pipeline", "ragscale.actors"),
}
# the command line: the ``ragscale`` dispatcher and its subcommands. Like api, plan and driver it may import
# any layer (no rule of its own); the layers above never import it, except a package's __main__.py
# (``python -m ragscale.report``: the command's entry point, a shim over ragscale.commands)
COMMAND_LINE = ("ragscale.cli", "ragscale.commands")
# torch/transformers may be imported by metrics/ only inside functions (HHEM and model location helpers)
MODULE_LEVEL_ONLY = {"metrics": ("torch", "transformers")}


def imports(path: str) -> list[tuple[str, bool]]:
    """(imported module, at module level) for every import in a file."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, id(node) in top) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module, id(node) in top))
    return out


def files_of(layer: str) -> list[str]:
    path = os.path.join(PKG, layer)
    if os.path.isfile(path):
        return [path]
    return [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".py")]


def _hits(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("layer", sorted(RULES))
def test_layer_imports_nothing_above_it(layer):
    bad = []
    for path in files_of(layer):
        entry = os.path.basename(path) == "__main__.py"
        for module, at_top in imports(path):
            if (_hits(module, RULES[layer]) or (not entry and _hits(module, COMMAND_LINE))
                    or (at_top and _hits(module, MODULE_LEVEL_ONLY.get(layer, ())))):
                bad.append(f"{os.path.relpath(path, ROOT)} imports {module}")
    assert not bad, "\n".join(bad)


# the ``python -m ragscale.<name>`` shims over ragscale.commands (docs/configuration.md's commands table)
ENTRY_SHIMS = ("run.py", "agree.py", "calibrate.py", "compare.py", "plot.py")


def test_only_the_command_line_and_its_entry_points_import_it():
    """The command line (cli.py, commands/) sits on top: a library module never calls back into it."""
    top = ("cli.py", "commands", *ENTRY_SHIMS)
    bad = [f"{os.path.relpath(p, ROOT)} imports {m}" for d in os.listdir(PKG) if d not in top
           for p in files_of(d) if p.endswith(".py") and os.path.basename(p) != "__main__.py"
           for m, _ in imports(p) if _hits(m, COMMAND_LINE)]
    assert not bad, "\n".join(bad)


def test_ray_is_imported_only_by_the_pipeline():
    allowed = ("pipeline",)
    bad = [f"{os.path.relpath(p, ROOT)} imports {m}" for d in os.listdir(PKG) if d not in allowed
           for p in files_of(d) if p.endswith(".py") for m, _ in imports(p) if _hits(m, ("ray",))]
    assert not bad, "\n".join(bad)


def test_no_top_level_actors_or_conf_package():
    """The distribution exposes only the ``ragscale`` import name: workers and configs live inside it."""
    assert not os.path.exists(os.path.join(ROOT, "actors")) and not os.path.exists(os.path.join(ROOT, "conf"))
    assert os.path.isfile(os.path.join(PKG, "conf", "config.yaml"))


def test_importing_the_pure_layers_loads_no_heavy_module():
    code = ("import sys, ragscale, ragscale.record, ragscale.row, ragscale.record_fields, ragscale.judges.judge_input, "
            "ragscale.io.scan_ids, ragscale.metrics.registry, ragscale.metrics.lexical, "
            "ragscale.metrics.bertscore, ragscale.judges, ragscale.io.inputs, ragscale.io.output, "
            "ragscale.io.frames, ragscale.stats.intervals, ragscale.stats.paired, ragscale.report.summary, ragscale.report.leaderboard, ragscale.pipeline.graph, "
            "ragscale.pipeline.cpu_stages, ragscale.plan, ragscale.cli;"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# --- the layout explains itself (issue 34): no import cycle, no private name imported across modules,
# no module over MAX_LINES lines. Imports inside functions count: a lazy import hides a cycle from the
# interpreter, not from a reader.
MAX_LINES = 400


def module_names() -> dict[str, str]:
    """Dotted module name -> file, for every module of the package (a package is its __init__)."""
    out = {}
    for path in files_of("."):
        dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
        out[dotted.removesuffix(".__init__")] = path
    return out


def edges() -> tuple[dict[str, set[str]], list[str]]:
    """The package's import graph (module -> modules it imports) and each import of a private name
    (a leading underscore, not a dunder) from another module, as 'file:line imports module.name'."""
    mods = module_names()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    private = []
    for mod, path in mods.items():
        base = mod.split(".") if path.endswith("__init__.py") else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
            if isinstance(node, ast.Import):
                graph[mod] |= {a.name for a in node.names if a.name in mods} - {mod}
            elif isinstance(node, ast.ImportFrom):
                target = node.module or ""
                if node.level:
                    target = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
                for alias in node.names:
                    if f"{target}.{alias.name}" in mods:
                        graph[mod].add(f"{target}.{alias.name}")
                    elif target in mods and target != mod:
                        graph[mod].add(target)
                        if alias.name.startswith("_") and not alias.name.startswith("__"):
                            private.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} imports {target}.{alias.name}")
            graph[mod].discard(mod)
    return graph, private


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_counting_imports_inside_functions():
    found = cycles(edges()[0])
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_private_name_is_imported_across_modules():
    private = edges()[1]
    assert not private, "\n".join(private)


def test_no_module_is_over_the_line_limit():
    sizes = {os.path.relpath(p, ROOT): sum(1 for _ in open(p, encoding="utf-8")) for p in files_of(".")}
    assert sorted(f"{p} ({n})" for p, n in sizes.items() if n > MAX_LINES) == []
