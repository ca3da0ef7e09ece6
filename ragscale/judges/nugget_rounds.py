"""The nugget judge's rounds (ragscale.judges.nuggets), written once for both protocols: for one
record the creation iterations, one importance round, one assignment round, and the result with
its details; for one query's bank (``nuggets.bank=per_query``) nuggetizer's windowed creation and
the importance round, then each record's assignment round against the bank. A
``NuggetProtocol`` holds what differs between the constrained and the reference protocol: the
renderers and parsers, what a failure gives the record, and the rules of the creation loop and of
the label rounds."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ragscale.judges.base import Failed, JudgePrompt, JudgeResult, JudgeRun
from ragscale.judges.nugget_prompts import MAX_NUGGETS
from ragscale.metrics.nuggets import nugget_scores, sort_and_keep

CREATION_ITERS = 5  # AutoNuggetMetric(nugget_creation_iters=5)
BATCH = 10  # importance and assignment batch size
WINDOW = 10  # passages per creation step of a query's bank (nuggetizer's creator_window_size)


def batches(items: Sequence[str]) -> list[list[str]]:
    """``items`` in consecutive batches of ``BATCH``."""
    return [list(items[i : i + BATCH]) for i in range(0, len(items), BATCH)]


def first_failure(what: str, answers: Sequence[Any]) -> str | None:
    """Why a round of exact label batches fails: its first failed batch; None when none failed."""
    for k, a in enumerate(answers):
        if isinstance(a, Failed):
            return f"{what} batch {k + 1} of {len(answers)} failed: {a.reason}"
    return None


def labels_failure(what: str, answers: Sequence[Any], n: int) -> str | None:
    """Why a round of label batches fails open-rag-eval's checks: a failed or empty batch, or a
    total that is not ``n``; None when it passes."""
    for k, a in enumerate(answers):
        if isinstance(a, Failed):
            return f"{what} batch {k + 1} of {len(answers)} failed: {a.reason}"
        if not a:
            return f"{what} batch {k + 1} of {len(answers)} returned no labels"
    total = sum(len(a) for a in answers)
    return None if total == n else f"{total} {what} labels for {n} nuggets"


@dataclass(frozen=True)
class NuggetProtocol:
    """What one protocol's rounds ask and how they read the answers."""

    render_create: Callable[[str, Sequence[str], Sequence[str]], JudgePrompt]  # (query, passages, nuggets)
    parse_nuggets: Callable[[str], list[str]]
    render_importance: Callable[[str, Sequence[str]], JudgePrompt]  # (query, batch)
    parse_importance: Callable[..., list[str]]
    render_assign: Callable[[str, str, Sequence[str]], JudgePrompt]  # (query, answer, batch)
    parse_assignment: Callable[..., list[str]]
    fail: Callable[[str], Any]  # a failure's reason -> what the record gets (Undefined, or a neutral result)
    # every label batch holds exactly its size of labels (its parser gets ``n=``, and a round fails
    # only on a failed batch); otherwise only the round's total must match (``labels_failure``)
    exact_batches: bool
    creation_fan_out: bool  # each creation step is a fan-out of one: a failed output comes back as Failed
    fixed_point: bool  # creation stops once the list comes back unchanged

    def parser(self, parse: Callable[..., list[str]], batch: Sequence[str]) -> Callable[[str], list[str]]:
        """The parser of one label batch."""
        return functools.partial(parse, n=len(batch)) if self.exact_batches else parse

    def failure(self, what: str, answers: Sequence[Any], n: int) -> str | None:
        """Why a round of label batches for ``n`` nuggets fails; None when it passes."""
        return first_failure(what, answers) if self.exact_batches else labels_failure(what, answers, n)


@dataclass(frozen=True)
class Stopped:
    """A round that failed: ``result`` is what the record gets (the protocol's ``fail``)."""

    result: Any


def create(protocol: NuggetProtocol, query: str, passages: Sequence[str]) -> JudgeRun:
    """open-rag-eval's creation loop: up to ``CREATION_ITERS`` steps over the whole context.
    Returns (nuggets, iterations), or ``Stopped``."""
    p = protocol
    nuggets: list[str] = []
    iterations = 0
    while iterations < CREATION_ITERS:
        iterations += 1
        got = yield from _create_step(p, query, passages, nuggets, f"iteration {iterations}")
        if isinstance(got, Stopped):
            return got
        unchanged, nuggets = got == nuggets, got
        if len(nuggets) >= MAX_NUGGETS or (p.fixed_point and unchanged):
            break
    return nuggets, iterations


def create_windows(protocol: NuggetProtocol, query: str, passages: Sequence[str],
                   window: int = WINDOW) -> JudgeRun:
    """castorini/nuggetizer's creation (``Nuggetizer.create``): one step per window of
    ``window`` passages, in order, each updating the list so far. Returns (nuggets, windows),
    or ``Stopped``."""
    nuggets: list[str] = []
    starts = range(0, max(len(passages), 1), window)  # no passage: one step, as open-rag-eval's empty context
    for k, start in enumerate(starts):
        got = yield from _create_step(protocol, query, passages[start:start + window], nuggets,
                                      f"window {k + 1} of {len(starts)}")
        if isinstance(got, Stopped):
            return got
        nuggets = got
    return nuggets, len(starts)


def _create_step(p: NuggetProtocol, query: str, passages: Sequence[str], nuggets: list[str], where: str) -> JudgeRun:
    """One creation step: the new list, or ``Stopped``."""
    step = (p.render_create(query, passages, nuggets), p.parse_nuggets)
    if p.creation_fan_out:
        [got] = yield [step]
        if isinstance(got, Failed):
            return Stopped(p.fail(f"nugget creation failed ({where}): {got.reason}"))
    else:
        got = yield step
    if not got:
        return Stopped(p.fail(f"nugget creation returned no nuggets ({where})"))
    return got


def importance(protocol: NuggetProtocol, query: str, nuggets: Sequence[str]) -> JudgeRun:
    """The importance round, then open-rag-eval's sort and cut to ``KEEP``: (kept nuggets,
    their labels), or ``Stopped``."""
    p = protocol
    answers = yield [(p.render_importance(query, b), p.parser(p.parse_importance, b)) for b in batches(nuggets)]
    failure = p.failure("importance", answers, len(nuggets))
    if failure:
        return Stopped(p.fail(failure))
    labels = [label for labels in answers for label in labels]
    keep = sort_and_keep(labels)  # the first KEEP
    return [nuggets[i] for i in keep], [labels[i] for i in keep]


def assign(protocol: NuggetProtocol, query: str, answer: str, kept: Sequence[str]) -> JudgeRun:
    """The assignment round of ``answer`` against ``kept``: the labels, or ``Stopped``."""
    p = protocol
    answers = yield [(p.render_assign(query, answer, b), p.parser(p.parse_assignment, b)) for b in batches(kept)]
    failure = p.failure("assignment", answers, len(kept))
    if failure:
        return Stopped(p.fail(failure))
    return [label for labels in answers for label in labels]


def created_and_kept(protocol: NuggetProtocol, query: str, creation: JudgeRun) -> JudgeRun:
    """A creation (``create`` or ``create_windows``), then the importance round: (the nuggets
    created, the creation's steps, the kept nuggets, their labels), or ``Stopped``."""
    made = yield from creation
    if isinstance(made, Stopped):
        return made
    nuggets, steps = made
    scored = yield from importance(protocol, query, nuggets)
    return scored if isinstance(scored, Stopped) else (nuggets, steps, *scored)


def rounds(protocol: NuggetProtocol, query: str, answer: str, passages: Sequence[str]) -> JudgeRun:
    """The three rounds for one record under ``protocol``; ``passages`` are those graded >= 1,
    in order. Returns ``protocol.fail(reason)`` or ``JudgeResult`` with the metrics and
    ``{"nuggets", "created", "iterations"}`` details."""
    got = yield from created_and_kept(protocol, query, create(protocol, query, passages))
    if isinstance(got, Stopped):
        return got.result
    nuggets, iterations, kept, kept_importances = got
    assignments = yield from assign(protocol, query, answer, kept)
    if isinstance(assignments, Stopped):
        return assignments.result
    details = {
        "nuggets": [{"text": t, "importance": i, "assignment": a}
                    for t, i, a in zip(kept, kept_importances, assignments)],
        "created": len(nuggets),
        "iterations": iterations,
    }
    return JudgeResult(metrics=nugget_scores(kept_importances, assignments), details=details)


def bank_rounds(protocol: NuggetProtocol, query: str, passages: Sequence[str], window: int = WINDOW) -> JudgeRun:
    """One query's nugget bank (``nuggets.bank=per_query``): nuggetizer's windowed creation over
    the pooled passages graded >= 1, then the importance round and the cut to ``KEEP``. Returns
    ``protocol.fail(reason)`` or ``JudgeResult`` without metrics, with ``{"nuggets": [{"id",
    "text", "importance"}], "created", "windows"}`` details; ids are ``n1``, ``n2``... in bank order."""
    got = yield from created_and_kept(protocol, query, create_windows(protocol, query, passages, window))
    if isinstance(got, Stopped):
        return got.result
    nuggets, windows, kept, labels = got
    return JudgeResult(metrics={}, details={
        "nuggets": [{"id": f"n{k + 1}", "text": t, "importance": i} for k, (t, i) in enumerate(zip(kept, labels))],
        "created": len(nuggets), "windows": windows})


def assign_rounds(protocol: NuggetProtocol, query: str, answer: str, bank: Sequence[dict]) -> JudgeRun:
    """One record's answer against its query's bank (``bank_rounds``' nuggets): the assignment
    round only. Returns ``protocol.fail(reason)`` or ``JudgeResult`` with the metrics and the
    bank's nuggets, each with its assignment."""
    assignments = yield from assign(protocol, query, answer, [n["text"] for n in bank])
    if isinstance(assignments, Stopped):
        return assignments.result
    return JudgeResult(metrics=nugget_scores([n["importance"] for n in bank], assignments),
                       details={"nuggets": [{**n, "assignment": a} for n, a in zip(bank, assignments)]})
