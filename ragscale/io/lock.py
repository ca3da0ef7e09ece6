"""An exclusive lock on a run's output_dir, held for the run's whole life (docs/fault-tolerance.md).

The lock is ``output_dir/.ragscale-lock``: created with ``O_CREAT|O_EXCL`` (one creator wins), then
``flock``ed for as long as the run lives (the kernel drops a ``flock`` when its process dies, however
it dies), and holding its holder's host, pid and start time as JSON. A second run on the same
output_dir is refused in one line naming the holder. A lock whose holder is gone is taken over:

- same host, and its ``flock`` free (where the file system has ``flock``; else its pid gone): the
  holder is dead (killed with SIGKILL, its machine rebooted); the take-over is serialised by a
  ``.ragscale-lock.takeover`` file (``O_EXCL`` too) and re-checked under it, so that of several runs
  started over a stale lock exactly one proceeds;
- another host: never taken over automatically (its pid means nothing here); remove the file once
  that host's run is known dead.

The lock is re-entrant within a thread (``ragscale run`` locks before Hydra writes ``.hydra/``, the
driver locks again) and released on every exit path that runs Python's ``finally``.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from ragscale.errors import UserError

LOCK_NAME = ".ragscale-lock"
TAKEOVER_SUFFIX = ".takeover"  # serialises the take-over of a stale lock
STALE_TAKEOVER_S = 30.0  # a take-over file older than this was left by a taker that died mid-way
WAIT_S = 5.0  # how long a lock file may stay unreadable (being created) before the run gives up
_HELD: dict[str, "_Held"] = {}  # this process's locks, by output_dir (realpath)


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: the content of the lock file."""

    host: str
    pid: int
    started: str  # ISO 8601 with the holder's UTC offset

    def words(self) -> str:
        """``started 2026-11-27 13:02 on host h, pid 123``."""
        try:
            when = datetime.fromisoformat(self.started).strftime("%Y-%m-%d %H:%M")
        except ValueError:
            when = self.started
        return f"started {when} on host {self.host}, pid {self.pid}"


@dataclass
class _Held:
    fd: int
    holder: Holder
    thread: int
    count: int


def _me() -> Holder:
    return Holder(socket.gethostname(), os.getpid(), datetime.now().astimezone().isoformat(timespec="seconds"))


def _parse(data: bytes) -> Holder | None:
    try:
        obj = json.loads(data)
        return Holder(str(obj["host"]), int(obj["pid"]), str(obj["started"]))
    except (ValueError, KeyError, TypeError):
        return None


def _flock(fd: int, blocking: bool = False) -> bool | None:
    """Take ``flock(LOCK_EX)`` on ``fd``: True, False when another process holds it, None where
    the file system has no ``flock``."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False
    except OSError as e:
        if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            return None
        raise


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # not one of this process's locks (checked first): an earlier process with our pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def _inspect(path: str) -> tuple[str, Holder | None]:
    """The state of an existing lock file: ("gone", None), ("unreadable", None), ("held", holder)
    or ("stale", holder): its host is this one and its holder is dead."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return "gone", None
    try:
        holder = _parse(os.read(fd, 4096))
        if holder is None:
            return "unreadable", None  # being written (or not ours): looked at again
        if holder.host != socket.gethostname():
            return "held", holder  # another host's pid means nothing here
        free = _flock(fd)  # a live holder keeps its flock; the kernel drops it when the holder dies
        dead = free if free is not None else not _pid_alive(holder.pid)
        return ("stale" if dead else "held"), holder
    finally:
        os.close(fd)  # drops the flock taken to look


def _refusal(out_dir: str, holder: Holder | None, path: str) -> UserError:
    if holder is None:
        return UserError(f"output_dir {out_dir} holds a lock file that is not ragscale's or was left half-written "
                         f"({path}); if no run is using output_dir, remove that file")
    hint = "" if holder.host == socket.gethostname() else f" (if that run is dead, remove {path})"
    return UserError(f"output_dir {out_dir} is in use by the run {holder.words()}; wait for it, or use another output_dir{hint}")


def _take_over(path: str, seen: Holder, printer: Callable[[str], None], out_dir: str) -> None:
    """Remove a stale lock file, re-checked under the take-over file (one taker at a time)."""
    guard = path + TAKEOVER_SUFFIX
    try:
        gfd = os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        try:
            if time.time() - os.stat(guard).st_mtime > STALE_TAKEOVER_S:
                os.unlink(guard)  # its taker died mid-way
        except FileNotFoundError:
            pass
        return  # another run is taking over: the caller looks again
    try:
        state, holder = _inspect(path)
        if state == "stale" and holder == seen:
            os.unlink(path)
            printer(f"[ragscale] taking over the lock of output_dir {out_dir}: its run ({holder.words()}) "
                    "is no longer running")
    finally:
        os.close(gfd)
        os.unlink(guard)


def _create(path: str, me: Holder) -> int | None:
    """Create the lock file (``O_EXCL``), flock it, then write its holder ``me``; None if it exists."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
    except FileExistsError:
        return None
    try:
        _flock(fd, blocking=True)  # only a run looking at the empty file holds it, for an instant
        os.write(fd, json.dumps(me.__dict__).encode())
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    return fd


def acquire(out_dir: str, printer: Callable[[str], None] = print) -> None:
    """Lock ``out_dir`` (created if needed) for this run, or raise UserError naming its holder."""
    key = os.path.realpath(out_dir)
    held = _HELD.get(key)
    if held is not None:
        if held.thread != threading.get_ident():
            raise _refusal(out_dir, held.holder, os.path.join(out_dir, LOCK_NAME))
        held.count += 1
        return
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, LOCK_NAME)
    start, me = time.monotonic(), _me()
    while True:
        fd = _create(path, me)
        if fd is not None:
            _HELD[key] = _Held(fd, me, threading.get_ident(), 1)
            return
        state, holder = _inspect(path)
        waited = time.monotonic() - start
        if state == "held" or waited > STALE_TAKEOVER_S + WAIT_S:  # held, or another taker stuck
            raise _refusal(out_dir, holder, path)
        if state == "unreadable" and waited > WAIT_S:
            raise _refusal(out_dir, None, path)
        if state == "stale":
            _take_over(path, holder, printer, out_dir)
        time.sleep(0.01 if state != "gone" else 0)


def release(out_dir: str) -> None:
    """Release this process's lock on ``out_dir`` (the last of its nested acquisitions removes the file)."""
    key = os.path.realpath(out_dir)
    held = _HELD.get(key)
    if held is None:
        return
    held.count -= 1
    if held.count > 0:
        return
    del _HELD[key]
    path = os.path.join(out_dir, LOCK_NAME)
    try:
        if os.stat(path).st_ino == os.fstat(held.fd).st_ino:  # still ours (never another run's)
            os.unlink(path)
    except FileNotFoundError:
        pass
    finally:
        os.close(held.fd)


class OutputDirLock:
    """``with OutputDirLock(out_dir):`` the run's lock (``acquire`` / ``release``); ``out_dir``
    None: no lock (a path that only Hydra will know)."""

    def __init__(self, out_dir: str | None, printer: Callable[[str], None] = print):
        self.out_dir, self.printer = out_dir, printer

    def __enter__(self) -> "OutputDirLock":
        if self.out_dir is not None:
            acquire(self.out_dir, self.printer)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.out_dir is not None:
            release(self.out_dir)


def planned_dir(cfg: Any) -> str | None:
    """The output_dir a composed config names, where Hydra will resolve it to the same path (not
    one made of the time, ``${now:...}``: the default's), so that ``ragscale run`` can lock it
    before Hydra writes ``.hydra/`` there; None otherwise (the driver then locks it)."""
    from omegaconf import OmegaConf

    try:
        raw = OmegaConf.to_container(cfg, resolve=False).get("output_dir")
        if not isinstance(raw, str) or "${now:" in raw:
            return None
        return os.path.abspath(str(cfg.output_dir))
    except Exception:  # noqa: BLE001 - an interpolation Hydra will report itself
        return None
