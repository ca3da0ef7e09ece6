"""The output_dir's lock (ragscale.io.lock), resume over inputs that changed (ragscale.io.output
``prepare``), a torn middle line of records.jsonl, and the driver's signal handling
(ragscale.driver.Signals), without Ray (issue 33; the end-to-end runs: tests/integration/test_faults_output_dir.py)."""

from __future__ import annotations

import errno
import hashlib
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from ragscale import exitcodes
from ragscale.errors import UserError
from ragscale.io import lock
from ragscale.io.output import IDENTITIES, STATE, finished_keys, input_identity, iter_records, prepare
from ragscale.driver import Signals

HOST = socket.gethostname()


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _plant(out, host: str, pid: int, started: str = "2026-11-27T13:02:09+01:00") -> str:
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, lock.LOCK_NAME)
    with open(path, "w") as fh:
        json.dump({"host": host, "pid": pid, "started": started}, fh)
    return path


def _hold(out: str, ready, go) -> None:  # a process holding the lock until told to go
    lock.acquire(out, printer=lambda line: None)
    ready.set()
    go.wait(60)
    lock.release(out)


# ---------------------------------------------------------------- the lock

def test_a_second_holder_is_refused_in_one_line_naming_the_first(tmp_path):
    out = str(tmp_path / "out")
    ctx = multiprocessing.get_context("spawn")
    ready, go = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(out, ready, go))
    holder.start()
    try:
        assert ready.wait(60)
        with pytest.raises(UserError) as e:
            lock.acquire(out)
        msg = str(e.value)
        assert msg.startswith(f"output_dir {out} is in use by the run started ")
        assert msg.endswith(f" on host {HOST}, pid {holder.pid}; wait for it, or use another output_dir")
        assert "\n" not in msg
    finally:
        go.set()
        holder.join(60)
    assert not os.path.exists(os.path.join(out, lock.LOCK_NAME))  # released by its holder
    with lock.OutputDirLock(out):
        pass


def _no_flock(fd, operation):
    raise OSError(errno.ENOLCK, "No locks available")


def test_without_flock_the_pid_decides(tmp_path, monkeypatch):
    """A file system without flock (ENOLCK): a live pid holds the lock, a dead one's is taken over."""
    import fcntl

    monkeypatch.setattr(fcntl, "flock", _no_flock)
    out = str(tmp_path / "out")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _plant(out, HOST, live.pid)
        with pytest.raises(UserError, match=f"pid {live.pid}; wait for it, or use another output_dir$"):
            lock.acquire(out)
    finally:
        live.kill()
        live.wait()
    _plant(out, HOST, _dead_pid())
    lines: list[str] = []
    with lock.OutputDirLock(out, lines.append):
        assert len(lines) == 1 and "is no longer running" in lines[0]


def test_a_dead_holders_lock_is_taken_over_with_a_line(tmp_path):
    out = str(tmp_path / "out")
    pid = _dead_pid()
    path = _plant(out, HOST, pid)
    lines: list[str] = []
    with lock.OutputDirLock(out, lines.append):
        with open(path) as fh:
            assert json.load(fh)["pid"] == os.getpid()
    assert lines == [f"[ragscale] taking over the lock of output_dir {out}: its run (started 2026-11-27 13:02 on "
                     f"host {HOST}, pid {pid}) is no longer running"]
    assert not os.path.exists(path)


def _take(out: str, results) -> None:
    try:
        lock.acquire(out, printer=lambda line: None)
        results.put("ok")
        time.sleep(2)  # held while the others look
        lock.release(out)
    except UserError as e:
        results.put(str(e))


def test_of_several_runs_over_a_stale_lock_exactly_one_takes_it(tmp_path):
    out = str(tmp_path / "out")
    _plant(out, HOST, _dead_pid())
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_take, args=(out, results)) for _ in range(4)]
    for p in procs:
        p.start()
    got = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
    assert got.count("ok") == 1, got
    assert all("is in use by the run started" in g for g in got if g != "ok")


def test_another_hosts_lock_is_never_taken_over(tmp_path):
    out = str(tmp_path / "out")
    path = _plant(out, "node-7", _dead_pid())
    with pytest.raises(UserError) as e:
        lock.acquire(out)
    assert str(e.value) == (f"output_dir {out} is in use by the run started 2026-11-27 13:02 on host node-7, pid "
                            f"{json.load(open(path))['pid']}; wait for it, or use another output_dir (if that run "
                            f"is dead, remove {path})")
    os.remove(path)  # what the message says to do once that run is known dead
    with lock.OutputDirLock(out):
        assert os.path.exists(path)


def test_the_lock_is_reentrant_in_its_thread_refused_in_another_and_released_on_an_exception(tmp_path):
    out = str(tmp_path / "out")
    path = os.path.join(out, lock.LOCK_NAME)
    errors: list[str] = []
    with pytest.raises(RuntimeError):
        with lock.OutputDirLock(out):
            with lock.OutputDirLock(out):  # ragscale run locks before Hydra, the driver again
                pass
            assert os.path.exists(path)
            t = threading.Thread(target=lambda: errors.append(_refused(out)))
            t.start()
            t.join()
            raise RuntimeError("boom")
    assert errors and "is in use by the run started" in errors[0]
    assert not os.path.exists(path)


def _refused(out: str) -> str:
    try:
        lock.acquire(out)
    except UserError as e:
        return str(e)
    return "acquired"


def test_the_lock_is_taken_before_hydra_only_for_a_path_hydra_resolves_the_same(tmp_path):
    from ragscale.plan import compose

    assert lock.planned_dir(compose(["+scenario=custom", f"output_dir={tmp_path}/x"])) == f"{tmp_path}/x"
    assert lock.planned_dir(compose(["+scenario=custom"])) is None  # the default holds ${now:...}


# ---------------------------------------------------------------- resume checks the inputs' content

def _state(out) -> dict:
    with open(os.path.join(out, STATE)) as fh:
        return json.load(fh)


def test_resume_refuses_an_input_changed_in_place_and_resumes_one_that_grew(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"a": 1}\n{"a": 2}\n')
    out = str(tmp_path / "out")
    fp = {"metrics": ["m"], "inputs": [str(inp)]}
    assert prepare(out, fp, resume=True, overwrite=False) == []
    assert _state(out)[IDENTITIES] == [{"path": str(inp), "size": 18, "mtime_ns": os.stat(inp).st_mtime_ns,
                                        "sha256": hashlib.sha256(inp.read_bytes()).hexdigest()}]
    os.utime(inp, ns=(1, 1))  # touched (or copied): same content, resumed
    assert prepare(out, fp, resume=True, overwrite=False) == []

    inp.write_text('{"a": 0}\n{"a": 1}\n{"a": 2}\n')  # inserted at line 1
    msg = f"input {inp} changed since this output_dir's run (size/hash differ): re-run with overwrite=true, or use " \
          "another output_dir"
    with pytest.raises(UserError, match="^" + msg.replace("(", r"\(").replace(")", r"\)") + "$"):
        prepare(out, fp, resume=True, overwrite=False)
    inp.write_text('{"a": 7}\n{"a": 2}\n')  # same size, other content
    with pytest.raises(UserError, match="changed since"):
        prepare(out, fp, resume=True, overwrite=False)
    inp.write_text('{"a": 1}\n{"a": 2, "b": 3}\n')  # the last line edited: it grew, but not by lines
    with pytest.raises(UserError, match="changed since"):
        prepare(out, fp, resume=True, overwrite=False)

    inp.write_text('{"a": 1}\n{"a": 2}\n{"a": 3}\n')  # appended: resumed, the state now holds the longer file
    assert prepare(out, fp, resume=True, overwrite=False) == [
        f"[ragscale] input {inp} grew since this output_dir's run (lines appended): only its new records are scored"]
    assert _state(out)[IDENTITIES][0]["size"] == 27
    inp.write_text('{"a": 9}\n')
    assert prepare(out, fp, resume=True, overwrite=True) == []  # overwrite starts afresh over any input


def test_an_unfinished_last_line_continued_is_a_change_and_one_ended_first_an_append(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(b'{"a": 1}\n{"a": 2}')  # its last line has no line end
    out = str(tmp_path / "out")
    fp = {"inputs": [str(inp)]}
    prepare(out, fp, resume=True, overwrite=False)
    inp.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": 3}\n')  # the old last line kept: a line end, then a new line
    assert len(prepare(out, fp, resume=True, overwrite=False)) == 1
    with open(inp, "ab") as fh:
        fh.write(b'{"a": 4')
    prepare(out, fp, resume=True, overwrite=True)
    with open(inp, "ab") as fh:
        fh.write(b', "b": 5}\n')  # continues the unfinished last line: that record changed
    with pytest.raises(UserError, match="changed since"):
        prepare(out, fp, resume=True, overwrite=False)


def test_appending_to_parquet_or_an_open_rag_eval_csv_is_a_change(tmp_path):
    csv = tmp_path / "orag.csv"
    csv.write_text("query_id,query,query_run,passage_id,passage,generated_answer\nq1,Q,1,p1,P,A\n")
    out = str(tmp_path / "out")
    fp = {"inputs": [str(csv)]}
    prepare(out, fp, resume=True, overwrite=False)
    with open(csv, "a") as fh:
        fh.write("q1,Q,1,p2,P2,A\n")  # a passage of the same query: its record changes
    with pytest.raises(UserError, match="changed since"):
        prepare(out, fp, resume=True, overwrite=False)


def test_a_state_without_input_identities_resumes_with_a_warning(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"a": 1}\n')
    out = tmp_path / "out"
    out.mkdir()
    (out / STATE).write_text(json.dumps({"inputs": [str(inp)]}))  # written by an earlier release
    notes = prepare(str(out), {"inputs": [str(inp)]}, resume=True, overwrite=False)
    assert notes == [f"[ragscale] warning: {out / STATE} predates input checks: resuming without comparing the "
                     "inputs (re-run with overwrite=true if they changed)"]
    assert _state(out)[IDENTITIES][0]["size"] == 9
    (out / STATE).write_text("{not json")
    with pytest.raises(UserError, match=r"cannot be read \(JSONDecodeError\): re-run with overwrite=true"):
        prepare(str(out), {"inputs": [str(inp)]}, resume=True, overwrite=False)


def test_input_identity_streams_and_hashes_a_prefix(tmp_path):
    data = os.urandom(3 * (1 << 20) + 17)
    p = tmp_path / "big.bin"
    p.write_bytes(data)
    ident = input_identity(str(p), prefix=(1 << 20) + 5)
    assert ident["sha256"] == hashlib.sha256(data).hexdigest() and ident["size"] == len(data)
    assert ident["prefix_sha256"] == hashlib.sha256(data[: (1 << 20) + 5]).hexdigest()
    assert "prefix_sha256" not in input_identity(str(p), prefix=len(data))  # not smaller: nothing appended


# ---------------------------------------------------------------- a torn middle line of records.jsonl

def test_a_torn_middle_line_names_the_file_the_line_and_the_fix(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    good = json.dumps({"ragscale": {"record_key": "k1"}})
    (out / "records.jsonl").write_text(good + "\n\n" + good[:20] + "\n" + good + "\n" + good[:9])
    with pytest.raises(UserError) as e:
        list(finished_keys(str(out)))
    assert str(e.value) == (f"{out / 'records.jsonl'} line 3 is not a complete JSON record (a write was cut?): "
                            "remove that line, or re-run with overwrite=true")
    (out / "records.jsonl").write_text(good + "\n\n" + good + "\n" + good[:9])  # a blank line, a torn last line
    assert len(list(iter_records(str(out / "records.jsonl")))) == 2


# ---------------------------------------------------------------- SIGTERM and SIGHUP like Ctrl-C

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_signals_interrupt_only_while_armed_and_the_handlers_are_put_back(sig):
    before = signal.getsignal(sig)
    with Signals() as stop:
        assert signal.getsignal(sig) not in (before, signal.SIG_DFL)
        os.kill(os.getpid(), sig)  # not armed: noted only
        assert stop.signum == sig
        with pytest.raises(KeyboardInterrupt):
            stop.arm()  # it came already: stop at once
        stop.signum = None
        stop.arm()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sig)
            time.sleep(1)
        os.kill(os.getpid(), sig)  # the second one does not interrupt the stopping
        assert stop.failure() == f"interrupted by {signal.Signals(sig).name}"
    assert signal.getsignal(sig) == before


def test_an_interrupted_run_exits_128_plus_the_signal():
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)):
        failure = exitcodes.interrupted(sig)
        assert exitcodes.of_run(failure, {"in": 5, "errored": 0, "missing": 3}) == code
        assert exitcodes.STATUS[code] == "interrupted" and exitcodes.outcome(code, 5, 0) == "interrupted"
    assert exitcodes.worst([exitcodes.USAGE, 143, exitcodes.OK]) == 143  # a signal stops a sweep
    assert exitcodes.of_run("interrupted", {"in": 5, "missing": 3}) == exitcodes.FAILED  # an old run.json's


SWEEP = """
import sys
from ragscale import driver
from ragscale.commands.run import main as run_main

jobs = []


def execute(cfg, printer=print, output_dir=None):  # the first job is stopped by SIGTERM
    jobs.append(cfg.limit)
    return 143 if len(jobs) == 1 else 0


driver.execute = execute
code = run_main(sys.argv[1:])
print("jobs", jobs)
sys.exit(code)
"""


def test_a_signal_stops_a_sweep_before_its_next_job(tmp_path):
    """``-m``: the job a signal stopped is the last; the command exits with its code (128 + the signal).
    In a subprocess: Hydra's command line configures the process's logging."""
    res = subprocess.run([sys.executable, "-c", SWEEP, "-m", "+scenario=custom", "limit=1,2,3",
                          f"output_dir={tmp_path / 'sweep'}"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 143, res.stdout + res.stderr
    assert res.stdout.rstrip().splitlines()[-1] == "jobs [1]"


def test_a_lock_file_that_stays_unreadable_is_refused_after_a_wait(tmp_path, monkeypatch):
    """Not ragscale's, or left half-written: looked at again for WAIT_S (it may be being written), then
    a one-line refusal saying which file to remove."""
    monkeypatch.setattr(lock, "WAIT_S", 0.2)
    out = tmp_path / "out"
    out.mkdir()
    (out / lock.LOCK_NAME).write_text("not a lock")
    start = time.monotonic()
    with pytest.raises(UserError) as e:
        lock.acquire(str(out))
    assert time.monotonic() - start >= 0.2
    assert str(e.value) == (f"output_dir {out} holds a lock file that is not ragscale's or was left half-written "
                            f"({out / lock.LOCK_NAME}); if no run is using output_dir, remove that file")


def test_another_threads_lock_is_refused_naming_this_process(tmp_path):
    out = str(tmp_path / "out")
    refused: list = []
    with lock.OutputDirLock(out):
        t = threading.Thread(target=lambda: refused.append(pytest.raises(UserError, lock.acquire, out).value))
        t.start()
        t.join()
    assert str(refused[0]).startswith(f"output_dir {out} is in use by the run started ")
    assert str(refused[0]).endswith(f" on host {HOST}, pid {os.getpid()}; wait for it, or use another output_dir")
