"""Live progress of a run: what every stage has done, while it works.

Workers report into one small Ray actor (``ProgressHub``, no CPU reserved): each stage its
records done, and the judge actor, inside a batch, its prompts done per judge round (the
engines call back as prompts finish). A thread on the driver reads the hub and shows it:

- on a terminal, one bar per stage, redrawn in place;
- elsewhere (CI, a log file, ``nohup``, a notebook), one line at most every
  ``progress_interval_s`` seconds (and never more than that without one while the run works).

A report is fire-and-forget and batched (at most one message per worker every half
second), so progress costs the pipeline nothing measurable; losing the hub loses only the
display.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, TextIO

MODES = ("auto", "bars", "lines", "off")  # the config's `progress`
RECORDS = "records"  # the key of a stage's records done
SEND_EVERY_S = 0.5  # a worker sends its counts at most this often (and at the end of a batch)


class ProgressHub:
    """The Ray actor that collects counts: stage -> key -> [done, total] (plus a label per key)."""

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, list[int]]] = {}
        self.labels: dict[str, dict[str, str]] = {}
        self.first: dict[str, float] = {}  # stage -> when it first reported

    def add(self, stage: str, deltas: Mapping[str, tuple[int, int]], labels: Mapping[str, str] | None = None) -> None:
        now = time.monotonic()
        self.first.setdefault(stage, now)
        st = self.counts.setdefault(stage, {})
        for key, (done, total) in deltas.items():
            c = st.setdefault(key, [0, 0])
            c[0] += done
            c[1] += total
        if labels:
            self.labels.setdefault(stage, {}).update(labels)

    def snapshot(self) -> dict:
        now = time.monotonic()
        return {"counts": self.counts, "labels": self.labels,
                "since": {s: now - t for s, t in self.first.items()}}


class Reporter:
    """A worker's side: counts added locally, sent to the hub at most every ``SEND_EVERY_S``.
    Thread-safe (the OpenAI-compatible engine reports from its event loop's thread)."""

    def __init__(self, hub: Any, stage: str):
        self.hub, self.stage = hub, stage
        self.pending: dict[str, list[int]] = {}
        self.labels: dict[str, str] = {}
        self.last = 0.0
        self.lock = threading.Lock()

    def add(self, key: str, done: int = 0, total: int = 0, label: str | None = None) -> None:
        """Count ``done`` finished and ``total`` newly known items under ``key``."""
        with self.lock:
            c = self.pending.setdefault(key, [0, 0])
            c[0] += done
            c[1] += total
            if label:
                self.labels[key] = label
            # new work (a round's prompts, known once per engine call) is shown at once
            due = bool(total or label) or time.monotonic() - self.last >= SEND_EVERY_S
        if due:
            self.flush()

    def flush(self) -> None:
        with self.lock:
            pending, labels = self.pending, self.labels
            self.pending, self.labels, self.last = {}, {}, time.monotonic()
        if self.hub is not None and (pending or labels):
            try:
                self.hub.add.remote(self.stage, {k: tuple(v) for k, v in pending.items()}, labels)
            except Exception:  # noqa: BLE001 - progress is a display: never fail a batch for it
                self.hub = None


def start_hub() -> Any:
    """The run's hub actor (no CPU reserved, so it never takes a slot from a pool)."""
    import ray

    return ray.remote(num_cpus=0, max_concurrency=2)(ProgressHub).remote()


def reporting_task(fn: Callable, stage: str, hub: Any) -> Callable:
    """``fn`` (a CPU task stage over an Arrow batch) that also counts its rows in the hub."""
    if hub is None:
        return fn

    def task(batch: Any, **kwargs: Any) -> Any:
        out = fn(batch, **kwargs)
        hub.add.remote(stage, {RECORDS: (out.num_rows, 0)})
        return out

    task.__name__ = getattr(fn, "__name__", "task")
    return task


# -- the driver's view ------------------------------------------------------------------


def _duration(s: float) -> str:
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


@dataclass
class StageView:
    """One stage's line: records done/total, its rate and ETA, and (judges) the rounds' prompts."""

    name: str
    done: int
    total: int
    rate: float | None
    eta: float | None
    detail: str = ""
    rounds: list[tuple[str, int, int]] = field(default_factory=list)  # (label, done, total)


def stage_views(snap: Mapping[str, Any], stages: Sequence[str], total: int, written: int,
                elapsed: float) -> list[StageView]:
    """The stages' views from a hub snapshot, in pipeline order, then ``written`` (the driver's)."""
    out = []
    for name in stages:
        counts = snap.get("counts", {}).get(name, {})
        done = min(total, counts.get(RECORDS, [0, 0])[0])
        since = snap.get("since", {}).get(name)
        labels = snap.get("labels", {}).get(name, {})
        rounds = sorted(((k, v[0], v[1]) for k, v in counts.items() if k != RECORDS), key=lambda r: _round_no(r[0]))
        rate = done / since if since and done else None
        eta = (total - done) / rate if rate else None
        if eta is None and rounds and since:  # no record out yet: judge from the rounds' prompts
            p_done, p_total = sum(r[1] for r in rounds), sum(r[2] for r in rounds)
            if p_done and p_total:
                eta = since * (p_total - p_done) / p_done
        views = [(f"{k} {labels.get(k, '')}".strip(), d, t) for k, d, t in rounds]
        out.append(StageView(name, done, total, rate, eta, rounds=views))
    rate = written / elapsed if written and elapsed else None
    out.append(StageView("written", written, total, rate, (total - written) / rate if rate else None))
    return out


def _round_no(key: str) -> int:
    digits = "".join(ch for ch in key if ch.isdigit())
    return int(digits) if digits else 0


def overall_eta(views: Sequence[StageView]) -> float | None:
    """The run's ETA: the slowest unfinished stage's (stages overlap, so the largest)."""
    etas = [v.eta for v in views if v.done < v.total and v.eta is not None]
    return max(etas) if etas else None


def format_line(views: Sequence[StageView], elapsed: float) -> str:
    """One progress line (off a terminal)."""
    parts = []
    for v in views:
        part = f"{v.name} {v.done}/{v.total}"
        live = [r for r in v.rounds if r[1] < r[2]] or v.rounds[-1:]
        if live and v.done < v.total:
            part += " [" + ", ".join(f"{label} {d}/{t} prompts" for label, d, t in live) + "]"
        parts.append(part)
    written = views[-1]
    tail = f"{written.rate:.1f} rec/s" if written.rate else "0 rec/s"
    eta = overall_eta(views)
    tail += f", ETA {_duration(eta)}" if eta is not None else ""
    return f"[ragscale] {_duration(elapsed)} " + " · ".join(parts) + f" · {tail}"


def _bar(done: int, total: int, chars: str, width: int = 24) -> str:
    filled = int(width * done / total) if total else width
    return chars[0] * filled + chars[1] * (width - filled)


def format_bars(views: Sequence[StageView], elapsed: float, chars: str = "█░") -> list[str]:
    """One bar per stage (on a terminal), judge rounds indented under their stage."""
    width = max(len(v.name) for v in views)
    lines = []
    for v in views:
        rate = f"{v.rate:6.1f}/s" if v.rate else " " * 8
        eta = f"  ETA {_duration(v.eta)}" if v.eta is not None and v.done < v.total else ""
        bar = _bar(v.done, v.total, chars)
        lines.append(f"  {v.name:<{width}} {bar} {v.done:>{len(str(v.total))}}/{v.total} {rate}{eta}")
        for label, d, t in v.rounds:
            lines.append(f"  {'':<{width}}   {label}: {d}/{t} prompts")
    eta = overall_eta(views)
    lines.append(f"  {_duration(elapsed)} elapsed" + (f", ETA {_duration(eta)}" if eta is not None else ""))
    return lines


class ProgressDisplay:
    """The driver's thread: reads the hub and shows the run's progress until ``stop``.

    ``mode``: ``bars`` (redrawn in place on ``stream``), ``lines`` (one line via ``printer``
    every ``interval`` seconds), or ``off``. ``written`` is the driver's own count.
    """

    def __init__(self, hub: Any, stages: Sequence[str], total: int, mode: str, interval: float,
                 printer: Callable[[str], None] = print, stream: TextIO | None = None):
        self.hub, self.stages, self.total, self.mode = hub, list(stages), total, mode
        self.interval = interval if mode == "lines" else 0.5
        self.printer, self.stream = printer, stream or sys.stdout
        self.written = self.errors = 0
        self.start = time.monotonic()
        self.drawn = 0  # bar lines on screen
        self.last_line = ""
        self.snap: dict = {}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="ragscale-progress", daemon=True)

    def __enter__(self) -> "ProgressDisplay":
        if self.mode != "off":
            self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def update(self, written: int, errors: int) -> None:
        """Records written by the driver (and how many of them carry an error)."""
        self.written += written
        self.errors += errors

    def _poll(self) -> None:
        if self.hub is None:
            return
        import ray

        try:
            self.snap = ray.get(self.hub.snapshot.remote(), timeout=5)
        except Exception:  # noqa: BLE001 - a display only
            pass

    def show(self, final: bool = False) -> None:
        elapsed = time.monotonic() - self.start
        views = stage_views(self.snap, self.stages, self.total, self.written, elapsed)
        if self.mode == "bars":
            utf = (getattr(self.stream, "encoding", None) or "").lower().replace("-", "").startswith("utf")
            lines = format_bars(views, elapsed, "█░" if utf else "#-")
            up = f"\x1b[{self.drawn}F" if self.drawn else ""
            self.stream.write(up + "".join(f"\x1b[2K{line}\n" for line in lines))
            self.stream.flush()
            self.drawn = 0 if final else len(lines)
        elif self.mode == "lines":
            line = format_line(views, elapsed) + (f", {self.errors} errors" if self.errors else "")
            if final or line != self.last_line:
                self.last_line = line
                self.printer(line)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._poll()
            self.show()

    def stop(self) -> None:
        """Stop the thread and show the final state once."""
        if self.mode == "off" or self._stop.is_set():
            return
        self._stop.set()
        self.thread.join(timeout=10)
        self._poll()
        self.show(final=True)


def choose_mode(setting: str, printer: Callable[[str], None], stream: TextIO | None = None) -> str:
    """``auto``: bars when the run prints to a terminal with ``print``, lines otherwise."""
    if setting != "auto":
        return setting
    stream = stream or sys.stdout
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return "bars" if tty and printer is print else "lines"
