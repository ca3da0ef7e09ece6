"""Plugins: other packages that add metric families, judges, judge engines, input readers and
report sinks to ragscale, with no file of ragscale touched (docs/architecture.md, "Plugins").

A plugin names a module in the ``ragscale.plugins`` entry-point group of its package metadata::

    [project.entry-points."ragscale.plugins"]
    my_plugin = "my_package.ragscale_plugin"

Importing that module registers what it declares, through the same calls ragscale's own modules
use: ``ragscale.registry.register`` for any kind (an engine by its module's path, imported when a
judge looks it up), metrics with ``ragscale.metrics.registry.declare`` or the ``lexical_metric``
decorator, and judges / report sinks in a module-level ``JUDGE_SPECS`` / ``SINK_SPECS`` tuple. The
registry (ragscale/registry.py) loads the plugins here the first time any kind is looked up, in
the driver and in every Ray worker alike (the plugin must be installed where the workers run, like
ragscale itself).
"""

from __future__ import annotations

import importlib.metadata
from types import ModuleType

from ragscale.errors import UserError

GROUP = "ragscale.plugins"
_loaded: tuple[ModuleType, ...] | None = None
_loading = False


def plugin_modules() -> tuple[ModuleType, ...]:
    """The plugins' modules, imported once, in the order of their entry points' names; a plugin
    that fails to import is a one-line UserError naming it (raised again at every call). A call
    made while they load (a plugin's import looking something up) gets none yet."""
    global _loaded, _loading
    if _loaded is not None:
        return _loaded
    if _loading:
        return ()
    _loading = True
    try:
        _loaded = tuple(_load(ep) for ep in sorted(importlib.metadata.entry_points(group=GROUP),
                                                   key=lambda e: (e.name, e.value)))
    finally:
        _loading = False
    return _loaded


def _load(ep: importlib.metadata.EntryPoint) -> ModuleType:
    try:
        module = ep.load()
    except Exception as e:  # noqa: BLE001 - any failure of a third party's import, named
        raise UserError(f"ragscale plugin {ep.name!r} ({ep.value}) failed to load: {type(e).__name__}: {e}") from None
    if not isinstance(module, ModuleType):
        raise UserError(f"ragscale plugin {ep.name!r} ({ep.value}) must name a module, not {type(module).__name__}")
    return module
