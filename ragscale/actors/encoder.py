"""Encoder actor: contextual token embeddings for BERTScore-family metrics.

Loads a Hugging Face encoder exactly as bert-score 0.3.13 does (``AutoModel``, layers
above ``num_layers`` dropped, ``tokenizer.encode(text.strip(), add_special_tokens=True,
truncation=True, max_length=...)``) and embeds each unique text once, sorted by length
and batched under a token budget. An LRU cache (bounded in MB) keeps embeddings of texts
that recur across batches (a task's reference and passages in a model sweep), and an
optional on-disk store (ragscale.actors.embedding_store) keeps them across runs.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from typing import Any, Mapping, Sequence

import numpy as np

from ragscale.metrics.bertscore import BertScoreRequest, TokenEmbedding, score_requests
from ragscale.metrics.registry import embedded
from ragscale.stage_kinds import Stage, of_stage, stage_kind

RELEVANCY_DETAILS = "details:ragas_answer_relevancy"  # what ragas' answer-relevancy judge leaves for the relevancy stage


def plan_encoder(conf: Mapping[str, Any], cluster: Mapping[str, Any]) -> tuple[dict, dict | None]:
    """The Encoder's keyword arguments and the BERTScore rescale baseline (None: unrescaled),
    checked on the driver before Ray starts (the model's folder resolved, never downloaded)."""
    from ragscale.actors._torch import pool_device
    from ragscale.errors import UserError
    from ragscale.weights import resolve_model_path

    pool = cluster.get("encoder") or {}
    kwargs = {
        "model_path": resolve_model_path(conf["model"]),
        "num_layers": conf["num_layers"],
        "max_length": conf["max_length"],
        "batch_tokens": conf["batch_tokens"],
        "cache_mb": conf["cache_mb"],
        "torch_threads": pool.get("torch_threads") or (os.cpu_count() if not cluster.get("address") else None),
        "device": pool_device(pool),
        "dtype": conf["dtype"],
        "disk_cache_path": os.path.abspath(conf["disk_cache_path"]) if conf["disk_cache_path"] else None,
        "disk_cache_mb": conf["disk_cache_mb"],
    }
    if conf["dtype"] not in Encoder.DTYPES:
        raise UserError(f"encoder.dtype={conf['dtype']!r}: one of {', '.join(Encoder.DTYPES)}")
    if conf["dtype"] == "fp16" and not pool.get("num_gpus"):
        raise UserError("encoder.dtype=fp16 needs a GPU (cluster.encoder.num_gpus > 0); on a CPU use bf16 or fp32")
    if not isinstance(conf["disk_cache_mb"], int) or conf["disk_cache_mb"] < 1:
        raise UserError(f"encoder.disk_cache_mb must be a positive integer, got {conf['disk_cache_mb']!r}")
    baseline = None
    if conf["rescale_with_baseline"]:
        baseline = conf["baseline"]
        if not baseline or not {"P", "R"} <= set(baseline):
            raise UserError(f"encoder {conf['name']}: rescale_with_baseline needs baseline P and R values")
    return kwargs, baseline


class Encoder:
    """Token-embedding model (CPU or GPU), bert-score compatible. ``dtype`` is the forward
    pass's precision (embeddings are returned and stored in fp32); ``disk_cache_path`` (None:
    off) an :class:`~ragscale.actors.embedding_store.EmbeddingStore` of ``disk_cache_mb``."""

    DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # encoder.dtype -> torch dtype

    def __init__(
        self,
        model_path: str,
        num_layers: int,
        max_length: int | None = None,
        batch_tokens: int = 4096,
        cache_mb: int = 256,
        torch_threads: int | None = None,
        device: str | None = None,
        dtype: str = "fp32",
        disk_cache_path: str | None = None,
        disk_cache_mb: int = 2048,
    ):
        from ragscale.actors._torch import start_torch

        torch, self.device = start_torch(torch_threads, device)
        from transformers import AutoModel, AutoTokenizer

        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        model = AutoModel.from_pretrained(model_path)
        model.eval()
        layers = model.encoder.layer
        if not 0 < num_layers <= len(layers):
            raise ValueError(f"num_layers={num_layers} but the model has {len(layers)} layers")
        model.encoder.layer = torch.nn.ModuleList(list(layers[:num_layers]))
        if dtype not in self.DTYPES:
            raise ValueError(f"dtype={dtype!r}: one of {', '.join(self.DTYPES)}")
        self.dtype = dtype
        self.model = model.to(self.device, dtype=getattr(torch, self.DTYPES[dtype]))
        limit = min(self.tokenizer.model_max_length, getattr(model.config, "max_position_embeddings", 10**9))
        self.max_length = int(max_length or limit)
        self.special = {self.tokenizer.cls_token_id, self.tokenizer.sep_token_id}
        st_config = os.path.join(model_path, "sentence_bert_config.json")
        self.sentence_max_length = self.max_length
        if os.path.isfile(st_config):
            with open(st_config) as fh:
                self.sentence_max_length = min(self.max_length, int(json.load(fh).get("max_seq_length") or self.max_length))
        self.batch_tokens = int(batch_tokens)
        self.cache: OrderedDict[str, TokenEmbedding] = OrderedDict()
        self.cache_bytes = 0
        self.cache_limit = int(cache_mb) * 2**20
        self.model_path, self.num_layers = model_path, int(num_layers)
        self.disk_cache_path, self.disk_cache_mb = disk_cache_path, int(disk_cache_mb)
        self._store: Any = None  # the EmbeddingStore, opened on the first embed (on the actor's thread)
        self._key_prefix = b""
        self.stats = {"texts_requested": 0, "texts_encoded": 0, "tokens_encoded": 0, "cache_hits": 0, "truncated": 0,
                      "disk_hits": 0, "disk_bytes_read": 0, "disk_bytes_written": 0, "disk_evicted": 0,
                      "disk_errors": 0}

    def _disk(self) -> Any:
        """The on-disk store (None when off or disabled), opened on first use."""
        if self.disk_cache_path and self._store is None:
            from ragscale.actors.embedding_store import EmbeddingStore, encoder_identity

            device = self.device  # numerics differ between devices: a GPU's model is part of the key
            if self.torch.device(device).type == "cuda":
                device = f"cuda:{self.torch.cuda.get_device_name(device)}"
            self._key_prefix = encoder_identity(self.model_path, self.num_layers, self.max_length, self.dtype, device)
            self._store = EmbeddingStore(self.disk_cache_path, self.disk_cache_mb)
            self.stats["disk_errors"] += self._store.errors  # a file rebuilt or not opened
        return self._store if self._store is not None and self._store.enabled else None

    def _token_ids(self, texts: Sequence[str]) -> list[tuple[list[int], bool]]:
        enc = self.tokenizer(list(texts), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        out = []
        for ids in enc:
            if len(ids) > self.max_length:  # same result as the tokenizer's truncation=True
                out.append((ids[: self.max_length - 1] + [ids[-1]], True))
            else:
                out.append((ids, False))
        return out

    def embed(self, texts: Sequence[str]) -> dict[str, TokenEmbedding]:
        """Embeddings for each text (already stripped): from the memory cache, else the disk
        store (one lookup for all), else the model (the new ones stored in one transaction)."""
        result: dict[str, TokenEmbedding] = {}
        todo: list[str] = []
        self.stats["texts_requested"] += len(texts)
        for t in texts:
            hit = self.cache.get(t)
            if hit is not None:
                self.cache.move_to_end(t)
                result[t] = hit
                self.stats["cache_hits"] += 1
            else:
                todo.append(t)
        store = self._disk() if todo else None
        if store is None:
            self._encode(todo, result)
            return result
        from ragscale.actors.embedding_store import text_key

        keys = {t: text_key(self._key_prefix, t) for t in todo}
        errors = store.errors
        found, nbytes = store.get_many(list(keys.values()))
        self.stats["disk_bytes_read"] += nbytes
        rest = []
        for t in todo:
            emb = found.get(keys[t])
            if emb is None:
                rest.append(t)
            else:
                result[t] = emb
                self._remember(t, emb)
                self.stats["disk_hits"] += 1
        self._encode(rest, result)
        written, evicted = store.put_many([(keys[t], result[t]) for t in rest])
        self.stats["disk_bytes_written"] += written
        self.stats["disk_evicted"] += evicted
        self.stats["disk_errors"] += store.errors - errors
        return result

    def _encode(self, todo: Sequence[str], result: dict[str, TokenEmbedding]) -> None:
        """Encode ``todo`` with the model into ``result`` and the memory cache."""
        torch = self.torch
        if not todo:
            return
        ids = self._token_ids(todo)
        order = sorted(range(len(todo)), key=lambda i: len(ids[i][0]))
        start = 0
        while start < len(order):
            longest = len(ids[order[start]][0])
            end = start + 1
            while end < len(order) and len(ids[order[end]][0]) * (end - start + 1) <= max(self.batch_tokens, longest):
                end += 1
            group = order[start:end]
            width = len(ids[group[-1]][0])
            input_ids = torch.zeros((len(group), width), dtype=torch.long)
            mask = torch.zeros((len(group), width), dtype=torch.long)
            pad = self.tokenizer.pad_token_id or 0
            input_ids.fill_(pad)
            for row, i in enumerate(group):
                seq = ids[i][0]
                input_ids[row, : len(seq)] = torch.tensor(seq)
                mask[row, : len(seq)] = 1
            with torch.inference_mode():
                hidden = self.model(input_ids.to(self.device), attention_mask=mask.to(self.device))[0].float()
                hidden = hidden / hidden.norm(dim=-1, keepdim=True)
                hidden = hidden.cpu().numpy()
            for row, i in enumerate(group):
                seq, truncated = ids[i]
                weights = np.array([0.0 if tok in self.special else 1.0 for tok in seq], dtype=np.float32)
                emb = TokenEmbedding(np.ascontiguousarray(hidden[row, : len(seq)]), weights, truncated)
                result[todo[i]] = emb
                self._remember(todo[i], emb)
                self.stats["tokens_encoded"] += len(seq)
                self.stats["truncated"] += int(truncated)
            self.stats["texts_encoded"] += len(group)
            start = end

    def sentence_embed(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Sentence embeddings ``[len(texts), dim]``: the mean of the last kept layer's token
        states over the attention mask, L2-normalised, i.e. sentence-transformers' mean pooling
        + Normalize (the packaged all-MiniLM-L6-v2's own pipeline). Inputs are truncated to the
        model's sentence-transformers ``max_seq_length`` (256 for MiniLM) when it declares one,
        else to ``max_length``."""
        torch = self.torch
        limit = self.sentence_max_length
        out = []
        for i in range(0, len(texts), batch_size):
            enc = self.tokenizer(list(texts[i:i + batch_size]), padding=True, truncation=True,
                                 max_length=limit, return_tensors="pt")
            mask = enc["attention_mask"].to(self.device)
            with torch.inference_mode():
                hidden = self.model(input_ids=enc["input_ids"].to(self.device), attention_mask=mask)[0].float()
                pooled = (hidden * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
            out.append(pooled.float().cpu().numpy())
            self.stats["texts_encoded"] += len(texts[i:i + batch_size])
        return np.concatenate(out) if out else np.zeros((0, 0), dtype=np.float32)

    def _remember(self, text: str, emb: TokenEmbedding) -> None:
        size = emb.vectors.nbytes + emb.weights.nbytes + len(text)
        if size > self.cache_limit:
            return
        self.cache[text] = emb
        self.cache_bytes += size
        while self.cache_bytes > self.cache_limit:
            old_text, old = self.cache.popitem(last=False)
            self.cache_bytes -= old.vectors.nbytes + old.weights.nbytes + len(old_text)


class EncoderActor:
    """Ray Data actor: adds BertscoreP, BertscoreR and BertKPrec to a batch of records."""

    def __init__(self, encoder: Mapping[str, Any], metrics: Sequence[str], baseline: Mapping[str, float] | None):
        self.encoder = Encoder(**encoder)
        self.want_targets = "BertscoreP" in metrics or "BertscoreR" in metrics
        self.want_passages = "BertKPrec" in metrics
        self.metrics = set(metrics)
        self.baseline = dict(baseline) if baseline else None

    def _score(self, rows: list[dict]) -> None:
        reqs = [BertScoreRequest(r["prediction"], r["targets"], r["passages"]) for r in rows]
        results = score_requests(
            reqs,
            self.encoder.embed,
            want_targets=self.want_targets,
            want_passages=self.want_passages,
            baseline=self.baseline,
        )
        for row, res in zip(rows, results):
            row["metrics"].update({k: v for k, v in res.items() if k in self.metrics})
            if res["truncated"]:
                row["warnings"] = list(row["warnings"] or []) + [
                    f"encoder: {', '.join(res['truncated'])} truncated to {self.encoder.max_length} tokens"
                ]

    def process(self, rows: list[dict]) -> dict[str, float]:
        """Score ``rows`` in place; returns the encoder's counters for them (texts, tokens, cache)."""
        before = dict(self.encoder.stats)
        self._score(rows)
        return {f"encoder_{k}": v - before[k] for k, v in self.encoder.stats.items()}


@stage_kind("encoder", order=10)
def encoder_stages(plan: Any) -> list[Stage]:
    """The encoder pool (BERTScore-family metrics) when the run has an encoder step."""
    if "encoder" not in plan.stages:
        return []
    metrics = list(plan.metrics)
    return [Stage("encoder", EncoderActor, {"encoder": plan.encoder_kwargs, "metrics": metrics, "baseline": plan.baseline},
                  produces=of_stage(metrics, "encoder"), pool=plan.cluster.get("encoder", {}), batch_size=256,
                  restart_counter="encoder_actor_restarts")]


class RelevancyActor:
    """Ray Data actor, after the judges: ragas answer relevancy's cosine between the user
    question and the judge's generated questions (``details.ragas_answer_relevancy``), with
    sentence embeddings of the run's encoder (``encoder``: Encoder arguments) or of an
    OpenAI-compatible endpoint (``endpoint``: EmbeddingsClient arguments,
    ragscale.actors.embeddings_http; then no encoder model is loaded). A record whose texts the
    endpoint could not embed gets ``answer_relevancy: null`` and a ``judge_errors`` entry
    ``{"judge": "ragas_answer_relevancy", "stage": "relevancy", "reason": "engine error: ..."}``."""

    def __init__(self, encoder: Mapping[str, Any] | None = None, endpoint: Mapping[str, Any] | None = None):
        if endpoint:
            from ragscale.actors.embeddings_http import EmbeddingsClient

            self.encoder, self.client = None, EmbeddingsClient(**endpoint)
        elif encoder:
            self.encoder, self.client = Encoder(**encoder), None
        else:
            raise ValueError("RelevancyActor needs the encoder's or the endpoint's arguments")

    def _embed(self, texts: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
        if self.client is not None:
            return self.client.embed(texts)
        return (dict(zip(texts, self.encoder.sentence_embed(texts))) if texts else {}), {}

    def _score(self, rows: list[dict]) -> int:
        from ragscale.judges.ragas_metrics import ANSWER_RELEVANCY
        from ragscale.metrics.relevancy import answer_relevancy_score
        from ragscale.record import ENGINE_ERROR, add_judge_errors
        from ragscale.row import detail

        todo = []
        for r in rows:
            d = detail(r["details"], ANSWER_RELEVANCY)
            if d and d.get("generated"):
                todo.append((r, d))
        texts = sorted({t for _, d in todo for t in (d["question"], *d["generated"])})
        vecs, errors = self._embed(texts)
        for r, d in todo:
            needed = (d["question"], *d["generated"])
            failed = next((errors.get(t, "no embedding returned") for t in needed if t not in vecs), None)
            score, entry = None, {"judge": ANSWER_RELEVANCY, "stage": "relevancy"}
            if failed is not None:
                add_judge_errors(r, [{**entry, "reason": f"{ENGINE_ERROR}: {failed}"}])
            else:
                score = answer_relevancy_score(vecs[d["question"]], [vecs[q] for q in d["generated"]],
                                               d["generated"], d["noncommittal"])
                if score is None and any(q != "" for q in d["generated"]):
                    why = "an embedding of the question or a generated question has zero length"
                    add_judge_errors(r, [{**entry, "undefined": True, "reason": why}])
            r["metrics"]["answer_relevancy"] = score
        return len(texts)

    def process(self, rows: list[dict]) -> dict[str, float] | None:
        """Add ``answer_relevancy`` to ``rows`` in place; with an endpoint, returns its counters
        (``encoder_relevancy_*``: texts, requests, retries, 429s, failed requests, backoff seconds)."""
        if self.client is None:
            self._score(rows)
            return None
        before = dict(self.client.stats)
        texts = self._score(rows)
        return {"encoder_relevancy_texts": texts,
                **{f"encoder_relevancy_{k}": v - before[k] for k, v in self.client.stats.items()}}


@stage_kind("relevancy", order=40)
def relevancy_stages(plan: Any) -> list[Stage]:
    """Embedded answer relevancy, after the judges: on the encoder pool's settings, or with an
    embeddings endpoint (relevancy.embeddings=openai) an HTTP client that holds no GPU."""
    relevancy = embedded(plan.metrics)
    if not relevancy:
        return []
    endpoint = getattr(plan, "relevancy_kwargs", None) or {}
    pool = dict(plan.cluster.get("encoder", {}), **({"num_gpus": 0.0} if endpoint else {}))
    return [Stage("relevancy", RelevancyActor, {"endpoint": endpoint} if endpoint else {"encoder": plan.encoder_kwargs},
                  needs=frozenset({RELEVANCY_DETAILS}), produces=frozenset(relevancy), pool=pool, batch_size=256,
                  restart_counter="encoder_relevancy_actor_restarts")]


class PairwiseActor:
    """Ray Data actor for consistency across runs: BERTScore F1 between every pair of a
    query's answers (open-rag-eval's BERTScoreSimilarityMetric, averaged over both
    directions, which for F1 is the same number). Rows: ``{"i": int, "answers": [str]}``;
    adds ``bert_score_f1`` (one value per pair, ``itertools.combinations`` order)."""

    def __init__(self, encoder: Mapping[str, Any], baseline: Mapping[str, float] | None = None):
        self.encoder = Encoder(**encoder)
        self.f_baseline = (baseline or {}).get("F")

    def process(self, rows: list[dict]) -> None:
        """Add ``bert_score_f1`` (one value per pair of the row's ``answers``) to ``rows`` in place."""
        from ragscale.metrics.bertscore import greedy_precision_recall, rescale
        from ragscale.metrics.consistency import pairs

        emb = self.encoder.embed(sorted({a for r in rows for a in r["answers"]}))
        for r in rows:
            scores = []
            for i, j in pairs(len(r["answers"])):
                p, rec = greedy_precision_recall(emb[r["answers"][i]], emb[r["answers"][j]])
                f = 2 * p * rec / (p + rec) if p + rec else 0.0
                scores.append(rescale(f, self.f_baseline) if self.f_baseline is not None else f)
            r["bert_score_f1"] = scores
