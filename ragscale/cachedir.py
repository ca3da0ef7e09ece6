"""ragscale's cache folder: what runs reuse across runs and folders.

It holds the judge cache (``judge.sqlite``: ragscale/config.py ``JudgeConf.cache_path``) and the
requantized judge models (``gguf/``: ragscale.weights.gguf_cache_dir), so that runs started from
different folders share them. The folder follows the platform's convention for per-user caches
(as platformdirs' ``user_cache_dir("ragscale", appauthor=False)``): ``$XDG_CACHE_HOME/ragscale``
or ``~/.cache/ragscale`` on Linux, ``~/Library/Caches/ragscale`` on macOS,
``%LOCALAPPDATA%\\ragscale\\Cache`` on Windows; ``$RAGSCALE_CACHE_DIR`` overrides it
(docs/install.md, "Caches").
"""

from __future__ import annotations

import os
import sys
from typing import Mapping

from ragscale.errors import UserError

CACHE_ENV = "RAGSCALE_CACHE_DIR"
JUDGE_CACHE_FILE = "judge.sqlite"  # the judge cache's default file name in the cache folder


def cache_dir(platform: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The absolute path of ragscale's cache folder (not created here). ``platform`` and
    ``environ`` default to ``sys.platform`` and ``os.environ`` (given in tests)."""
    env = os.environ if environ is None else environ
    platform = platform or sys.platform
    home = env.get("HOME") or env.get("USERPROFILE") or os.path.expanduser("~")
    if env.get(CACHE_ENV):
        return os.path.abspath(os.path.expanduser(env[CACHE_ENV]))
    if platform == "win32":
        return os.path.join(env.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local"), "ragscale", "Cache")
    if platform == "darwin":
        return os.path.join(home, "Library", "Caches", "ragscale")
    xdg = env.get("XDG_CACHE_HOME", "")
    # the XDG base directory spec: a relative $XDG_CACHE_HOME is invalid and ignored
    return os.path.join(xdg if os.path.isabs(xdg) else os.path.join(home, ".cache"), "ragscale")


def cache_file(name: str) -> str:
    """``name`` inside the cache folder: the ``${ragscale.cache:NAME}`` config resolver
    (ragscale/config.py registers it; the judge cache's default is ``${ragscale.cache:judge.sqlite}``)."""
    return os.path.join(cache_dir(), name)


def judge_cache_path(value: str | None, key: str = "judge.cache_path") -> str | None:
    """A judge cache setting made absolute (None: no cache), its folder created and checked
    writable on the driver before Ray starts, so that a read-only home is a one-line error."""
    if not value:
        return None
    path = os.path.abspath(os.path.expanduser(value))
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise UserError(f"{key}: cannot create {folder} ({e.strerror}); set {key}=FILE, "
                        f"{CACHE_ENV}=FOLDER, or {key}=null (no judge cache)") from None
    if not os.access(folder, os.W_OK):
        raise UserError(f"{key}: {folder} is not writable; set {key}=FILE, {CACHE_ENV}=FOLDER, "
                        f"or {key}=null (no judge cache)")
    return path
