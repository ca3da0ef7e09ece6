"""The embedding store's failures and bounds, as the encoder sees them (ragscale.actors.embedding_store,
issue 37): a lock held past the busy timeout loses that batch with a warning and keeps the store; a
corruption found while in use turns the store off and removes its files (database, WAL and shared
memory), unless the file was rebuilt since; which errors count as corruption; the size bound to the
byte; batches past SQLite's variable limit; other dtypes stored as float32; and what an encoder
identity is made of."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import warnings

import numpy as np
import pytest

import ragscale.actors.embedding_store as es
from ragscale.actors.embedding_store import EmbeddingStore, entry_size, text_key
from ragscale.metrics.bertscore import TokenEmbedding


def emb(seed: int, n: int = 4, dim: int = 8, dtype=np.float32) -> TokenEmbedding:
    rng = np.random.default_rng(seed)
    return TokenEmbedding(rng.standard_normal((n, dim)).astype(dtype), rng.random(n).astype(dtype), bool(seed % 2))


def key(i: int) -> bytes:
    return text_key(b"identity", f"text {i}")


class Failing:
    """A connection that raises ``error`` on every statement (what SQLite raises on a damaged page
    or an I/O error mid-run); closing it closes the real one."""

    in_transaction = False

    def __init__(self, db: sqlite3.Connection, error: sqlite3.Error):
        self.db, self.error = db, error

    def execute(self, *args, **kwargs):
        raise self.error

    def close(self) -> None:
        self.db.close()


def named(cls: type, name: str | None, text: str = "disk I/O error") -> sqlite3.Error:
    e = cls(text)
    if name is not None:
        e.sqlite_errorname = name  # what sqlite3 sets on the errors it raises (Python 3.11+)
    return e


def test_a_lock_held_past_the_busy_timeout_loses_the_batch_not_the_store(tmp_path):
    path = str(tmp_path / "e.sqlite")
    store = EmbeddingStore(path, 4)
    store.put_many([(key(0), emb(0))])
    store.db.execute("PRAGMA busy_timeout=0")  # another process's lock, without waiting the minute out
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    for attempt in (1, 2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert store.put_many([(key(attempt), emb(attempt))]) == (0, 0)
        assert [str(w.message) for w in caught] == [f"embedding cache {path}: database is locked; this batch goes "
                                                    "without it"]
        assert caught[0].category is RuntimeWarning
        assert store.errors == attempt and store.enabled
    assert set(store.get_many([key(0), key(1)])[0]) == {key(0)}  # reads go on (WAL) while the lock is held
    other.execute("ROLLBACK")
    assert store.put_many([(key(1), emb(1))])[0] == entry_size(emb(1)) and os.path.exists(path)


@pytest.mark.parametrize("op", ["get", "put"])
def test_a_corruption_found_in_use_turns_the_store_off_and_removes_its_files(tmp_path, op):
    path = str(tmp_path / "e.sqlite")
    store = EmbeddingStore(path, 4)
    store.put_many([(key(0), emb(0))])
    other = sqlite3.connect(path)  # another process's connection keeps the WAL and shared memory files
    assert other.execute("SELECT COUNT(*) FROM embeddings").fetchone() == (1,)
    assert all(os.path.exists(path + s) for s in ("", "-wal", "-shm"))
    error = named(sqlite3.DatabaseError, "SQLITE_CORRUPT", "database disk image is malformed")
    store.db = Failing(store.db, error)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = store.get_many([key(0)]) if op == "get" else store.put_many([(key(1), emb(1))])
    assert out == (({}, 0) if op == "get" else (0, 0))
    assert [str(w.message) for w in caught] == [
        f"embedding cache {path} is corrupt; removed (the next run starts a new one) (database disk image is "
        "malformed); encoding without it"]
    assert caught[0].category is RuntimeWarning
    assert not store.enabled and store.errors == 1
    assert not any(os.path.exists(path + s) for s in ("", "-wal", "-shm"))
    assert store.get_many([key(0)]) == ({}, 0) and store.put_many([(key(1), emb(1))]) == (0, 0)
    other.close()


def test_a_file_rebuilt_since_the_store_opened_it_is_not_removed(tmp_path):
    path = str(tmp_path / "e.sqlite")
    store = EmbeddingStore(path, 4)
    for suffix in ("", "-wal", "-shm"):  # another process found it corrupt and rebuilt it, as a store does
        os.remove(path + suffix)
    rebuilt = EmbeddingStore(path, 4)
    rebuilt.put_many([(key(7), emb(7))])
    rebuilt.close()
    store.db = Failing(store.db, named(sqlite3.DatabaseError, "SQLITE_NOTADB", "file is not a database"))
    with pytest.warns(RuntimeWarning, match="is corrupt; removed"):
        store.get_many([key(7)])
    assert not store.enabled and os.path.exists(path)
    assert set(EmbeddingStore(path, 4).get_many([key(7)])[0]) == {key(7)}  # the rebuilt one, whole


@pytest.mark.parametrize("error, corrupt", [
    (named(sqlite3.DatabaseError, "SQLITE_CORRUPT"), True),
    (named(sqlite3.DatabaseError, "SQLITE_NOTADB"), True),
    (named(sqlite3.DatabaseError, None), True),          # no name (an older SQLite): the plain DatabaseError
    (named(sqlite3.DatabaseError, "SQLITE_IOERR"), False),
    (named(sqlite3.OperationalError, "SQLITE_FULL"), False),
    (named(sqlite3.OperationalError, None), False),      # locked, I/O, full: a subclass, not a corruption
    (named(sqlite3.IntegrityError, None), False),
])
def test_which_errors_are_a_corruption(tmp_path, error, corrupt):
    path = str(tmp_path / "e.sqlite")
    store = EmbeddingStore(path, 4)
    store.db = Failing(store.db, error)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store.get_many([key(0)])
    assert store.enabled is not corrupt and os.path.exists(path) is not corrupt and store.errors == 1
    assert ("is corrupt" in str(caught[0].message)) is corrupt and len(caught) == 1


def test_the_bound_holds_to_the_byte(tmp_path, monkeypatch):
    clock = iter(range(10**9, 2 * 10**9, es.TOUCH_MS + 1))
    monkeypatch.setattr(es, "_clock", lambda: next(clock))
    exact = emb(0, n=1024, dim=255)  # 1024 x 256 x 4 bytes: 1 MiB exactly
    assert entry_size(exact) == 2**20
    store = EmbeddingStore(str(tmp_path / "one.sqlite"), 1)
    assert store.put_many([(key(0), exact)]) == (2**20, 0)  # not larger than the bound: stored, and kept
    assert store.payload_bytes() == store.limit and key(0) in store.get_many([key(0)])[0]
    # 5 MiB: eviction frees down to 90%, 4.5 MiB, which is 18 entries of 256 KiB exactly
    store = EmbeddingStore(str(tmp_path / "five.sqlite"), 5)
    quarter = [(key(i), emb(i, n=64, dim=1023)) for i in range(21)]
    assert entry_size(quarter[0][1]) == 2**18
    for item in quarter[:20]:
        assert store.put_many([item]) == (2**18, 0)
    assert store.put_many([quarter[20]]) == (2**18, 3)
    assert store.payload_bytes() == 18 * 2**18 == int(5 * 2**20 * es.EVICT_TO)
    assert set(store.get_many([k for k, _ in quarter])[0]) == {k for k, _ in quarter[3:]}


def test_batches_past_sqlites_variable_limit(tmp_path, monkeypatch):
    clock = iter(range(10**9, 2 * 10**9, es.TOUCH_MS + 1))
    monkeypatch.setattr(es, "_clock", lambda: next(clock))
    store = EmbeddingStore(str(tmp_path / "e.sqlite"), 1)
    tiny = [(key(i), emb(i, n=1, dim=15)) for i in range(2000)]  # 64 bytes each
    assert store.put_many(tiny[:1000]) == (64000, 0)
    # the same 1,000 again after 1,000 new: the present ones (more than one statement's worth) are kept
    assert store.put_many(tiny[1000:] + tiny[:1000]) == (64000, 0)
    big = (key(5000), emb(5000, n=940, dim=249))  # 940,000 bytes: 1,942 of the tiny entries must go
    assert store.put_many([big]) == (940000, 1942)
    assert store.payload_bytes() == 58 * 64 + 940000
    db = sqlite3.connect(tmp_path / "e.sqlite")
    assert db.execute("SELECT COUNT(*), SUM(size) FROM lru").fetchone() == (59, 58 * 64 + 940000)
    assert db.execute("SELECT COUNT(*) FROM embeddings").fetchone() == (59,)
    found, nbytes = store.get_many([k for k, _ in tiny] + [big[0]])
    assert len(found) == 59 and nbytes == store.payload_bytes() and big[0] in found


def test_other_float_types_are_stored_as_float32(tmp_path):
    store = EmbeddingStore(str(tmp_path / "e.sqlite"), 4)
    e64 = emb(3, dtype=np.float64)
    store.put_many([(key(3), e64)])
    got = store.get_many([key(3)])[0][key(3)]
    assert got.vectors.dtype == got.weights.dtype == np.float32
    assert np.array_equal(got.vectors, e64.vectors.astype(np.float32))
    assert np.array_equal(got.weights, e64.weights.astype(np.float32)) and got.truncated is True


def test_an_encoder_identity_is_the_hash_of_what_decides_an_embedding(tmp_path):
    import torch
    import transformers

    (tmp_path / "config.json").write_text("{}")
    expected = {"format": es.FORMAT, "model": es.model_fingerprint(str(tmp_path)), "num_layers": 6,
                "max_length": 512, "dtype": "bf16", "device": "cuda:H100", "torch": torch.__version__,
                "transformers": transformers.__version__}
    digest = hashlib.sha256(json.dumps(expected, sort_keys=True).encode()).digest()
    assert es.encoder_identity(str(tmp_path), 6, 512, "bf16", "cuda:H100") == digest
    assert es.encoder_identity(str(tmp_path), "6", 512.0, "bf16", "cuda:H100") == digest  # numbers as numbers


def test_the_file_layout_of_format_1(tmp_path, monkeypatch):
    """What a later ragscale of the same FORMAT reads back: per entry its shape, truncation, a 128-bit
    BLAKE2b of the weights then the vectors, the fp32 bytes; per key its last use in milliseconds since
    the epoch and its size; the format and the payload total in meta."""
    monkeypatch.setattr(es.time, "time", lambda: 1_700_000_000.25)
    path = str(tmp_path / "e.sqlite")
    e = emb(5, n=3, dim=4)
    EmbeddingStore(path, 4).put_many([(key(5), e)])
    db = sqlite3.connect(path)
    (n, dim, truncated, digest, weights, vectors), = db.execute(
        "SELECT n, dim, truncated, digest, weights, vectors FROM embeddings WHERE key = ?", (key(5),))
    assert (n, dim, truncated) == (3, 4, 1) and (weights, vectors) == (e.weights.tobytes(), e.vectors.tobytes())
    h = hashlib.blake2b(e.weights.tobytes(), digest_size=16)
    h.update(e.vectors.tobytes())
    assert digest == h.digest()
    assert db.execute("SELECT used, size FROM lru WHERE key = ?", (key(5),)).fetchone() == (1_700_000_000_250, 60)
    assert dict(db.execute("SELECT name, value FROM meta")) == {"format": es.FORMAT, "bytes": 60}


def test_a_text_with_a_lone_surrogate_has_a_key_of_its_own():
    assert text_key(b"i", "a\ud800b") != text_key(b"i", "ab") and len(text_key(b"i", "a\ud800b")) == 32
    assert text_key(b"i", "a\ud800b") == hashlib.sha256(b"ia\xed\xa0\x80b").digest()


def test_a_file_of_another_format_is_rebuilt(tmp_path):
    path = str(tmp_path / "e.sqlite")
    EmbeddingStore(path, 4).put_many([(key(1), emb(1))])
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE meta SET value = 2 WHERE name = 'format'")
    db.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = EmbeddingStore(path, 4)
    assert [str(w.message) for w in caught] == [f"embedding cache {path}: format 2, this ragscale writes format "
                                                f"{es.FORMAT}; rebuilding it"]
    assert store.enabled and store.errors == 1 and store.get_many([key(1)]) == ({}, 0)


def test_an_entry_whose_shape_does_not_fit_its_bytes_is_damaged(tmp_path):
    path = str(tmp_path / "e.sqlite")
    store = EmbeddingStore(path, 4)
    store.put_many([(key(i), emb(i, n=3, dim=4)) for i in range(3)])
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE embeddings SET dim = 2 WHERE key = ?", (key(0),))  # the weights still fit n
        db.execute("UPDATE embeddings SET n = 4 WHERE key = ?", (key(1),))
    db.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found, _ = store.get_many([key(0), key(1), key(2)])
        store.get_many([key(0)])  # dropped: a miss, no error
        db = sqlite3.connect(path)
        with db:
            db.execute("UPDATE embeddings SET dim = 5 WHERE key = ?", (key(2),))
        db.close()
        store.get_many([key(2)])
    assert set(found) == {key(2)} and store.errors == 3  # the errors of every read add up
    assert [str(w.message) for w in caught] == [f"embedding cache {path}: 2 damaged entries dropped",
                                                f"embedding cache {path}: 1 damaged entries dropped"]


def test_a_read_refreshes_an_entrys_last_use_at_most_once_a_minute(tmp_path, monkeypatch):
    now = [1_000_000]
    monkeypatch.setattr(es, "_clock", lambda: now[0])
    path = str(tmp_path / "e.sqlite")
    store = EmbeddingStore(path, 64)
    keys = [key(i) for i in range(2000)]  # more than two statements' worth
    store.put_many([(k, emb(1, n=1, dim=3)) for k in keys])

    def used() -> set:
        return {u for (u,) in sqlite3.connect(path).execute("SELECT used FROM lru")}

    now[0] += es.TOUCH_MS
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(store.get_many(keys)[0]) == 2000
        assert used() == {1_000_000}  # a minute exactly: not yet
        now[0] += 1
        store.get_many(keys)
        assert used() == {1_000_000 + es.TOUCH_MS + 1}


def test_the_store_is_used_from_another_thread_than_the_one_that_opened_it(tmp_path):
    """Ray runs an actor's methods on another thread than its constructor."""
    import threading

    store = EmbeddingStore(str(tmp_path / "e.sqlite"), 4)
    out: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = threading.Thread(target=lambda: out.append((store.put_many([(key(1), emb(1))]), store.get_many([key(1)]))))
        t.start()
        t.join()
    assert out[0][0][0] == entry_size(emb(1)) and set(out[0][1][0]) == {key(1)} and store.errors == 0
