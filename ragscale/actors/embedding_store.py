"""On-disk store of token embeddings across runs (``encoder.disk_cache_path``).

A new model's responses to a benchmark come with the same targets and passages as every
earlier model's: the encoder reads their embeddings back instead of encoding them again.
Entries are keyed by ``sha256(encoder identity, text)`` (:func:`encoder_identity`: the
model's files, the layer cut, the truncation length, the dtype, the device and the library
versions; the text itself is not stored) and hold the fp32 vectors and weights exactly as
computed, so a read-back embedding is the one computed by the run that stored it, bit for bit.

SQLite in WAL mode with a busy timeout: the encoder actors of one machine (processes) share
the file; every write is one transaction, so a killed run leaves whole entries or none, and
each entry carries a checksum of its payload (a damaged one reads as a miss and is dropped). The
payload is bounded (``encoder.disk_cache_mb``): past the bound the least recently used
entries go, down to 90% of it. Recency is kept in a small table of its own, refreshed at most
once a minute per entry, so a read costs a write only now and then. A file that is not a
database is rebuilt; any other failure disables the store with a warning, never the run.
WAL needs all processes on one host: the path must be on a local disk, not a network one.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
import warnings
from typing import Iterable, Sequence

import numpy as np

from ragscale.metrics.bertscore import TokenEmbedding

FORMAT = 1  # layout of the tables and of the key's identity; part of every key
EVICT_TO = 0.9  # eviction frees down to this share of the bound
TOUCH_MS = 60_000  # an entry's last use (ms since the epoch) is refreshed at most this often
_SQL_VARS = 900  # keys per statement (SQLite's limit on bound variables is 999 in old builds)
_SAMPLE = 2**20  # bytes hashed at each end of a large model file
_CORRUPT = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}


def _clock() -> int:
    """Now, in milliseconds since the epoch (the ``used`` column)."""
    return int(time.time() * 1000)


def model_fingerprint(model_path: str) -> str:
    """sha256 over the model folder's top-level files (name, size; the whole content of files
    up to 8 MiB, such as the config and tokenizer files; the first and last MiB of weights)."""
    h = hashlib.sha256()
    for name in sorted(os.listdir(model_path)):
        path = os.path.join(model_path, name)
        if not os.path.isfile(path):
            continue
        size = os.path.getsize(path)
        h.update(f"{name}\0{size}\0".encode())
        with open(path, "rb") as fh:
            if size <= 8 * _SAMPLE:
                h.update(fh.read())
            else:
                h.update(fh.read(_SAMPLE))
                fh.seek(size - _SAMPLE)
                h.update(fh.read())
    return h.hexdigest()


def encoder_identity(model_path: str, num_layers: int, max_length: int, dtype: str, device: str) -> bytes:
    """The key prefix of one encoder setting: what decides the embedding of a text besides the text."""
    import torch
    import transformers

    ident = {"format": FORMAT, "model": model_fingerprint(model_path), "num_layers": int(num_layers),
             "max_length": int(max_length), "dtype": dtype, "device": device,
             "torch": torch.__version__, "transformers": transformers.__version__}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).digest()


def text_key(identity: bytes, text: str) -> bytes:
    """The store's key of ``text`` under an encoder identity (32 bytes)."""
    return hashlib.sha256(identity + text.encode("utf-8", "surrogatepass")).digest()


def _digest(weights: bytes, vectors: bytes) -> bytes:
    h = hashlib.blake2b(weights, digest_size=16)
    h.update(vectors)
    return h.digest()


def entry_size(emb: TokenEmbedding) -> int:
    """Bytes an entry's payload takes (what ``disk_cache_mb`` bounds)."""
    return emb.vectors.nbytes + emb.weights.nbytes


class EmbeddingStore:
    """Keys (:func:`text_key`) to :class:`TokenEmbedding`, in one SQLite file shared by processes.

    ``get_many`` and ``put_many`` never raise for the store's own failures: a failure is a
    miss (or a lost write), with a ``RuntimeWarning``; ``errors`` counts them (and a file
    rebuilt or not opened). After a
    corruption the store is off (``enabled`` False) and its file removed, so the next run
    starts a fresh one."""

    def __init__(self, path: str, limit_mb: int):
        self.path = path
        self.limit = int(limit_mb) * 2**20
        self.errors = 0
        self.db: sqlite3.Connection | None = None
        self._inode: int | None = None
        try:
            self._open()
        except (sqlite3.Error, OSError) as e:
            self.errors += 1
            if not _is_corrupt(e):
                self._disable(e, "cannot be opened")
                return
            warnings.warn(f"embedding cache {path}: {e}; rebuilding it", RuntimeWarning, stacklevel=2)
            self._close()
            self._remove()
            try:
                self._open()
            except (sqlite3.Error, OSError) as e2:
                self._disable(e2, "cannot be rebuilt")

    @property
    def enabled(self) -> bool:
        return self.db is not None

    def _open(self) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        # Ray runs actor methods on another thread than __init__; calls never overlap.
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        self.db = db
        self._inode = os.stat(self.path).st_ino
        db.execute("PRAGMA busy_timeout=60000")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # WAL: a crash loses no committed entry's integrity
        with self._write():
            db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
            db.execute("CREATE TABLE IF NOT EXISTS embeddings (key BLOB PRIMARY KEY, n INTEGER NOT NULL, "
                       "dim INTEGER NOT NULL, truncated INTEGER NOT NULL, digest BLOB NOT NULL, weights BLOB NOT NULL, "
                       "vectors BLOB NOT NULL)")
            db.execute("CREATE TABLE IF NOT EXISTS lru (key BLOB PRIMARY KEY, used INTEGER NOT NULL, "
                       "size INTEGER NOT NULL) WITHOUT ROWID")
            db.execute("CREATE INDEX IF NOT EXISTS lru_used ON lru (used)")
            db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?), ('bytes', 0)", (FORMAT,))
            fmt = db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()[0]
        if fmt != FORMAT:
            raise sqlite3.DatabaseError(f"format {fmt}, this ragscale writes format {FORMAT}")

    def _write(self) -> _Transaction:
        return _Transaction(self.db)

    def get_many(self, keys: Sequence[bytes]) -> tuple[dict[bytes, TokenEmbedding], int]:
        """The stored entries among ``keys`` and the payload bytes read; one query per 900 keys."""
        found: dict[bytes, TokenEmbedding] = {}
        nbytes = 0
        if self.db is None or not keys:
            return found, nbytes
        keys = list(dict.fromkeys(keys))
        now = _clock()
        stale: list[bytes] = []
        damaged: list[bytes] = []
        try:
            for i in range(0, len(keys), _SQL_VARS):
                part = keys[i:i + _SQL_VARS]
                rows = self.db.execute(
                    "SELECT e.key, e.n, e.dim, e.truncated, e.digest, e.weights, e.vectors, l.used FROM embeddings e "
                    f"JOIN lru l ON l.key = e.key WHERE e.key IN ({','.join('?' * len(part))})", part)
                for key, n, dim, truncated, digest, weights, vectors, used in rows:
                    if len(vectors) != n * dim * 4 or len(weights) != n * 4 or _digest(weights, vectors) != digest:
                        damaged.append(key)
                        continue
                    vec = np.frombuffer(vectors, dtype=np.float32).reshape(n, dim).copy()
                    found[key] = TokenEmbedding(vec, np.frombuffer(weights, dtype=np.float32).copy(), bool(truncated))
                    nbytes += len(vectors) + len(weights)
                    if used < now - TOUCH_MS:
                        stale.append(key)
            if stale or damaged:
                with self._write():
                    for i in range(0, len(stale), _SQL_VARS):
                        part = stale[i:i + _SQL_VARS]
                        self.db.execute(f"UPDATE lru SET used = ? WHERE key IN ({','.join('?' * len(part))})",
                                        [now, *part])
                    if damaged:
                        self.errors += len(damaged)
                        warnings.warn(f"embedding cache {self.path}: {len(damaged)} damaged entries dropped",
                                      RuntimeWarning, stacklevel=2)
                        self._delete(damaged)
        except sqlite3.Error as e:
            self._failed(e)
        return found, nbytes

    def put_many(self, items: Iterable[tuple[bytes, TokenEmbedding]]) -> tuple[int, int]:
        """Store new entries in one transaction (present keys are kept as they are; an entry
        larger than the bound is not stored), then evict past the bound. Returns (payload
        bytes written, entries evicted)."""
        todo = {k: e for k, e in items if entry_size(e) <= self.limit}
        if self.db is None or not todo:
            return 0, 0
        now = _clock()
        written = evicted = 0
        try:
            with self._write():
                keys = list(todo)
                for i in range(0, len(keys), _SQL_VARS):
                    part = keys[i:i + _SQL_VARS]
                    for (key,) in self.db.execute(
                            f"SELECT key FROM embeddings WHERE key IN ({','.join('?' * len(part))})", part):
                        del todo[key]
                rows = []
                for k, e in todo.items():
                    weights = np.ascontiguousarray(e.weights, dtype=np.float32).tobytes()
                    vectors = np.ascontiguousarray(e.vectors, dtype=np.float32).tobytes()
                    rows.append((k, e.vectors.shape[0], e.vectors.shape[1], int(e.truncated),
                                 _digest(weights, vectors), weights, vectors))
                self.db.executemany("INSERT INTO embeddings VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                self.db.executemany("INSERT OR REPLACE INTO lru VALUES (?, ?, ?)",
                                    [(r[0], now, len(r[5]) + len(r[6])) for r in rows])
                written = sum(len(r[5]) + len(r[6]) for r in rows)
                total = self._add_bytes(written)
                if total > self.limit:
                    evicted = self._evict(total)
        except sqlite3.Error as e:
            self._failed(e)
            return 0, 0
        return written, evicted

    def _add_bytes(self, delta: int) -> int:
        self.db.execute("UPDATE meta SET value = value + ? WHERE name = 'bytes'", (delta,))
        return self.db.execute("SELECT value FROM meta WHERE name = 'bytes'").fetchone()[0]

    def _evict(self, total: int) -> int:
        """Delete the least recently used entries until the payload is at most EVICT_TO of the bound."""
        target = int(self.limit * EVICT_TO)
        gone: list[bytes] = []
        freed = 0
        for key, size in self.db.execute("SELECT key, size FROM lru ORDER BY used"):
            if total - freed <= target:
                break
            gone.append(key)
            freed += size
        self._delete(gone)
        return len(gone)

    def _delete(self, keys: list[bytes]) -> None:
        """Delete entries and their payload from the total (inside a write transaction)."""
        for i in range(0, len(keys), _SQL_VARS):
            part = keys[i:i + _SQL_VARS]
            marks = ",".join("?" * len(part))
            freed = self.db.execute(f"SELECT COALESCE(SUM(size), 0) FROM lru WHERE key IN ({marks})", part).fetchone()[0]
            self.db.execute(f"DELETE FROM embeddings WHERE key IN ({marks})", part)
            self.db.execute(f"DELETE FROM lru WHERE key IN ({marks})", part)
            self._add_bytes(-freed)

    def payload_bytes(self) -> int:
        """The payload the store holds now (what the bound applies to)."""
        return self.db.execute("SELECT value FROM meta WHERE name = 'bytes'").fetchone()[0] if self.db else 0

    def _failed(self, e: sqlite3.Error) -> None:
        self.errors += 1
        if _is_corrupt(e):
            self._disable(e, "is corrupt; removed (the next run starts a new one)")
            if self._inode is not None and _inode(self.path) == self._inode:  # not a file rebuilt since
                self._remove()
        else:
            warnings.warn(f"embedding cache {self.path}: {e}; this batch goes without it", RuntimeWarning,
                          stacklevel=3)

    def _disable(self, e: BaseException, what: str) -> None:
        warnings.warn(f"embedding cache {self.path} {what} ({e}); encoding without it", RuntimeWarning, stacklevel=3)
        self._close()

    def _close(self) -> None:
        if self.db is not None:
            try:
                self.db.close()
            except sqlite3.Error:
                pass
        self.db = None

    def _remove(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.remove(self.path + suffix)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        self._close()


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an exception): one writer at a time,
    waiting under the busy timeout rather than failing on a lock upgrade."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: object) -> None:
        try:
            if exc_type is None:
                self.db.execute("COMMIT")
        finally:
            if self.db.in_transaction:  # an exception, or a COMMIT that failed
                try:
                    self.db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass


def _is_corrupt(e: BaseException) -> bool:
    name = getattr(e, "sqlite_errorname", None)
    if name:
        return name in _CORRUPT
    return type(e) is sqlite3.DatabaseError  # not Operational (locked, I/O, full) nor a programming error


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None
