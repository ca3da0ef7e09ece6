"""The HTML report's one streaming pass over records.jsonl (see :mod:`ragscale.report.html`), with
bounded memory: per metric and model a running mean/variance, min/max, exact 20-bin histogram counts
over [0, 1] and a uniform reservoir sample (fixed seed) for quantiles; per score a heap of the N
records furthest from its best value (``html_records``); the judges' issues and the records' errors.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from typing import Any, Sequence

from ragscale.metrics.registry import lookup, record_scalar
from ragscale.record import judge_error_kind
from ragscale.report.html_records import Lowest, record_info
from ragscale.report.plots import is_flag
from ragscale.report.summary import Unreadable
from ragscale.report.text import trunc

RESERVOIR = 2000
BINS = 20


# ---------------------------------------------------------------- streaming accumulators

class Dist:
    """Running statistics of one metric for one model (bounded memory)."""

    def __init__(self, seed: int) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.lo = math.inf
        self.hi = -math.inf
        self.hist = [0] * BINS
        self.unit = True  # every value in [0, 1]: ``hist`` is exact
        self.sample: list[float] = []
        self.rng = random.Random(seed)

    def add(self, v: float) -> None:
        self.n += 1
        d = v - self.mean
        self.mean += d / self.n
        self.m2 += d * (v - self.mean)
        self.lo = min(self.lo, v)
        self.hi = max(self.hi, v)
        if 0.0 <= v <= 1.0:
            self.hist[min(BINS - 1, int(v * BINS))] += 1
        else:
            self.unit = False
        if len(self.sample) < RESERVOIR:
            self.sample.append(v)
        else:
            j = self.rng.randrange(self.n)
            if j < RESERVOIR:
                self.sample[j] = v

    @property
    def sd(self) -> float:
        return math.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else math.nan

    @property
    def exact(self) -> bool:
        return self.n <= RESERVOIR

    def quantile(self, q: float) -> float | None:
        if not self.sample:
            return None
        s = sorted(self.sample)
        pos = q * (len(s) - 1)
        i = int(math.floor(pos))
        j = min(i + 1, len(s) - 1)
        return s[i] + (s[j] - s[i]) * (pos - i)


class _JudgeIssues:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.examples: list[dict] = []

    def add(self, err: dict, model: str, key: str) -> None:
        kind = {"undefined": "undefined", "engine": "engine errors", "parse": "parse failures"}[judge_error_kind(err)]
        self.counts[kind] += 1
        reason = trunc(str(err.get("reason", "")), 200)
        if reason in self.reasons or len(self.reasons) < 200:
            self.reasons[reason] += 1
        if len(self.examples) < 3 and err.get("raw") is not None:
            self.examples.append({"kind": kind, "model": model, "record": key, "reason": reason,
                                  "raw": trunc(str(err.get("raw")), 1500)})


def _descriptive(metric: str) -> bool:
    """A count or length (the catalog gives it no direction): no "lowest-scoring" list."""
    spec = lookup(metric)
    return spec is not None and spec.higher_is_better is None


class Scan:
    """One streaming pass over records.jsonl: per metric and model a :class:`Dist`, per score its
    lowest records, the judges' issues and the records' errors."""

    def __init__(self, metrics: Sequence[str] | None, worst_n: int) -> None:
        self.fixed = metrics is not None
        self.metrics: list[str] = list(metrics or [])
        self.metric_set = set(self.metrics)
        self.worst_n = worst_n
        self.models: Counter[str] = Counter()
        self.model_errors: Counter[str] = Counter()
        self.dists: dict[str, dict[str, Dist]] = defaultdict(dict)
        self.flags: set[str] = set()
        self.worst: dict[str, Lowest] = {}
        self.judges: dict[str, _JudgeIssues] = defaultdict(_JudgeIssues)
        self.detail_judges: set[str] = set()
        self.error_stages: Counter[str] = Counter()
        self.judge_failed = 0  # records without an error whose judge engine failed: failed records (summary.py)
        self.error_examples: list[dict] = []
        self.warnings = 0
        self.seq = 0
        self.unreadable = Unreadable()  # lines that are not a JSON object: whose model they are (summary's rule)
        self.settled = False

    def run(self, path: str, columns: dict[str, str] | None = None) -> None:
        from ragscale.io.output import iter_records

        try:
            for rec in iter_records(path, columns):
                if isinstance(rec, dict):
                    self.add(rec)
        except (OSError, ValueError) as exc:
            from ragscale.errors import UserError

            raise UserError(f"cannot read {path}: {exc}") from None

    def add(self, rec: dict) -> None:
        self.seq += 1
        model = str(rec.get("model_id"))
        held = self.unreadable.held(rec, model)  # an unreadable line: its model is settled at the end
        if not held:
            self.models[model] += 1
        rs = rec.get("ragscale") if isinstance(rec.get("ragscale"), dict) else {}
        key = str(rs.get("record_key") or f"line {self.seq}")
        self.warnings += len(rs.get("warnings") or [])
        engine_failed = False
        for err in rs.get("judge_errors") or []:
            if isinstance(err, dict):
                judge = str(err.get("judge")) + (f"@{err['tag']}" if err.get("tag") else "")
                self.judges[judge].add(err, model, key)
                engine_failed |= judge_error_kind(err) == "engine"
        if isinstance(rs.get("details"), dict):
            self.detail_judges.update(str(k) for k in rs["details"])
        err = rec.get("error")
        if err is not None:
            self.model_errors[model] += not held
            stage = str(err.get("stage")) if isinstance(err, dict) else "?"
            self.error_stages[stage] += 1
            if len(self.error_examples) < 5:
                msg = err.get("message") if isinstance(err, dict) else err
                self.error_examples.append({"record": key, "model": model, "stage": stage,
                                            "message": trunc(str(msg), 600)})
            return
        self.judge_failed += engine_failed
        metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
        info: list[dict] = []  # the record's card, built once for every list it is among the lowest of
        for name, value in metrics.items():
            if name not in self.metric_set:
                if self.fixed:
                    continue
                self.metrics.append(name)
                self.metric_set.add(name)
            if is_flag(value):
                self.flags.add(name)
            try:
                v = record_scalar(name, value)
            except (TypeError, ValueError):
                continue
            if v is None or not math.isfinite(v):
                continue
            dist = self.dists[name].get(model)
            if dist is None:
                dist = self.dists[name][model] = Dist(seed=len(self.dists) * 7919 + len(self.dists[name]))
            dist.add(v)
            if name in self.flags or _descriptive(name):
                continue
            worst = self.worst.get(name)
            if worst is None:
                worst = self.worst[name] = Lowest(name, self.worst_n)
            if worst.wants(v):
                info = info or [record_info(rec, self.seq, model, key, self._values(metrics))]
                worst.push(v, self.seq, info[0])

    def settle(self) -> dict[str, int]:
        """After the pass: count each unreadable line under the model it belongs to (summary's rule,
        ragscale.report.summary.Unreadable); returns the lines of no model (input errors), whose
        examples show no model."""
        orphans = self.unreadable.orphans()
        if self.settled:
            return orphans
        self.settled = True
        for model, n in self.unreadable.owned().items():
            self.models[model] += n
            self.model_errors[model] += n
        for e in self.error_examples:
            if e["model"] in orphans:
                e["model"] = "— (no model: not a JSON object)"
        return orphans

    @staticmethod
    def _values(metrics: dict) -> dict[str, Any]:
        """One number (or flag) per metric of a record, as its card lists them."""
        values: dict[str, Any] = {}
        for name, value in metrics.items():
            if is_flag(value):
                values[name] = value if isinstance(value, bool) else next(v for v in value if v is not None)
                continue
            try:
                values[name] = record_scalar(name, value)
            except (TypeError, ValueError):
                values[name] = None
        return values
