"""The metric catalog: every metric declared once, next to the code that computes it.

A family module declares its metrics (``declare(MetricSpec(...))``, or the ``lexical_metric``
decorator for a per-record function of the answer, targets and passages); the catalog
imports the families on first use. Summaries, leaderboards, plots, the HTML report, exports
and agreement read these facts here and keep no table of their own. Adding a lexical metric
is one decorated function plus its name in a scenario's ``metrics.<family>`` list.
"""

from __future__ import annotations

import difflib
import re
import statistics
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from ragscale.errors import UserError, did_you_mean
from ragscale.registry import REGISTRY

SHAPES = ("target", "passage", "record", "vector")
UNIT = (0.0, 1.0)  # the bounds of a score, a rate or a flag
STAGES = ("lexical", "encoder", "nli", "judge", "derive")
NEEDS = ("question", "contexts", "reference")  # the record fields a metric may need besides the answer (ragscale.columns)
# MetricSpec.jury (how a panel's values combine: jury_verdict) -> the level of its agreement (jury_level)
JURY_LEVELS = {"majority": "nominal", "median": "ordinal", "mean": "interval"}


@dataclass(frozen=True)
class MetricSpec:
    """One metric's facts.

    ``shape``: a value per target, per passage, per record, or a per-passage ``vector`` that is
    not averaged (UMBRELA grades); ``scalar``: the value is a plain number (else MT-RAG's list
    shape ``[value, ...]``); ``dtype``: float, int, or bool (a flag); ``requires``: metrics it is
    computed from; ``needs``: the record fields it needs besides the answer (``question``, ``contexts``,
    ``reference``: ragscale.columns); ``aliases``: other names it is known by; ``higher_is_better``: None
    for counts, lengths and flags (shown, never ranked); ``bounds``: the (low, high) every value
    lies in by the metric's definition (None: not bounded on both sides, e.g. a rescaled
    BERTScore; a flag's is (0, 1)), which keeps intervals of means inside it; ``compute``: a
    lexical metric's function ``(prediction, targets, passages) -> value``; ``derive``: a derived
    (``derive`` stage) metric's function ``(Derivation) -> value`` of the record's metrics so far,
    run after every metric it ``requires`` (:func:`derived_order`); ``embedded``: a judged metric
    whose value comes from embedding its judge's outputs in the relevancy stage (ragas' answer
    relevancy: the generated questions' cosine similarity to the question; :func:`embedded`);
    ``jury``: how a judge panel's values of it combine (:func:`jury_verdict`): ``majority`` for a
    label or flag, ``median`` for a rating or grade, ``mean`` for a continuous share; by default a
    bool's majority, an int's median, a float's mean (docs/judges.md, Judge panels)."""

    name: str
    stage: str
    family: str
    shape: str = "record"
    scalar: bool = False
    dtype: str = "float"
    requires: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    higher_is_better: bool | None = True
    short: str = ""
    decimals: int = 4
    rate_title: str | None = None  # drawn as a "% of records" bar with this title
    reference: str = ""
    compute: Callable[..., Any] | None = None
    aliases: tuple[str, ...] = ()  # other names users know it by (ragas', open-rag-eval's), accepted wherever a name is
    bounds: tuple[float, float] | None = None
    reads_answer: bool = True  # False: computed without the answer (UMBRELA's passage grades, what they derive)
    derive: Callable[["Derivation"], Any] | None = None
    embedded: bool = False
    jury: str = ""  # "majority" | "median" | "mean"; "": the dtype's default

    def __post_init__(self) -> None:
        if self.stage not in STAGES or self.shape not in SHAPES:
            raise ValueError(f"metric {self.name}: stage {self.stage!r} / shape {self.shape!r} unknown")
        if (self.stage == "derive") != (self.derive is not None):
            raise ValueError(f"metric {self.name}: a derive-stage metric, and only one, has a derive function")
        if self.scalar and self.shape == "vector":
            raise ValueError(f"metric {self.name}: a per-passage vector is a list, never scalar")
        if not set(self.needs) <= set(NEEDS):
            raise ValueError(f"metric {self.name}: needs {self.needs!r}: a field is not one of {', '.join(NEEDS)}")
        if self.bounds is None and self.dtype == "bool":  # a flag is 0 or 1
            object.__setattr__(self, "bounds", UNIT)
        if self.bounds is not None and not self.bounds[0] < self.bounds[1]:
            raise ValueError(f"metric {self.name}: bounds {self.bounds!r} are not (low, high)")
        object.__setattr__(self, "jury", self.jury or {"bool": "majority", "int": "median"}.get(self.dtype, "mean"))
        if self.jury not in JURY_LEVELS or (self.jury == "mean" and self.dtype != "float"):
            raise ValueError(f"metric {self.name}: jury {self.jury!r} is not majority, median or mean (a mean of a float)")

    @property
    def label(self) -> str:
        """The short display name of tables."""
        return self.short or self.name

    @property
    def in_tables(self) -> bool:
        """Whether tables show a per-model mean of it (not for flags and per-passage vectors)."""
        return self.dtype != "bool" and self.shape != "vector"


_CATALOG: dict[str, MetricSpec] = {}
# The modules that declare the built-in metrics, registered as the registry's metric families (by module
# name; ragscale/registry.py) and imported at its first lookup, before any plugin. The judged metrics are
# declared by the judge modules (ragscale.judges), a plugin's by its module or the families it registers.
FAMILY_MODULES = ("ragscale.metrics.lexical", "ragscale.metrics.bertscore", "ragscale.metrics.aggregate",
                  "ragscale.metrics.conditioning", "ragscale.metrics.trec", "ragscale.metrics.hhem",
                  "ragscale.metrics.custom", "ragscale.metrics.taxonomy")
for _module in FAMILY_MODULES:
    REGISTRY.register("metric_family", _module.rsplit(".", 1)[-1], lazy=_module)
_loaded = False


def declare(*specs: MetricSpec) -> None:
    """Add metrics to the catalog (a family module calls this at import); a name declared
    twice with other facts is an error."""
    for spec in specs:
        old = _CATALOG.get(spec.name)
        if old is not None and old != spec:
            raise ValueError(f"metric {spec.name!r} is declared twice with different facts")
        _CATALOG[spec.name] = spec


def lexical_metric(name: str, *, family: str, shape: str = "record", **facts: Any) -> Callable:
    """Decorator: declare a lexical metric computed by ``fn(prediction, targets, passages)``.
    Per-target and per-passage metrics return one value per target / passage (a list)."""

    def register(fn: Callable) -> Callable:
        declare(MetricSpec(name, "lexical", family, shape=shape, compute=fn, **facts))
        return fn

    return register


def catalog() -> dict[str, MetricSpec]:
    """Every declared metric, by name: ragscale's families in their order, the judges' metrics,
    then the plugins' (their families imported), all loaded once."""
    global _loaded
    if not _loaded:
        _loaded = True
        try:
            for kind in ("metric_family", "judge"):  # the families declare their metrics, the judge modules theirs
                REGISTRY.entries(kind)  # ragscale's first, then the plugins' (ragscale/registry.py)
        except Exception:
            _loaded = False  # a plugin that fails to load fails every call, never a catalog without it
            raise
    return _CATALOG


_K_METRIC = re.compile(r"^(P|AP)@([1-9][0-9]*)$")


def lookup(name: str) -> MetricSpec | None:
    """The spec of a metric name, including the cut-off forms ``P@5``, ``AP@10`` of ``P@k``, ``AP@k``."""
    specs = catalog()
    if name in specs:
        return specs[name]
    m = _K_METRIC.match(name)
    if m:
        return replace(specs[f"{m.group(1)}@k"], name=name)
    return None


def label(name: str) -> str:
    """A metric's short display name (its name when it is not in the catalog, e.g. ``RB_llm@judge``)."""
    spec = lookup(name)
    return spec.label if spec is not None else name


def expand_k(names: Sequence[str], k_values: Sequence[int]) -> list[str]:
    """Replace the templates ``P@k`` and ``AP@k`` by one metric per cut-off K."""
    for k in k_values:
        if not isinstance(k, int) or k < 1:
            raise UserError(f"trec.k_values must be positive integers, got {k!r}")
    out: list[str] = []
    for n in names:
        out.extend([f"{n[:-2]}@{k}" for k in k_values] if n in ("P@k", "AP@k") else [n])
    return out


# The steps a scenario chooses from (MT-RAG's five, their harmonic mean, the TREC families,
# consistency, custom and taxonomy); each names the ``metrics.<step>`` list it enables.
STEPS = ("algorithmic", "idk", "ragas", "radbench", "idk_condition", "hmean", "retrieval", "nuggets", "citation",
         "hallucination", "no_answer", "consistency", "custom", "taxonomy")


def validate_steps(steps: Sequence[str]) -> list[str]:
    """Check step names; unknown ones fail with 'did you mean'."""
    for s in steps:
        if s not in STEPS:
            raise UserError(f"unknown step {s!r}{did_you_mean(s, STEPS)}; steps are {', '.join(STEPS)}")
    return list(steps)


def accepted_names() -> dict[str, str]:
    """Every name a user may give a metric, mapped to its catalog name: the name itself, its
    declared aliases (ragas', open-rag-eval's) and its short display label where no other
    metric claims it (``RougeL`` for ``RougeL_stemFalse``)."""
    specs = catalog()
    out: dict[str, str] = {}
    for spec in specs.values():
        for alias in spec.aliases:
            out.setdefault(alias, spec.name)
    labels: dict[str, list[str]] = {}
    for spec in specs.values():
        if spec.short and spec.short != spec.name:
            labels.setdefault(spec.short, []).append(spec.name)
    out.update({short: names[0] for short, names in labels.items() if len(names) == 1 and short not in specs})
    out.update({name: name for name in specs})
    return out


def canonical(name: str) -> str:
    """The catalog name of a metric a user named (a catalog name, an alias, a short label, or
    one of these in other letter case; ``P@5``-style cut-offs kept); unknown names raise a
    one-line UserError with the closest names."""
    if lookup(name) is not None:
        return name
    names = accepted_names()
    if name in names:
        return names[name]
    folded = {k.casefold(): v for k, v in names.items()}
    if name.casefold() in folded:
        return folded[name.casefold()]
    close = difflib.get_close_matches(name.casefold(), list(folded), n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(repr(m) for m in dict.fromkeys(folded[c] for c in close))}?)" if close else ""
    raise UserError(f"unknown metric {name!r}{hint}; `ragscale metrics` lists every metric with its aliases")


def select(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(steps, metrics) for metrics chosen by name (``metrics=[...]``): catalog names, each
    preceded by what it is computed from (``HMean`` brings RL_F, RB_llm, RB_agg and RB_agg's
    inputs), and the steps (families) these belong to, in STEPS order."""
    out: list[str] = []

    def add(name: str) -> None:
        if name in out:
            return
        for req in lookup(name).requires:
            add(req)
        out.append(name)

    for n in names:
        add(canonical(n))
    families = {lookup(m).family for m in out}
    return [s for s in STEPS if s in families], out


def resolve_metrics(names: Sequence[str], steps: Sequence[str]) -> list[str]:
    """The enabled metrics of the chosen steps, in the scenario's order, with requirements checked;
    names may be aliases (``faithfulness``), which become catalog names."""
    names = [canonical(n) for n in names]
    chosen = list(dict.fromkeys(n for n in names if lookup(n).family in set(steps)))
    for n in chosen:
        missing = [r for r in lookup(n).requires if r not in chosen]
        if missing:
            need = ", ".join(f"{r} (step {lookup(r).family})" for r in missing)
            raise UserError(f"metric {n!r} needs {need} to be enabled too")
    return chosen


def embedded(metrics: Sequence[str]) -> list[str]:
    """The run's metrics whose value comes from embeddings of their judge's outputs (``embedded``):
    what the relevancy stage computes, and what needs the encoder or an embeddings endpoint."""
    return [m for m in metrics if (spec := lookup(m)) is not None and spec.embedded]


def stages_for(metrics: Sequence[str]) -> set[str]:
    """The pipeline stages that the given metrics need."""
    return {lookup(m).stage for m in metrics}


def field_needs(metrics: Sequence[str]) -> dict[str, list[str]]:
    """The record fields (ragscale.columns: question, contexts, reference) the metrics need, each
    with the labels of the metrics that need it."""
    out: dict[str, list[str]] = {}
    for m in metrics:
        for field in lookup(m).needs:
            out.setdefault(field, []).append(label(m))
    return out


def needs_field(metrics: Sequence[str], field: str) -> bool:
    """Whether any of the metrics needs a record field (``reference``...; ``answer``: reads it)."""
    return any(lookup(m).reads_answer if field == "answer" else field in lookup(m).needs for m in metrics)


def record_scalar(name: str, value: Any) -> float | None:
    """The per-record number a metric contributes to means: a per-target metric its first
    target (as MT-RAG's RB_agg does), a per-passage metric its best passage (max), a flag
    0/1; a per-passage vector (UMBRELA grades) none: its mean metric summarises it."""
    if value is None:
        return None
    if isinstance(value, list):
        vals = [float(v) for v in value if v is not None]
        if not vals:
            return None
        spec = lookup(name)
        if spec is not None and spec.shape == "vector":
            return None
        return max(vals) if spec is not None and spec.shape == "passage" else vals[0]
    return float(value)


def jury_level(name: str) -> str:
    """Krippendorff's level of measurement of a panel's agreement on a metric (or ``<metric>@<judge>``),
    by its ``jury``: nominal for majority (flags), ordinal for median (ratings, grades), interval for
    mean (shares) and for a name the catalog does not know."""
    spec = lookup(name) or lookup(name.rpartition("@")[0])
    return JURY_LEVELS[spec.jury] if spec is not None else "interval"


def jury_verdict(name: str, values: Sequence[Any]) -> tuple[Any, int]:
    """(A judge panel's value of ``name`` from its members' values, how many of its values a split
    panel left null). Values are in the metric's stored form (a number, MT-RAG's ``[v]``, a vector;
    None: no value); lists combine element-wise (a vector per passage, so that P@k/AP@k/MRR read
    the panel's grades). The members' non-null values combine by the metric's ``jury``: ``median``
    (``statistics.median``; an integer metric's lower middle value, so that a grade or count stays
    an integer, never rounded up), ``mean`` (``statistics.fmean``) or ``majority`` (the most common
    value; a tie is null: no verdict, never a default side). No member with a value: null (a list
    metric None, a vector a null per passage). Lists of different lengths raise ValueError."""
    spec = lookup(name)
    if spec is None:
        raise ValueError(f"metric {name!r} is not in the catalog: no jury for it")
    split = 0

    def one(xs: Sequence[Any]) -> Any:
        nonlocal split
        xs = [x for x in xs if x is not None]
        if not xs:
            return None
        if spec.jury == "mean":
            return statistics.fmean(xs)
        if spec.jury == "median":
            return statistics.median(xs) if spec.dtype == "float" else statistics.median_low(xs)
        top = Counter(xs).most_common(2)
        if len(top) > 1 and top[0][1] == top[1][1]:
            split += 1
            return None
        return top[0][0]

    if spec.scalar:
        return one(values), split
    lists = [list(v) for v in values if v]  # None or []: the member has no value
    if not lists:
        return None, 0
    if len({len(v) for v in lists}) > 1:
        raise ValueError(f"the panel's {name} values differ in length ({', '.join(str(len(v)) for v in lists)})")
    out = [one([v[i] for v in lists]) for i in range(len(lists[0]))]
    if spec.shape != "vector" and all(x is None for x in out):
        return None, split
    return out, split


class Derivation:
    """What a derived metric's ``derive`` reads of one record: ``name`` (the metric asked, e.g.
    ``P@5`` for ``P@k``), ``metrics`` (the record's metrics so far, MT-RAG's list shapes; the
    derived ones earlier in :func:`derived_order` included), its ``answerability`` and its judges'
    ``details`` (judge -> JSON text, a judge's parsed when asked)."""

    def __init__(self, metrics: dict, answerability: str | None, details: Mapping[str, str] | None):
        self.metrics, self.answerability, self._details = metrics, answerability, details
        self.name = ""

    def first(self, name: str) -> Any:
        """The metric's first value (a per-target metric's first target), None when it has none."""
        return (self.metrics.get(name) or [None])[0]

    def details(self, judge: str) -> Any:
        """A judge's details of the record (None when it has none)."""
        import json

        text = (self._details or {}).get(judge)
        return None if text is None else json.loads(text)


def derived_order(metrics: Sequence[str]) -> list[str]:
    """The run's derive-stage metrics in an order where each comes after every derived metric it
    ``requires`` (else in the run's order)."""
    derived = [m for m in metrics if (spec := lookup(m)) is not None and spec.stage == "derive"]
    placed: list[str] = []

    def place(name: str, seen: tuple[str, ...] = ()) -> None:
        if name in placed or name not in derived:
            return
        if name in seen:
            raise ValueError(f"derived metrics require each other: {' -> '.join((*seen, name))}")
        for req in lookup(name).requires:
            place(req, (*seen, name))
        placed.append(name)

    for name in derived:
        place(name)
    return placed

