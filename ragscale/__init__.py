"""ragscale: a distributed, Ray-based scale-out evaluator for retrieval-augmented generation.

``ragscale.evaluate(data, scenario="mtrag") -> Run`` and ``ragscale.load(run_dir) -> Run``
(ragscale.api); the ``ragscale`` command does the same from a shell.
"""

from typing import Any

from ragscale.version import __version__
__all__ = ["evaluate", "load", "metrics", "Run", "__version__"]


def __getattr__(name: str) -> Any:  # the API imports lazily: `import ragscale` stays light for Ray workers
    if name in ("evaluate", "load", "Run"):
        from ragscale import api

        return getattr(api, name)
    if name == "metrics":  # ragscale.metrics(): the catalog as a DataFrame (the package is callable)
        import ragscale.metrics

        return ragscale.metrics
    raise AttributeError(f"module 'ragscale' has no attribute {name!r}")
