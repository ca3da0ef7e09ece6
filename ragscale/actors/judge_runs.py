"""The judge actor's bookkeeping, shared by its two paths (rounds and streaming, ragscale/actors/
judge.py and judge_stream.py): its counters, one phase's (record, judge) runs, and the checks
every engine output goes through before anything reads it.

Isolation: an exception raised by a judge's own code (at its start, or on an answer) or by a
parser is that judge's failure on that record (a ``judge_errors`` entry, its metrics ``null``),
never the record's or the batch's; a parser's is a parse failure like a JudgeParseError (re-asked
while re-asks are left). A RecordError (the record's own input is malformed, e.g. a taxonomy label
that is not 0/1) is the exception: it fails that record, with its stage, as before any judging.
Odd outputs: an output longer than ``judge.max_raw_chars`` is cut to it as it arrives, so that
the parser, the record and the judge cache all see the same text (docs/judges.md, "Odd outputs
and their limits").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple

from ragscale.errors import RecordError
from ragscale.judges.base import Failed, JudgeParseError, JudgePrompt, Undefined

STREAM_KEY = "streamed"  # the streaming path's progress key: "streamed (idk) 3/12 prompts"
FLUSH_EVERY = 64  # the streaming path writes fresh generations to the cache in batches of this many


def reask_sampling(prompt: JudgePrompt, attempt: int) -> dict[str, Any]:
    """Temperature and seed of ``prompt``'s ``attempt`` (0: the first ask). The first ask is
    greedy, or the prompt's own ``sampling``; a re-ask after a parse failure samples at 0.7 with
    the attempt as seed, spread by the prompt's sample index (seed = attempt + 1000 x index),
    so that the n samples of one prompt (ragas' answer relevancy) stay n different draws and
    are not merged into one generation as identical prompts of a round."""
    if attempt == 0:
        if prompt.sampling:
            return {"temperature": prompt.sampling[0], "seed": prompt.sampling[1]}
        return {"temperature": 0.0, "seed": 0}
    sample = int(prompt.sampling[1]) if prompt.sampling else 0
    return {"temperature": 0.7, "seed": attempt + 1000 * sample}


def judge_limits(conf: Mapping[str, Any], where: str, overwrite: bool) -> dict[str, Any]:
    """A judge config's ``max_raw_chars`` (a positive integer, or None: no cap; its default is
    ragscale/config.py JudgeConf's) and ``retry_unparsed`` (true, false, or None: as
    ``overwrite``), checked (one-line UserErrors), as JudgeActor keyword arguments."""
    from ragscale.errors import UserError

    cap = conf.get("max_raw_chars")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise UserError(f"{where}.max_raw_chars must be a positive number of characters or null (no cap), got {cap!r}")
    retry = conf.get("retry_unparsed")
    if retry is not None and not isinstance(retry, bool):
        raise UserError(f"{where}.retry_unparsed must be true, false or null (as overwrite), got {retry!r}")
    return {"max_raw_chars": cap, "retry_unparsed": bool(overwrite) if retry is None else retry}


class JudgeStats:
    """Counters in total (``judge_<c>``) and per judge (``judgeby|<judge>|<c>``) for the batch's
    stats (run.json ``judge_work``): prompts, cache_hits, cache_unparsed (cached outputs that did
    not parse, asked again), dedup_hits, generations, retries, parse_failures, engine_errors,
    judge_failures (a judge's own code raised), outputs_cut and raw_chars_dropped
    (``max_raw_chars``), prompt_tokens, completion_tokens."""

    def __init__(self) -> None:
        self.d: dict[str, float] = {}

    def add(self, judge: str, counter: str, n: float = 1) -> None:
        if n:
            self.d[f"judge_{counter}"] = self.d.get(f"judge_{counter}", 0) + n
            key = f"judgeby|{judge}|{counter}"
            self.d[key] = self.d.get(key, 0) + n


def http_counters(stats: JudgeStats, counters: Mapping[str, Any]) -> None:
    """Add an engine's HTTP counters (the OpenAI-compatible engine's ``requests``,
    ``http_retries``, ...) to the batch's stats as ``judge_http_<name>`` (run.json: http_retries)."""
    for k, v in counters.items():
        if isinstance(v, (int, float)) and v:
            name = "judge_" + (k if k.startswith("http_") else f"http_{k}")
            stats.d[name] = stats.d.get(name, 0) + v


def cut(text: str, limit: int | None) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters (None: no cap), and how many were dropped."""
    if limit is None or len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def parse_step(step: tuple[JudgePrompt, Callable[[str], Any]], text: str) -> tuple[bool, Any]:
    """(True, the parsed value) or (False, why not): a JudgeParseError's reason, or any other
    exception of the parser named as such (a parser's bug on an odd output fails that output only)."""
    try:
        return True, step[1](text)
    except JudgeParseError as e:
        return False, e.reason
    except Exception as e:  # noqa: BLE001 - isolated to this output (module docstring)
        return False, f"the parser raised {type(e).__name__}: {str(e)[:200]}"


def cut_warning(judge: str, outputs: int, dropped: int, limit: int) -> str:
    """The record's warning for its ``outputs`` of ``judge`` cut to ``limit`` characters."""
    kept = "the judge read the cut text; the record and the judge cache keep it"
    if outputs == 1:
        return (f"judge {judge}: an output of {limit + dropped:,} characters cut to judge.max_raw_chars={limit:,} "
                f"({dropped:,} dropped; {kept})")
    return (f"judge {judge}: {outputs} outputs longer than judge.max_raw_chars={limit:,} characters cut to it "
            f"({dropped:,} characters dropped in all; {kept})")


@dataclass
class Phase:
    """One phase's judge runs over a batch, keyed (row index, judge name): the generators, each
    unfinished run's pending step (or fan-out list of steps), the finished runs' (result, error),
    the failed fan-out items' errors and each run's cut outputs (count, characters dropped)."""

    runs: dict[tuple[int, str], Any] = field(default_factory=dict)
    current: dict[tuple[int, str], Any] = field(default_factory=dict)
    final: dict[tuple[int, str], tuple[Any, dict | None]] = field(default_factory=dict)
    item_errors: dict[tuple[int, str], list[dict]] = field(default_factory=dict)
    cuts: dict[tuple[int, str], list[int]] = field(default_factory=dict)
    record_errors: dict[int, RecordError] = field(default_factory=dict)

    def start(self, key: tuple[int, str], begin: Callable[[], Any]) -> None:
        """Start a run (``begin()`` gives its generator) and take it to its first step; a judge
        that raises at its start fails on this record only."""
        try:
            self.runs[key] = begin()
        except Exception as e:  # noqa: BLE001 - isolated (module docstring)
            self._raised(key, e)
            return
        self.advance(key, None, first=True)

    def advance(self, key: tuple[int, str], value: Any, first: bool = False) -> None:
        """Send ``value`` to the judge run and store its next step, or its result when done
        (empty fan-out rounds are answered at once); a judge that raises ends with that error."""
        run = self.runs[key]
        try:
            step = next(run) if first else run.send(value)
            while isinstance(step, list) and not step:
                step = run.send([])
        except StopIteration as stop:
            result = stop.value
            if isinstance(result, Undefined):
                self.final[key] = (None, {"judge": key[1], "reason": result.reason, "undefined": True})
            else:
                self.final[key] = (result, None)
            return
        except Exception as e:  # noqa: BLE001 - isolated (module docstring)
            self._raised(key, e)
            return
        self.current[key] = step

    def _raised(self, key: tuple[int, str], e: Exception) -> None:
        if isinstance(e, RecordError):  # the record's input, not the judge: the record fails (the first one kept)
            self.record_errors.setdefault(key[0], e)
            self.final[key] = (None, {"judge": key[1], "reason": f"{e.stage} error: {e.message}"})
            return
        self.final[key] = (None, {"judge": key[1], "reason": f"the judge raised {type(e).__name__}: {str(e)[:300]}"})

    def resume(self, key: tuple[int, str], answer: Any) -> None:
        """Give a run the answer to its step: ``(ok, value | reason, raw, dropped)`` for a single
        step, a list of them for a fan-out. A failed single step ends the run (its metric null,
        the reason and raw text in judge_errors); a failed fan-out item reaches the judge as
        ``Failed`` and is listed in judge_errors too. ``dropped``: characters cut from the raw."""
        answers = answer if isinstance(answer, list) else [answer]
        for *_, dropped in answers:
            if dropped:
                c = self.cuts.setdefault(key, [0, 0])
                c[0], c[1] = c[0] + 1, c[1] + dropped
        if isinstance(answer, list):
            value = []
            for i, (ok, v, raw, _) in enumerate(answer):
                if not ok:
                    self.item_errors.setdefault(key, []).append({"judge": key[1], "item": i, "reason": v, "raw": raw})
                value.append(v if ok else Failed(v, raw))
        else:
            ok, value, raw, _ = answer
            if not ok:
                self.runs[key].close()
                self.final[key] = (None, {"judge": key[1], "reason": value, "raw": raw})
                return
        self.advance(key, value)


class Ask(NamedTuple):
    """One prompt of a streamed run: the run's key, its item (0 for a single step), the
    (prompt, parse) step and the attempt (0: the first ask)."""

    run: tuple[int, str]
    item: int
    step: tuple[JudgePrompt, Any]
    attempt: int


def add_warnings(row: dict, warnings: list[str]) -> None:
    """Append ``warnings`` to the row's ``warnings`` list (record.py's row: a list of strings)."""
    if warnings:
        row["warnings"] = [*(row.get("warnings") or []), *warnings]

