"""The one registry of what ragscale can be extended with (docs/architecture.md, "Plugins"): metric
families, judges, judge engines, input readers and report sinks, each by name, modelled on
lm-evaluation-harness' ``Registry``.

Each kind has a home module that registers ragscale's own entries when it is imported (engines:
``ragscale.actors.engines``, readers: ``ragscale.record``, ...). The first lookup of any kind
imports every home, then the plugins (the ``ragscale.plugins`` entry-point group, loaded once by
ragscale/plugins.py), so that ragscale's own entries come first; the plugins' modules register
theirs with the same calls::

    from ragscale.registry import register

    register("reader", "my_layout", Reader("my_layout", detect, fields))   # ragscale.record.Reader
    register("engine", "my_engine", lazy="my_package.my_engine")          # imported on first lookup

A module-level ``JUDGE_SPECS`` / ``SINK_SPECS`` tuple of a plugin module registers its judges /
sinks too (the convention of ragscale's own judge modules). A name registered twice with another
entry is refused; an unknown name is a one-line UserError with the closest names. This module
imports nothing heavy (an engine registers its module's path, imported on its first ``get``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Sequence

from ragscale import plugins
from ragscale.errors import UserError, did_you_mean


@dataclass(frozen=True)
class Kind:
    """A kind of entry: ``label`` and ``plural`` are what messages call one and several, ``home``
    the module whose import registers ragscale's own; ``eager``: ragscale's own lazy entries are
    imported with the homes, before any plugin (the metric families, so that the catalog lists
    ragscale's metrics first)."""

    name: str
    label: str
    plural: str
    home: str
    eager: bool = False


@dataclass(frozen=True)
class Lazy:
    """An entry imported on its first lookup: ``"module"`` or ``"module:attribute"``."""

    target: str

    def load(self) -> Any:
        module, _, attribute = self.target.partition(":")
        obj = importlib.import_module(module)
        return getattr(obj, attribute) if attribute else obj


# a plugin module's tuples of specs -> (kind, the spec's attribute that names it)
SPEC_TUPLES = {"JUDGE_SPECS": ("judge", "name"), "SINK_SPECS": ("sink", "key")}
_UNSET = object()


class Registry:
    """Named entries of named kinds, ragscale's own and the plugins' (``plugins()``: their modules)."""

    def __init__(self, kinds: Sequence[Kind], plugins: Callable[[], Sequence[ModuleType]] = tuple):
        self.kinds = {k.name: k for k in kinds}
        self._tables: dict[str, dict[str, Any]] = {k.name: {} for k in kinds}
        self._values: dict[Lazy, Any] = {}
        self._plugins = plugins
        self._harvested: set[str] = set()
        self._homes = "unloaded"  # -> "loading" -> "loaded"

    def table(self, kind: str) -> dict[str, Any]:
        """The kind's live table (name -> entry; a lazy entry is a :class:`Lazy`), loading nothing:
        for a home module that registers into it and reads it as it grows."""
        if kind not in self._tables:
            raise ValueError(f"the registry has no kind {kind!r}; kinds are {', '.join(self._tables)}")
        return self._tables[kind]

    def register(self, kind: str, name: str, obj: Any = _UNSET, *, lazy: str | None = None) -> Any:
        """Register ``obj`` (or ``lazy``: a module path, ``"module:attribute"``, imported on first
        lookup) as ``name`` of ``kind``; without either, a decorator that registers what it decorates.
        The same entry again is a no-op; another one under a taken name is a ValueError."""
        if obj is _UNSET and lazy is None:
            return lambda target: self.register(kind, name, target)
        entry = Lazy(lazy) if lazy is not None else obj
        table = self.table(kind)
        old = table.get(name, _UNSET)
        if old is _UNSET:
            table[name] = entry
        elif not (old is entry or old == entry):
            raise ValueError(f"{self.kinds[kind].label} {name!r} is declared twice")
        return obj if lazy is None else entry

    def load(self, kind: str) -> None:
        """Register ragscale's own entries of every kind (the kinds' home modules, imported once),
        then the plugins'. A lookup made while the homes import (one of them looking up) waits for
        the plugins until every home is in."""
        self.table(kind)  # a kind that does not exist: the ValueError
        if self._homes == "loading":
            return
        if self._homes == "unloaded":
            self._homes = "loading"
            try:
                self._load_homes()
            finally:
                self._homes = "unloaded"
            self._homes = "loaded"
        for module in self._plugins():
            if module.__name__ not in self._harvested:
                self._harvest(module)
                self._harvested.add(module.__name__)

    def _load_homes(self) -> None:
        for k in self.kinds.values():
            importlib.import_module(k.home)
            if k.eager:
                for entry in list(self._tables[k.name].values()):
                    self._value(entry)

    def _harvest(self, module: ModuleType) -> None:
        for attribute, (kind, key) in SPEC_TUPLES.items():
            if kind in self.kinds:
                for spec in getattr(module, attribute, ()):
                    try:
                        self.register(kind, getattr(spec, key), spec)
                    except ValueError as e:
                        raise UserError(f"ragscale plugin module {module.__name__!r}: {e}") from None

    def _value(self, entry: Any) -> Any:
        if not isinstance(entry, Lazy):
            return entry
        if entry not in self._values:
            self._values[entry] = entry.load()
        return self._values[entry]

    def get(self, kind: str, name: str) -> Any:
        """The entry ``name`` of ``kind`` (a lazy one imported); an unknown name is a one-line UserError."""
        self.load(kind)
        table = self.table(kind)
        if name not in table:
            k = self.kinds[kind]
            raise UserError(f"unknown {k.label} {name!r}{did_you_mean(name, table)}; {k.plural} are {', '.join(table)}")
        return self._value(table[name])

    def names(self, kind: str) -> list[str]:
        """Every name of ``kind``, in the order they were registered (ragscale's own first)."""
        self.load(kind)
        return list(self.table(kind))

    def entries(self, kind: str) -> dict[str, Any]:
        """Every entry of ``kind`` by name, in registration order, lazy ones imported."""
        self.load(kind)
        return {name: self._value(entry) for name, entry in self.table(kind).items()}


def _plugin_modules() -> Sequence[ModuleType]:
    """The ``ragscale.plugins`` entry points' modules, imported once (ragscale/plugins.py)."""
    return plugins.plugin_modules()


KINDS = {
    "metric_family": Kind("metric_family", "metric family", "metric families", "ragscale.metrics.registry", eager=True),
    "judge": Kind("judge", "judge", "judges", "ragscale.judges"),
    "engine": Kind("engine", "judge engine", "engines", "ragscale.actors.engines"),
    "reader": Kind("reader", "input layout", "input layouts", "ragscale.record"),
    "sink": Kind("sink", "report sink", "report sinks", "ragscale.report.sinks"),
}
REGISTRY = Registry(tuple(KINDS.values()), plugins=_plugin_modules)
register = REGISTRY.register
get = REGISTRY.get
names = REGISTRY.names
