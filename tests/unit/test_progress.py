"""Live progress (ragscale/pipeline/progress.py): the hub's counts, the workers' batched
reports, and what the driver shows from them (lines off a terminal, bars on one)."""

from __future__ import annotations

import io

from ragscale.pipeline.progress import (ProgressDisplay, ProgressHub, Reporter, choose_mode, format_bars, format_line,
                                        stage_views)


class FakeHub:
    """A hub handle whose ``add.remote`` lands in a real ProgressHub at once."""

    def __init__(self) -> None:
        self.hub, self.messages = ProgressHub(), 0
        outer = self

        class Add:
            @staticmethod
            def remote(stage, deltas, labels=None):
                outer.messages += 1
                outer.hub.add(stage, deltas, labels)

        self.add = Add()


def test_reporter_batches_counts_and_shows_new_work_at_once(monkeypatch):
    import ragscale.pipeline.progress as progress

    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    fake = FakeHub()
    rep = Reporter(fake, "judge")
    rep.add("round 1", total=10, label="(idk)")  # new work: sent at once
    assert fake.messages == 1
    for _ in range(5):
        rep.add("round 1", done=1)  # within half a second: kept
    assert fake.messages == 1
    clock[0] += 0.6
    rep.add("round 1", done=1)
    assert fake.messages == 2
    rep.add("records", done=3)
    rep.flush()
    snap = fake.hub.snapshot()
    assert snap["counts"]["judge"] == {"round 1": [6, 10], "records": [3, 0]}
    assert snap["labels"]["judge"] == {"round 1": "(idk)"}


def test_views_and_line_rates_and_eta():
    snap = {"counts": {"read": {"records": [100, 0]}, "judge": {"records": [0, 0], "round 1": [25, 100],
                                                               "round 2": [0, 0]}},
            "labels": {"judge": {"round 1": "(idk, radbench)"}}, "since": {"read": 10.0, "judge": 5.0}}
    views = stage_views(snap, ["read", "encoder", "judge"], total=100, written=0, elapsed=12.0)
    assert [(v.name, v.done, v.total) for v in views] == [("read", 100, 100), ("encoder", 0, 100), ("judge", 0, 100),
                                                           ("written", 0, 100)]
    assert views[0].rate == 10.0 and views[0].eta == 0
    assert views[2].eta == 15.0  # no record out yet: 25% of the known prompts in 5 s
    line = format_line(views, 12.0)
    assert line.startswith("[ragscale] 12s read 100/100 · encoder 0/100 · judge 0/100 [round 1 (idk, radbench) 25/100 prompts")
    assert line.endswith("· written 0/100 · 0 rec/s, ETA 15s")


def test_done_counts_never_exceed_the_total():
    snap = {"counts": {"read": {"records": [130, 0]}}, "labels": {}, "since": {"read": 1.0}}
    assert stage_views(snap, ["read"], total=100, written=100, elapsed=2.0)[0].done == 100


def test_bars_and_their_ascii_fallback():
    views = stage_views({}, ["read"], total=4, written=2, elapsed=65.0)
    lines = format_bars(views, 65.0)
    assert "░" in lines[0] and lines[1].split()[1].startswith("████████████")
    assert lines[-1].strip().startswith("1m05s elapsed")
    assert set(format_bars(views, 65.0, "#-")[1].split()[1]) == {"#", "-"}


def test_display_lines_without_a_hub():
    printed: list[str] = []
    display = ProgressDisplay(None, ["read"], 3, "lines", 3600, printed.append)
    with display:
        display.update(3, 1)
    assert len(printed) == 1 and "written 3/3" in printed[0] and printed[0].endswith(", 1 errors")


def test_display_bars_redraw_in_place():
    stream = io.StringIO()
    display = ProgressDisplay(None, ["read"], 2, "bars", 1.0, print, stream)
    display.show()
    display.show()
    out = stream.getvalue()
    assert out.count("\x1b[3F") == 1  # the second drawing moves up over the first's 3 lines


def test_mode_choice():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert choose_mode("auto", print, Tty()) == "bars"
    assert choose_mode("auto", print, io.StringIO()) == "lines"
    assert choose_mode("auto", [].append, Tty()) == "lines"  # a caller's own printer gets lines
    assert choose_mode("off", print, Tty()) == "off"
