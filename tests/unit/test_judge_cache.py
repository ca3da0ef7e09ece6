"""The judge cache's store (ragscale.judges.cache, issue 37): a lookup of any number of keys (more
than one SQL statement's worth) finds every stored one and nothing else, repeated keys once; a put
replaces; a second connection (another actor on the machine) sees what the first wrote."""

from __future__ import annotations

from ragscale.judges.cache import JudgeCache


def test_many_keys_in_one_lookup(tmp_path):
    path = str(tmp_path / "sub" / "judge.sqlite")
    cache = JudgeCache(path)
    cache.put_many((f"k{i}", f"text {i}", {"i": i}) for i in range(1203) if i % 3)
    keys = [f"k{i}" for i in range(1210)] + ["k1", "k1"]
    found = cache.get_many(keys)
    assert set(found) == {f"k{i}" for i in range(1203) if i % 3}
    assert found["k1202"] == ("text 1202", {"i": 1202}) and cache.get_many([]) == {}
    cache.put_many([("k1", "new", {"v": 2})])
    other = JudgeCache(path)
    assert other.get_many(["k1", "k3"]) == {"k1": ("new", {"v": 2})}
    assert cache.path == path
    cache.close()
    other.close()


def test_actors_share_the_file_waiting_for_each_others_writes(tmp_path):
    """WAL mode (readers do not block a writer), and a connection that waits up to a minute for
    another actor's write lock instead of failing at once (SQLite's busy timeout)."""
    import sqlite3

    path = str(tmp_path / "judge.sqlite")
    cache = JudgeCache(path)
    assert cache.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert cache.db.execute("PRAGMA busy_timeout").fetchone()[0] == 60_000
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # the file's mode
    cache.close()


def test_a_lookup_is_batched(tmp_path):
    """1,203 keys are looked up in 3 statements (of 500 keys at most: under SQLite's limit of
    variables), not one per key."""
    cache = JudgeCache(str(tmp_path / "judge.sqlite"))
    statements = []
    cache.db.set_trace_callback(lambda sql: statements.append(sql) if sql.startswith("SELECT") else None)
    cache.get_many(f"k{i}" for i in range(1203))
    assert len(statements) == 3
    cache.close()
