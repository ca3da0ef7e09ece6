"""Plugins: other packages that add metrics, judges and report sinks to ragscale, with no file of
ragscale touched (docs/architecture.md, "Plugins").

A plugin names a module in the ``ragscale.plugins`` entry-point group of its package metadata::

    [project.entry-points."ragscale.plugins"]
    my_plugin = "my_package.ragscale_plugin"

Importing that module registers what it declares, through the same calls ragscale's own modules
use: metrics with ``ragscale.metrics.registry.declare`` or the ``lexical_metric`` decorator, judges
in a module-level ``JUDGE_SPECS`` tuple (ragscale.judges), report sinks in a module-level
``SINK_SPECS`` tuple (ragscale.report.sinks). The catalog, the judge registry and the report pass
load the plugins the first time they are asked, in the driver and in every Ray worker alike (the
plugin must be installed where the workers run, like ragscale itself).
"""

from __future__ import annotations

import functools
import importlib.metadata
from types import ModuleType
from typing import Any

from ragscale.errors import UserError

GROUP = "ragscale.plugins"


@functools.cache
def plugin_modules() -> tuple[ModuleType, ...]:
    """The plugins' modules, imported once, in the order of their entry points' names; a plugin
    that fails to import is a one-line UserError naming it."""
    out = []
    for ep in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda e: (e.name, e.value)):
        try:
            module = ep.load()
        except Exception as e:  # noqa: BLE001 - any failure of a third party's import, named
            raise UserError(f"ragscale plugin {ep.name!r} ({ep.value}) failed to load: {type(e).__name__}: {e}") from None
        if not isinstance(module, ModuleType):
            raise UserError(f"ragscale plugin {ep.name!r} ({ep.value}) must name a module, not {type(module).__name__}")
        out.append(module)
    return tuple(out)


def contributed(attribute: str) -> list[Any]:
    """Every plugin module's ``attribute`` (a tuple: ``JUDGE_SPECS``, ``SINK_SPECS``), concatenated."""
    return [item for module in plugin_modules() for item in getattr(module, attribute, ())]
