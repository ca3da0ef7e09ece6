"""The nugget judge's rounds for one record (ragscale.judges.nuggets), written once for both
protocols: the creation iterations, one importance round, one assignment round, and the
result with its details. A ``NuggetProtocol`` holds what differs between the constrained and
the reference protocol: the renderers and parsers, what a failure gives the record, and the
rules of the creation loop and of the label rounds."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ragscale.judges.base import Failed, JudgePrompt, JudgeResult, JudgeRun
from ragscale.judges.nugget_prompts import MAX_NUGGETS
from ragscale.metrics.nuggets import KEEP, nugget_scores, sort_and_keep

CREATION_ITERS = 5  # AutoNuggetMetric(nugget_creation_iters=5)
BATCH = 10  # importance and assignment batch size


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


def rounds(protocol: NuggetProtocol, query: str, answer: str, passages: Sequence[str]) -> JudgeRun:
    """The three rounds for one record under ``protocol``; ``passages`` are those graded >= 1,
    in order. Returns ``protocol.fail(reason)`` or ``JudgeResult`` with the metrics and
    ``{"nuggets", "created", "iterations"}`` details."""
    p = protocol
    nuggets: list[str] = []
    iterations = 0
    while iterations < CREATION_ITERS:
        iterations += 1
        step = (p.render_create(query, passages, nuggets), p.parse_nuggets)
        if p.creation_fan_out:
            [got] = yield [step]
            if isinstance(got, Failed):
                return p.fail(f"nugget creation failed (iteration {iterations}): {got.reason}")
        else:
            got = yield step
        if not got:
            return p.fail(f"nugget creation returned no nuggets (iteration {iterations})")
        unchanged, nuggets = got == nuggets, got
        if len(nuggets) >= MAX_NUGGETS or (p.fixed_point and unchanged):
            break

    answers = yield [(p.render_importance(query, b), p.parser(p.parse_importance, b)) for b in batches(nuggets)]
    failure = p.failure("importance", answers, len(nuggets))
    if failure:
        return p.fail(failure)
    importances = [label for labels in answers for label in labels]
    keep = sort_and_keep(importances, KEEP)
    kept, kept_importances = [nuggets[i] for i in keep], [importances[i] for i in keep]

    answers = yield [(p.render_assign(query, answer, b), p.parser(p.parse_assignment, b)) for b in batches(kept)]
    failure = p.failure("assignment", answers, len(kept))
    if failure:
        return p.fail(failure)
    assignments = [label for labels in answers for label in labels]
    details = {
        "nuggets": [{"text": t, "importance": i, "assignment": a}
                    for t, i, a in zip(kept, kept_importances, assignments)],
        "created": len(nuggets),
        "iterations": iterations,
    }
    return JudgeResult(metrics=nugget_scores(kept_importances, assignments), details=details)
