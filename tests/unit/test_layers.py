"""The package's layers, enforced on the source (every import, module level or inside a
function) and on what importing the pure modules loads.

record/metrics/judges/io: pure (no Ray, torch, vLLM or transformers; no pipeline, report,
actors); actors/ (workers): no pipeline, no report, no Ray; pipeline/: no report; report/:
no pipeline, actors, Ray or torch. Only cli/api/plan/runner know everything.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "ragscale")
HEAVY = ("ray", "torch", "vllm", "transformers", "llama_cpp")

# layer (a module or package under ragscale/) -> import prefixes it must never use
RULES = {
    "record.py": HEAVY + ("ragscale.pipeline", "ragscale.report", "ragscale.actors"),
    "metrics": ("ray", "vllm", "llama_cpp", "ragscale.pipeline", "ragscale.report", "ragscale.actors"),
    "judges": HEAVY + ("ragscale.pipeline", "ragscale.report", "ragscale.actors"),
    "io": HEAVY + ("ragscale.pipeline", "ragscale.report", "ragscale.actors"),
    "actors": ("ray", "ragscale.pipeline", "ragscale.report"),
    "pipeline": ("ragscale.report",),
    "report": ("ray", "torch", "vllm", "llama_cpp", "ragscale.pipeline", "ragscale.actors"),
}
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
        for module, at_top in imports(path):
            if _hits(module, RULES[layer]) or (at_top and _hits(module, MODULE_LEVEL_ONLY.get(layer, ()))):
                bad.append(f"{os.path.relpath(path, ROOT)} imports {module}")
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
    code = ("import sys, ragscale, ragscale.record, ragscale.metrics.registry, ragscale.metrics.lexical, "
            "ragscale.metrics.bertscore, ragscale.judges, ragscale.io.inputs, ragscale.io.output, "
            "ragscale.io.frames, ragscale.report.summary, ragscale.report.leaderboard, ragscale.pipeline.graph, "
            "ragscale.pipeline.stages, ragscale.plan, ragscale.cli;"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
