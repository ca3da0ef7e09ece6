"""What a run's leaderboard ranks by, and why when it cannot rank by its first choice.

- **Candidates**, in order: ``HMean_idk``, ``HMean``, ``RB_agg_idk``, ``RB_agg`` (those the run
  computed; MT-RAG's reported metrics are conditioned on answerability, hence the ``_idk``
  versions first, and ``RB_agg`` is the headline of a run without judges), then the run's other
  metrics with a direction (``Length`` and counts are never ranked).
- **Headline**: the first candidate with a value for every model that has a scored record. A
  judged run can leave a headline undefined on every record of a model (RL_F is null when the
  judge extracted no statements, and HMean_idk with it); the ranking then falls back to the next
  candidate, and :func:`fallback` says which metric was passed over and why, from the records'
  ``judge_errors`` (summary.json's ``judge_undefined_reasons``, parse failures, engine errors).
  With no candidate defined for every model, the one defined for the most models ranks.
"""

from __future__ import annotations

from ragscale.metrics.registry import lookup

HEADLINES = ("HMean_idk", "HMean", "RB_agg_idk", "RB_agg")  # the first one the run has (and defines) ranks


def table_metrics(summary: dict) -> list[str]:
    """The run's metrics that have a per-record mean (not flags lists or per-passage vectors)."""
    return [m for m in summary["metrics"] if lookup(m) is None or lookup(m).in_tables]


def higher_is_better(metric: str | None) -> bool | None:
    """The metric's direction from the catalog (None: a count or length, never a headline)."""
    spec = lookup(metric) if metric else None
    return True if spec is None else spec.higher_is_better


def candidates(summary: dict) -> list[str]:
    """The metrics the leaderboard may rank by, in order of preference (module docstring)."""
    metrics = table_metrics(summary)
    first = [m for m in HEADLINES if m in metrics]
    rest = [m for m in metrics if m not in first and higher_is_better(m) is not None]
    return first + rest or metrics[:1]


def _scored(summary: dict) -> dict[str, dict]:
    """The model blocks with at least one scored (not errored) record."""
    models = summary.get("models") or {}
    return {m: d for m, d in models.items() if int(d.get("count") or 0) > int(d.get("errors") or 0)}


def _defined(d: dict, metric: str) -> bool:
    return int((d.get("n") or {}).get(metric) or 0) > 0


def headline(summary: dict) -> str | None:
    """The metric the leaderboard ranks by (module docstring); None when the run has no metric."""
    options = candidates(summary)
    if not options:
        return None
    scored = _scored(summary)
    return max(options, key=lambda m: (sum(_defined(d, m) for d in scored.values()), -options.index(m)))


def missing(summary: dict, metric: str) -> dict[str, dict]:
    """The blocks of the models with a scored record but no value of ``metric``."""
    return {model: d for model, d in _scored(summary).items() if not _defined(d, metric)}


def fallback(summary: dict) -> tuple[str, dict[str, str]] | None:
    """(the first candidate, per model why it has no value) when some model with a scored record has
    no value of it (the ranking then uses :func:`headline`); None when it ranks."""
    options = candidates(summary)
    if not options:
        return None
    why = {model: undefined_reason(d, options[0]) for model, d in missing(summary, options[0]).items()}
    return (options[0], why) if why else None


def undefined_reason(d: dict, metric: str) -> str:
    """Why ``metric`` has no value on any scored record of a model (its summary block ``d``), e.g.
    "RL_F undefined on 3/3 records: no statements could be extracted from the response": the metrics
    it is computed from that have no value either, down to the first one whose inputs have values,
    and that one's reasons in the records' judge errors."""
    scored = int(d.get("count") or 0) - int(d.get("errors") or 0)
    return "; ".join(f"{root} undefined on {scored}/{scored} records" + _causes(d, root) for root in _roots(d, metric))


def _roots(d: dict, metric: str) -> list[str]:
    """The metrics without a value in ``metric``'s requirement tree whose own requirements have values."""
    spec = lookup(metric)
    ns = d.get("n") or {}
    missing = [r for r in (spec.requires if spec is not None else ()) if r in ns and not _defined(d, r)]
    if not missing:
        return [metric]
    return list(dict.fromkeys(root for r in missing for root in _roots(d, r)))


def _causes(d: dict, metric: str) -> str:
    """": reason (n), ..." from the records' judge errors of the judge (or stage) that fills ``metric``."""
    from ragscale.judges import JUDGED

    who = JUDGED.get(metric, metric)
    reasons = dict((d.get("judge_undefined_reasons") or {}).get(who) or {})
    for key, what in (("judge_parse_failures", "the judge's output could not be parsed"),
                      ("judge_engine_errors", "the judge engine failed")):
        n = int((d.get(key) or {}).get(who) or 0)
        if n:
            reasons[what] = n
    if not reasons:
        return ""
    if len(reasons) == 1:
        return ": " + next(iter(reasons))
    return ": " + ", ".join(f"{r} ({n})" for r, n in sorted(reasons.items(), key=lambda rn: -rn[1]))
