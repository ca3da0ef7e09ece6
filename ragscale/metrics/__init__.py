"""Metric math: pure Python/numpy, no Ray or torch import (see tests/unit/test_imports.py)."""
