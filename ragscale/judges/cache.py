"""On-disk judge cache: a generation is made once per (engine, model, prompt version,
rendered prompt, schema, sampling settings); re-running the same input generates nothing.

SQLite in WAL mode, so several judge actors on one machine can share it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Iterable


class JudgeCache:
    """Maps cache keys (``ragscale.judges.base.cache_key``) to generated texts and token counts."""

    def __init__(self, path: str):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        # Ray runs actor methods on another thread than __init__; calls never overlap.
        self.db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, text TEXT NOT NULL, meta TEXT NOT NULL)"
        )

    def get_many(self, keys: Iterable[str]) -> dict[str, tuple[str, dict]]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, tuple[str, dict]] = {}
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            rows = self.db.execute(
                f"SELECT key, text, meta FROM generations WHERE key IN ({','.join('?' * len(part))})", part
            )
            for key, text, meta in rows:
                found[key] = (text, json.loads(meta))
        return found

    def put_many(self, items: Iterable[tuple[str, str, dict]]) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO generations (key, text, meta) VALUES (?, ?, ?)",
            [(k, t, json.dumps(m)) for k, t, m in items],
        )

    def close(self) -> None:
        self.db.close()
