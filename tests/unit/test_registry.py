"""The one registry (ragscale/registry.py, issue 34): metric families, judges, engines, readers and
sinks by name, each kind's own entries registered by its home module, lazy engines, duplicate
refusal, one-line did-you-mean errors, and what the ``ragscale.plugins`` entry points register."""

from __future__ import annotations

import sys
import types

import pytest

from ragscale import plugins
from ragscale.errors import UserError
from ragscale.registry import KINDS, REGISTRY, Kind, Registry, get, names, register

# a home module of a scratch kind: registering its own entries is what importing it does
HOME = "ragscale.errors"


def scratch(plugin_modules=()) -> Registry:
    """A registry of one kind ``thing`` (home: a module that registers nothing) and given plugins."""
    return Registry((Kind("thing", "thing", "things", HOME),), plugins=lambda: plugin_modules)


def test_register_get_names_and_the_decorator():
    reg = scratch()
    reg.register("thing", "a", 1)

    @reg.register("thing", "b")
    def b():
        return "b"

    assert reg.get("thing", "a") == 1 and reg.get("thing", "b") is b and reg.names("thing") == ["a", "b"]
    assert reg.entries("thing") == {"a": 1, "b": b}


def test_an_unknown_name_is_one_line_with_the_closest():
    reg = scratch()
    reg.register("thing", "alpha", 1)
    with pytest.raises(UserError, match=r"^unknown thing 'alpah' \(did you mean 'alpha'\?\); things are alpha$"):
        reg.get("thing", "alpah")
    with pytest.raises(ValueError, match="no kind 'nope'"):
        reg.get("nope", "x")


def test_a_name_registered_twice_is_refused_unless_the_same():
    reg = scratch()
    reg.register("thing", "a", (1, 2))
    reg.register("thing", "a", (1, 2))  # equal again (a module imported twice): nothing changes
    with pytest.raises(ValueError, match=r"^thing 'a' is declared twice$"):
        reg.register("thing", "a", (3,))
    assert reg.get("thing", "a") == (1, 2)


def test_a_lazy_entry_is_imported_on_first_get():
    reg = scratch()
    reg.register("thing", "json", lazy="json")
    reg.register("thing", "dumps", lazy="json:dumps")
    reg.register("thing", "json", lazy="json")  # the same target again: fine
    import json

    assert reg.get("thing", "json") is json and reg.get("thing", "dumps") is json.dumps
    with pytest.raises(ValueError, match="declared twice"):
        reg.register("thing", "json", lazy="os")


def test_plugin_modules_register_and_their_spec_tuples_are_harvested():
    """A plugin registers through calls at its import, or (judges, sinks) in JUDGE_SPECS / SINK_SPECS."""
    mod = types.ModuleType("zz_plugin")
    mod.JUDGE_SPECS = (types.SimpleNamespace(name="zz_judge"),)
    reg = Registry((Kind("judge", "judge", "judges", HOME),), plugins=lambda: (mod,))
    assert reg.names("judge") == ["zz_judge"] and reg.get("judge", "zz_judge") is mod.JUDGE_SPECS[0]


def test_a_plugin_spec_under_a_taken_name_is_one_line_naming_its_module():
    mod = types.ModuleType("zz_plugin2")
    mod.SINK_SPECS = (types.SimpleNamespace(key="a"),)
    reg = Registry((Kind("sink", "report sink", "report sinks", HOME),), plugins=lambda: (mod,))
    reg.register("sink", "a", 1)
    for _ in range(2):  # every lookup, never a registry that silently lacks it
        with pytest.raises(UserError, match=r"^ragscale plugin module 'zz_plugin2': report sink 'a' is declared twice$"):
            reg.names("sink")


def test_a_plugin_that_fails_fails_every_lookup(monkeypatch):
    def broken():
        raise UserError("ragscale plugin 'demo' (demo_module) failed to load: RuntimeError: no")

    reg = Registry((Kind("thing", "thing", "things", HOME),), plugins=broken)
    for _ in range(2):
        with pytest.raises(UserError, match="plugin 'demo'"):
            reg.names("thing")


def test_ragscale_registers_its_own_entries_in_their_kinds():
    assert set(KINDS) == {"metric_family", "judge", "engine", "reader", "sink"}
    assert names("engine")[:3] == ["llama.cpp", "vllm", "openai"]
    assert names("reader")[:4] == ["open-rag-eval", "csv-table", "ragas", "mtrag"]
    assert {"leaderboard", "html_report"} <= set(names("sink")) and {"idk", "radbench"} <= set(names("judge"))
    assert {"lexical", "bertscore", "taxonomy"} <= set(names("metric_family"))
    from ragscale.judges import JUDGES

    assert get("judge", "idk") is JUDGES["idk"]
    with pytest.raises(UserError, match=r"^unknown judge engine 'vlm' \(did you mean 'vllm'\?\); engines are "):
        get("engine", "vlm")


def test_engines_stay_lazy():
    """Naming an engine imports nothing of it (vLLM's module is imported only when it is looked up)."""
    import subprocess

    code = ("import sys; from ragscale.registry import names; names('engine'); "
            "print('ragscale.actors.engines.vllm_engine' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_registered_reader_reads_its_layout_before_mtrag(monkeypatch):
    """A reader of another package (ragscale.record.Reader) is tried before MT-RAG's, the default."""
    from ragscale.record import Reader, answer_of, extract_fields, reader_of

    def fields(obj, need_targets=False):
        return {"prediction": obj["said"], "targets": [], "passages": [], "answerability": None}

    monkeypatch.setitem(REGISTRY.table("reader"), "zz_layout", Reader("zz_layout", lambda o: "said" in o, fields))
    assert [r.name for r in REGISTRY.entries("reader").values()][-1] == "zz_layout"
    assert reader_of({"said": "x"}).name == "zz_layout" and reader_of({"predictions": []}).name == "mtrag"
    assert extract_fields({"said": "hello"})["prediction"] == "hello" and answer_of({"said": "hello"}) == "hello"


def test_a_registered_engine_resolves_by_name(monkeypatch):
    """``judge.engine=<name>`` of another package's engine: resolve, model_name and build find it."""
    from ragscale.actors import engines

    mod = types.ModuleType("zz_engine")
    mod.OPTIONS = {"temper": 0}

    class Engine:
        name = "zz"

        def __init__(self, model):
            self.model = model

    mod.Engine = Engine
    mod.resolve = lambda conf, options, pool: {"model": conf["model"]}
    mod.model_name = lambda kwargs: kwargs["model"]
    monkeypatch.setitem(sys.modules, "zz_engine", mod)
    register("engine", "zz", lazy="zz_engine")
    try:
        kwargs = engines.resolve({"name": "mine", "engine": "zz", "model": "m1", "options": {"temper": 1}}, {})
        assert kwargs == {"engine": "zz", "model": "m1"} and engines.model_name(kwargs) == "m1"
        assert engines.build(kwargs).model == "m1" and not engines.streams(kwargs)
        with pytest.raises(UserError, match="has no option"):
            engines.resolve({"name": "mine", "engine": "zz", "model": "m1", "options": {"tempr": 1}}, {})
    finally:
        REGISTRY.table("engine").pop("zz", None)


def test_plugins_load_once_and_a_reentrant_call_gets_none_yet(monkeypatch):
    """A plugin whose import looks something up (the registry asks for the plugins) gets none yet, not a loop."""
    seen = []
    mod = types.ModuleType("zz_reentrant")

    class EntryPoint:
        name, value = "zz", "zz_reentrant"

        def load(self):
            seen.append(plugins.plugin_modules())
            return mod

    monkeypatch.setattr(plugins, "_loaded", None)
    monkeypatch.setattr(plugins.importlib.metadata, "entry_points", lambda group: [EntryPoint()])
    assert plugins.plugin_modules() == (mod,) and seen == [()]
    assert plugins.plugin_modules() == (mod,) and len(seen) == 1  # once


def test_the_registry_is_a_leaf_every_layer_may_import():
    """registry.py imports no ragscale module but errors and the plugins' loader (which imports only
    errors): no Ray, no model, no layer above."""
    import ast

    import ragscale.registry

    for module, allowed in ((ragscale.registry, {"ragscale", "ragscale.errors"}), (plugins, {"ragscale.errors"})):
        tree = ast.parse(open(module.__file__, encoding="utf-8").read())
        found = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        found |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert {m for m in found if m.startswith("ragscale")} <= allowed, module.__name__
        assert not {m.split(".")[0] for m in found} & {"ray", "torch", "vllm", "transformers", "llama_cpp"}


@pytest.fixture
def holder(tmp_path, monkeypatch):
    """A home module on sys.path that registers into a registry built after it is written, and a lazy
    target that notes when it is imported."""
    hold = types.ModuleType("zz_holder")
    hold.IMPORTED = []
    monkeypatch.setitem(sys.modules, "zz_holder", hold)
    (tmp_path / "zz_home.py").write_text("import zz_holder\nzz_holder.REG.register('thing', 'own', 42)\n"
                                         "zz_holder.REG.register('thing', 'later', lazy='zz_target:VALUE')\n")
    (tmp_path / "zz_target.py").write_text("import zz_holder\nzz_holder.IMPORTED.append('target')\nVALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("zz_home", "zz_target"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return hold


@pytest.mark.parametrize("eager", [False, True])
def test_a_kinds_home_registers_its_own_on_the_first_lookup(holder, eager):
    holder.REG = reg = Registry((Kind("thing", "thing", "things", "zz_home", eager=eager),))
    assert reg.table("thing") == {}  # nothing loaded yet
    assert reg.names("thing") == ["own", "later"]
    assert holder.IMPORTED == (["target"] if eager else [])  # an eager kind imports its own lazy entries at once
    assert reg.get("thing", "own") == 42 and reg.get("thing", "later") == 7 and holder.IMPORTED == ["target"]


def test_what_register_returns():
    reg = scratch()

    @reg.register("thing", "f")
    def f():
        return "f"

    assert f() == "f" and reg.get("thing", "f") is f  # the decorator gives back what it decorates
    assert reg.register("thing", "n", 5) == 5
    lazy = reg.register("thing", "j", lazy="json")
    assert lazy != "json" and lazy.target == "json" and reg.table("thing")["j"] is lazy


def test_a_plugin_module_without_spec_tuples_registers_by_its_calls():
    mod = types.ModuleType("zz_plain_plugin")  # no JUDGE_SPECS / SINK_SPECS
    reg = Registry((Kind("judge", "judge", "judges", HOME), Kind("sink", "report sink", "report sinks", HOME)),
                   plugins=lambda: (mod,))
    reg.register("judge", "mine", 1)
    assert reg.names("judge") == ["mine"] and reg.names("sink") == []
