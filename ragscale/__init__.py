"""ragscale: a distributed, Ray-based scale-out evaluator for retrieval-augmented generation."""

__version__ = "0.1.0"
