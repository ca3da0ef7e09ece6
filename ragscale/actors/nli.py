"""NLI actor: the HHEM-2.1-open hallucination score (open-rag-eval's ``hhem_score``).

``HHEMScorer`` loads HHEM-2.1-open from local files (``ragscale.metrics.hhem.locate_hhem``;
never the hub, never ``trust_remote_code``) as its modeling file builds it: a
``T5ForTokenClassification`` on the foundation's T5 config with the checkpoint's ``t5.*``
weights, and the foundation's tokenizer. A pair's score is what
``HHEMv2ForSequenceClassification.predict`` returns: softmax over the logits of the FIRST
token of ``prompt.format(text1=premise, text2=hypothesis)``, probability of class 1
(consistent). ``NLIActor`` writes it as the scalar metric ``hhem`` of each record, with
premise and hypothesis built as open-rag-eval's ``HHEMBackend`` does
(``ragscale.metrics.hhem.premise_hypothesis``).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from ragscale.metrics.hhem import (
    CONSISTENT_LABEL,
    DEFAULT_MAX_CHARS,
    DEFAULT_MODEL,
    METRIC,
    format_prompt,
    locate_hhem,
    premise_hypothesis,
)
from ragscale.row import add_judge_errors, judge_error_entries
from ragscale.stage_kinds import Stage, stage_kind


def plan_nli(hallucination: Mapping[str, Any], cluster: Mapping[str, Any]) -> tuple[dict, str | None]:
    """(NLIActor keyword arguments, None) when the HHEM weights are on this machine, else
    ({}, why hhem will be null): decided on the driver before Ray starts."""
    from ragscale.actors._torch import pool_device
    from ragscale.metrics.hhem import hhem_unavailable

    h, pool = hallucination, cluster.get("nli") or {}
    reason = hhem_unavailable(h["model"], h["tokenizer"])
    if reason:
        return {}, f"HHEM unavailable: {reason}"
    return {"hhem": {
        "model": h["model"], "tokenizer": h["tokenizer"], "max_length": h["max_length"], "max_chars": h["max_chars"],
        "torch_threads": pool.get("torch_threads") or (os.cpu_count() if not cluster.get("address") else None),
        "device": pool_device(pool),
    }}, None


class HHEMScorer:
    """HHEM-2.1-open on CPU or GPU: P(consistent) of (premise, hypothesis) pairs.

    ``model``/``tokenizer``: see ``locate_hhem``. Pairs are scored in batches of at most
    ``batch_size`` pairs and ``batch_tokens`` padded tokens, shortest first, padded on the
    right (as the T5 tokenizer with ``padding=True`` does). ``max_length=None`` (the
    default) feeds whole inputs as HHEM's ``predict`` does (T5's relative positions have
    no length limit); an int keeps the first ``max_length - 1`` tokens and the final ``</s>``.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        tokenizer: str | None = None,
        batch_size: int = 8,
        batch_tokens: int = 16384,
        max_length: int | None = None,
        torch_threads: int | None = None,
        device: str | None = None,
    ):
        from ragscale.actors._torch import start_torch

        torch, self.device = start_torch(torch_threads, device)
        from transformers import AutoTokenizer, T5Config, T5ForTokenClassification

        self.torch = torch
        self.paths = locate_hhem(model, tokenizer)
        self.prompt = self.paths.prompt
        self.tokenizer = AutoTokenizer.from_pretrained(self.paths.tokenizer_dir)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

        state = _load_state_dict(self.paths.weights, torch)
        n_labels = int(state["classifier.weight"].shape[0]) if "classifier.weight" in state else 2
        cfg = {k: v for k, v in self.paths.t5_config.items() if k not in ("id2label", "label2id", "num_labels")}
        config = T5Config.from_dict(cfg)
        config.num_labels = n_labels
        with torch.device("meta"):  # no random init of ~250M parameters; every tensor comes from the checkpoint
            net = T5ForTokenClassification(config)
        try:
            net.load_state_dict(state, strict=True, assign=True)
        except RuntimeError as e:
            raise ValueError(
                f"HHEM checkpoint {self.paths.weights} does not fit T5ForTokenClassification with the "
                f"T5 config from {self.paths.t5_config_source}: {e}"
            ) from None
        self.model = net.to(self.device).eval()
        self.batch_size = max(1, int(batch_size))
        self.batch_tokens = int(batch_tokens)
        self.max_length = int(max_length) if max_length else None
        self.stats = {"pairs": 0, "tokens": 0, "truncated": 0}

    def _ids(self, prompts: Sequence[str]) -> list[list[int]]:
        ids = self.tokenizer(list(prompts), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        out = []
        for seq in ids:
            seq = list(seq)
            if self.max_length and len(seq) > self.max_length:
                seq = seq[: self.max_length - 1] + [seq[-1]]
                self.stats["truncated"] += 1
            out.append(seq)
        return out

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """P(consistent) for each (premise, hypothesis) pair, in order (identical pairs once)."""
        torch = self.torch
        prompts = [format_prompt(p, h, self.prompt) for p, h in pairs]
        unique = list(dict.fromkeys(prompts))
        if not unique:
            return []
        ids = self._ids(unique)
        order = sorted(range(len(unique)), key=lambda i: len(ids[i]))
        probs: dict[str, float] = {}
        start = 0
        while start < len(order):
            end = start + 1
            while (
                end < len(order)
                and end - start < self.batch_size
                and len(ids[order[end]]) * (end - start + 1) <= self.batch_tokens
            ):
                end += 1
            group = order[start:end]
            width = len(ids[group[-1]])
            input_ids = torch.full((len(group), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(group), width), dtype=torch.long)
            for row, i in enumerate(group):
                input_ids[row, : len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
                mask[row, : len(ids[i])] = 1
            with torch.inference_mode():
                logits = self.model(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device)).logits
                p = torch.softmax(logits[:, 0, :].float(), dim=-1)[:, CONSISTENT_LABEL].cpu().tolist()
            for row, i in enumerate(group):
                probs[unique[i]] = float(p[row])
                self.stats["tokens"] += len(ids[i])
            self.stats["pairs"] += len(group)
            start = end
        return [probs[q] for q in prompts]


def _load_state_dict(weights: str, torch: Any) -> dict:
    """The checkpoint's tensors with the ``t5.`` prefix of ``HHEMv2ForSequenceClassification``
    removed; the tied ``encoder.embed_tokens`` / ``shared`` embedding filled in from the other."""
    if weights.endswith(".safetensors"):
        from safetensors.torch import load_file

        raw = load_file(weights)
    else:
        raw = torch.load(weights, map_location="cpu", weights_only=True)
    stray = [k for k in raw if not k.startswith("t5.")]
    if stray:
        raise ValueError(f"HHEM checkpoint {weights} has keys outside 't5.': {stray[:3]}")
    state = {k[3:]: v for k, v in raw.items()}
    shared, embed = "transformer.shared.weight", "transformer.encoder.embed_tokens.weight"
    if shared in state and embed not in state:
        state[embed] = state[shared]
    elif embed in state and shared not in state:
        state[shared] = state[embed]
    return state


class NLIActor:
    """Ray Data actor: adds the scalar metric ``hhem`` (P(consistent), 0..1) to a batch of records.

    ``hhem``: keyword arguments of ``HHEMScorer`` (``model``, ``tokenizer``, ``batch_size``,
    ``torch_threads``, ...), optionally ``max_chars`` (premise cut, default 8192). Rows
    with an ``error`` pass through; a record with no passages or no answer text gets
    ``hhem: null`` and a ``judge_errors`` entry ``{"judge": "hhem", "reason": ..., "undefined": true}``.
    """

    def __init__(self, hhem: Mapping[str, Any], max_chars: int = DEFAULT_MAX_CHARS):
        kwargs = dict(hhem)
        self.max_chars = int(kwargs.pop("max_chars", max_chars))
        self.scorer = HHEMScorer(**kwargs)

    def _score(self, rows: list[dict], counts: dict[str, int]) -> None:
        todo: list[tuple[dict, str, str]] = []
        undefined: list[tuple[dict, str]] = []
        truncated = 0
        for row in rows:
            passages = [p for p in (row["passages"] or []) if p is not None]
            premise, hypothesis = premise_hypothesis(passages, row["prediction"] or "", self.max_chars)
            if not passages or not premise.strip():
                undefined.append((row, "no passages: HHEM needs a premise"))
            elif not hypothesis.strip():
                undefined.append((row, "empty answer: no text outside citation markers"))
            else:
                truncated += int(len(" ".join(passages)) > self.max_chars)
                todo.append((row, premise, hypothesis))
        scores = self.scorer.score([(p, h) for _, p, h in todo]) if todo else []
        for (row, _, _), s in zip(todo, scores):
            _write(row, s, None)
        for row, reason in undefined:
            _write(row, None, reason)
        counts["nli_pairs"] += len(todo)
        counts["nli_undefined"] += len(undefined)
        counts["nli_premise_truncated"] += truncated

    def process(self, rows: list[dict]) -> dict[str, float]:
        """Add ``hhem`` to ``rows`` in place; returns the pair, token and truncation counters."""
        counts = {"nli_pairs": 0, "nli_undefined": 0, "nli_premise_truncated": 0}
        before = dict(self.scorer.stats)
        self._score(rows, counts)
        after = self.scorer.stats
        return {
            **counts,
            "nli_model_pairs": after["pairs"] - before["pairs"],  # distinct prompts run through the model
            "nli_tokens": after["tokens"] - before["tokens"],
            "nli_token_truncated": after["truncated"] - before["truncated"],
        }


@stage_kind("nli", order=20)
def nli_stages(plan: Any) -> list[Stage]:
    """The HHEM pool when the run has a hallucination step and the weights are on this machine
    (without them, ragscale.pipeline.cpu_stages' ``hhem_unavailable`` stage takes its place)."""
    if "nli" not in plan.stages or not plan.nli_kwargs:
        return []
    return [Stage("nli", NLIActor, plan.nli_kwargs, produces=frozenset({"hhem"}), pool=plan.cluster.get("nli", {}),
                  batch_size=16, restart_counter="nli_actor_restarts")]


def _write(row: dict, score: float | None, reason: str | None) -> None:
    """Set ``metrics["hhem"]``; for an undefined score, (re)place the row's hhem judge_errors entry."""
    row["metrics"][METRIC] = score
    if row.get("judge_errors") or reason is not None:
        kept = [e for e in judge_error_entries(row) if not (isinstance(e, dict) and e.get("judge") == METRIC)]
        row["judge_errors"] = []
        add_judge_errors(row, [*kept, *([{"judge": METRIC, "reason": reason, "undefined": True}] if reason is not None else [])])
