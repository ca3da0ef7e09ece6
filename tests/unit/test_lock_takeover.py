"""Taking over a stale output-dir lock (ragscale.io.lock, issue 37): only the lock of a holder that
is dead on this host, and only if it is still the one seen; one taker at a time (a take-over file),
which a taker that died leaves behind for at most STALE_TAKEOVER_S; a line says whose lock was taken."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

from ragscale.io import lock


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def write_lock(path, holder: lock.Holder) -> None:
    path.write_text(json.dumps({"host": holder.host, "pid": holder.pid, "started": holder.started}))


def test_a_stale_lock_is_taken_over_once(tmp_path):
    path = tmp_path / ".ragscale.lock"
    dead = lock.Holder(socket.gethostname(), dead_pid(), "2026-11-27T13:02:00+00:00")
    write_lock(path, dead)
    printed = []
    lock._take_over(str(path), dead, printed.append, "out")
    assert not path.exists() and not os.path.exists(str(path) + lock.TAKEOVER_SUFFIX)
    assert printed == [f"[ragscale] taking over the lock of output_dir out: its run (started 2026-11-27 13:02 on host "
                       f"{socket.gethostname()}, pid {dead.pid}) is no longer running"]


def test_a_lock_that_changed_since_it_was_seen_is_left(tmp_path):
    path = tmp_path / ".ragscale.lock"
    dead = lock.Holder(socket.gethostname(), dead_pid(), "2026-11-27T13:02:00+00:00")
    write_lock(path, dead)
    printed = []
    other = lock.Holder(dead.host, dead.pid, "2026-11-27T14:00:00+00:00")  # another run took it in between
    lock._take_over(str(path), other, printed.append, "out")
    assert path.exists() and not printed and not os.path.exists(str(path) + lock.TAKEOVER_SUFFIX)


def test_another_taker_goes_first_and_a_dead_takers_file_expires(tmp_path):
    path = tmp_path / ".ragscale.lock"
    guard = tmp_path / (".ragscale.lock" + lock.TAKEOVER_SUFFIX)
    dead = lock.Holder(socket.gethostname(), dead_pid(), "2026-11-27T13:02:00+00:00")
    write_lock(path, dead)
    guard.write_text("")
    lock._take_over(str(path), dead, print, "out")
    assert path.exists() and guard.exists()  # a live taker's file: left, the caller looks again
    old = time.time() - lock.STALE_TAKEOVER_S - 5
    os.utime(guard, (old, old))
    lock._take_over(str(path), dead, print, "out")
    assert path.exists() and not guard.exists()  # a dead taker's file removed; the next look takes over


def test_which_pids_are_alive():
    assert lock._pid_alive(os.getpid()) is False  # this process's own pid: an earlier process's lock
    assert lock._pid_alive(dead_pid()) is False
    assert lock._pid_alive(os.getppid()) is True


def test_holder_words_and_parsing():
    h = lock.Holder("h", 12, "2026-11-27T13:02:09+01:00")
    assert h.words() == "started 2026-11-27 13:02 on host h, pid 12"
    assert lock.Holder("h", 1, "yesterday").words() == "started yesterday on host h, pid 1"
    assert lock._parse(b'{"host": "h", "pid": "12", "started": "s"}') == lock.Holder("h", 12, "s")
    for bad in (b"", b"{", b'{"host": "h"}', b'{"host": "h", "pid": "x", "started": "s"}', b"[1]"):
        assert lock._parse(bad) is None, bad


def test_looking_at_a_holders_process_never_signals_it(monkeypatch):
    """Whether a lock's holder still runs is asked with signal 0 (no signal is sent): a live holder
    is alive and goes on running; another user's process (no permission to signal) is alive too."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert lock._pid_alive(child.pid) is True
        time.sleep(0.2)
        assert child.poll() is None  # still running: not hung up, not killed
    finally:
        child.kill()
        child.wait()
    assert lock._pid_alive(child.pid) is False  # gone

    def not_permitted(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(lock.os, "kill", not_permitted)
    assert lock._pid_alive(child.pid) is True
