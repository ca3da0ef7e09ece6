"""vLLM engine: ``vllm.LLM`` in the judge actor's process (GPUs; CPU through ``vllm-cpu``).

Placement (GPUs per replica, tensor parallelism, GPU memory, the CPU build) and locating the
model are decided by ``resolve`` on the driver, with ``vllm_placement``'s rules.

Batching. ``generate`` submits every prompt of the call in ONE ``LLM.chat`` batch: vLLM's
continuous batching keeps the device busy, and its automatic prefix caching
(``enable_prefix_caching``) computes the shared few-shot IDK prefix and a record's shared
conversation/passages once for the whole batch. Output is constrained by each prompt's JSON
schema (``StructuredOutputsParams(json=...)``, vLLM >= 0.12), compact by default
(``compact_json``: xgrammar without free whitespace, which small models otherwise fill with
newlines until ``max_tokens`` cuts the JSON). A prompt vLLM rejects (longer than
``max_model_len``) becomes that prompt's ``Generation.error``; the others are still generated.

CPU (vllm-cpu, conf/judge/vllm-cpu.yaml): ``enforce_eager`` skips torch.compile (minutes
on a small machine), ``engine_core_in_process`` saves a process start (each imports vLLM),
``cpu_kvcache_space_gb`` and ``cpu_threads_bind`` set vLLM's CPU environment variables. vLLM
starts its worker processes with ``spawn`` on CPU; inside a Ray actor that works as is (the
driver script's ``__main__`` is not re-run), in a plain script keep an ``if __name__ ==
"__main__":`` guard.

Why our own actor around ``vllm.LLM`` and not ``ray.data.llm``'s ``build_processor`` /
``vLLMEngineProcessorConfig``: that processor is a Ray Data stage that maps rows to
generated text. The judge stage needs more around each generation: the on-disk judge
cache (a re-run or a resumed run generates nothing it has seen), parse retries with
sampling for outputs that do not parse, per-record judge errors that keep the raw text
instead of failing a batch, and the same code path for the llama.cpp and OpenAI-compatible
engines. The processor would have to be split around each of those steps; the actor does
them in one place and vLLM still sees whole batches.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Mapping, Sequence

from ragscale.actors.engines.generation import Generation, safe_messages
from ragscale.actors.engines.vllm_placement import gpu_memory_utilization, locate_model, tensor_parallel_size
from ragscale.errors import UserError
from ragscale.judges.base import JudgePrompt

# conf/judge/*.yaml `options` this engine accepts (None: vLLM's default)
OPTIONS: dict[str, Any] = {
    "tensor_parallel_size": None,    # GPUs per replica (None: the cluster profile's, see above); == cluster.judge.num_gpus
    "max_model_len": 8192,           # context window (prompt + output tokens)
    "gpu_memory_utilization": None,  # share of each GPU vLLM may use (None: the cluster profile's, else 0.9)
    "enable_prefix_caching": True,   # reuse the KV cache of shared prompt prefixes
    "dtype": "auto",                 # auto | bfloat16 | float16 | float32
    "max_num_seqs": None,            # sequences in flight per step
    "max_num_batched_tokens": None,  # tokens per scheduler step
    "enforce_eager": False,          # no CUDA graphs / torch.compile (faster start, slower steps)
    "quantization": None,            # e.g. awq, gptq, fp8 (usually read from the model's config)
    "distributed_executor_backend": None,  # None: vLLM picks (mp on one node)
    "engine_core_in_process": False, # run vLLM's engine core (scheduler) in the actor's process
    "cpu_kvcache_space_gb": None,    # CPU build only: KV cache size (VLLM_CPU_KVCACHE_SPACE)
    "cpu_threads_bind": None,        # CPU build only: VLLM_CPU_OMP_THREADS_BIND (auto | nobind | 0-3)
    "compact_json": True,            # JSON without free whitespace (xgrammar); small models loop on newlines
    "trust_remote_code": False,
    "download": False,               # allow fetching a HF model id that is not in the local cache
    "engine_kwargs": {},             # any other vllm.LLM keyword arguments
}


def resolve(conf: Mapping[str, Any], options: dict, pool: Mapping[str, Any]) -> dict:
    """Locate the model (folder or HF id) and check the pool's GPUs against tensor parallelism."""
    kw = {**OPTIONS, **options}
    kw["tensor_parallel_size"], where = tensor_parallel_size(options, pool)
    tp = kw["tensor_parallel_size"]
    gpus = float(pool.get("num_gpus") or 0)
    if gpus and (gpus > 1 or tp > 1) and gpus != tp:
        raise UserError(
            f"{where}={tp} needs cluster.judge.num_gpus={tp} "
            f"(one replica per judge actor, sharded over its GPUs), got {pool.get('num_gpus')}"
        )
    kw["gpu_memory_utilization"] = gpu_memory_utilization(kw["gpu_memory_utilization"], pool)
    if tp > 1 and gpus and kw["distributed_executor_backend"] is None:
        # The actor already holds its `tp` GPUs: vLLM's workers must be its own processes on
        # them ("ray" would ask Ray for `tp` more GPUs, held by this very actor).
        kw["distributed_executor_backend"] = "mp"
    if not isinstance(kw["engine_kwargs"] or {}, Mapping):
        raise UserError("judge.options.engine_kwargs must be a mapping of vllm.LLM keyword arguments")
    if importlib.util.find_spec("vllm") is None:  # located, not imported (that takes seconds)
        raise UserError(
            "the vllm judge engine needs the `vllm` package in this environment: pip install vllm (GPUs), "
            "or on CPU `make setup-vllm` and run with .venv-vllm/bin/python (judge=vllm-cpu)"
        )
    folder, load, name = locate_model(conf["model"], bool(kw.pop("download")))
    return {"model_path": folder, "model": load, "model_name": name, "seed": int(conf.get("seed") or 0), **kw}


def model_name(kwargs: Mapping[str, Any]) -> str:
    """The model name Engine(**kwargs) reports as ``engine.model`` (``kwargs``: ``resolve``'s): the
    model folder's name or the HF model id."""
    return kwargs["model_name"]


def _set_environment(cpu_kvcache_space_gb: int | None, cpu_threads_bind: str | None,
                     engine_core_in_process: bool, model_path: str | None) -> None:
    """Set the environment variables vLLM reads when its engine starts (so: before it is
    imported): the CPU backend's KV cache size and thread binding, an engine core in this
    process, and no hub requests for a model in a local folder."""
    if cpu_kvcache_space_gb is not None:
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(int(cpu_kvcache_space_gb))
    if cpu_threads_bind is not None:
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = str(cpu_threads_bind)
    if engine_core_in_process:
        # One process fewer to start (each imports vLLM: ~20 s on a small CPU box); the model
        # still runs in vLLM's worker process, where its CPU backend binds OpenMP threads.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    if model_path:  # a local folder: never ask the hub for anything
        os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _llm_kwargs(settings: Mapping[str, Any], compact_json: bool,
                engine_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """``vllm.LLM``'s keyword arguments: the settings that are not None (None: vLLM's default),
    the compact-JSON structured outputs backend when asked, then ``engine_kwargs`` over them."""
    kwargs = dict(settings)
    if compact_json:  # an engine-wide setting in vLLM; "auto" would refuse it
        kwargs["structured_outputs_config"] = {"backend": "xgrammar", "disable_any_whitespace": True}
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    kwargs.update(engine_kwargs or {})
    return kwargs


def _rejected_errors() -> tuple[type[Exception], ...]:
    """What vLLM raises for a request it rejects (VLLMValidationError is not a ValueError)."""
    try:
        from vllm.exceptions import VLLMClientError

        return (ValueError, TypeError, VLLMClientError)
    except ImportError:  # older releases raise ValueError
        return (ValueError, TypeError)


def _counting_tqdm(on_done: Callable[[int], None]) -> Callable[..., Any]:
    """A factory vLLM accepts as ``use_tqdm``: a bar that draws nothing and reports each
    ``update(n)`` (prompts finished) to ``on_done``."""
    import io

    from tqdm import tqdm

    class Counting(tqdm):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **{**kwargs, "file": io.StringIO(), "disable": False})

        def update(self, n: float | None = 1) -> bool | None:
            on_done(int(n or 0))
            return super().update(n)

    return Counting


def _external_id(request_id: str) -> str:
    """The id ``LLM`` gave a request (a counter): vLLM >= 0.12 suffixes it internally with
    ``-<8 random characters>`` in what ``enqueue_chat`` returns, and reports outputs under
    either form depending on the version."""
    return request_id.split("-", 1)[0]


class Engine:
    """``vllm.LLM`` with JSON-schema constrained decoding, greedy by default; one batch per call."""

    name = "vllm"

    def __init__(
        self,
        model: str,
        model_name: str,
        model_path: str | None = None,
        seed: int = 0,
        tensor_parallel_size: int | None = 1,
        max_model_len: int | None = 8192,
        gpu_memory_utilization: float | None = 0.9,
        enable_prefix_caching: bool = True,
        dtype: str = "auto",
        max_num_seqs: int | None = None,
        max_num_batched_tokens: int | None = None,
        enforce_eager: bool = False,
        quantization: str | None = None,
        distributed_executor_backend: str | None = None,
        engine_core_in_process: bool = False,
        cpu_kvcache_space_gb: int | None = None,
        cpu_threads_bind: str | None = None,
        compact_json: bool = True,
        trust_remote_code: bool = False,
        engine_kwargs: Mapping[str, Any] | None = None,
    ):
        _set_environment(cpu_kvcache_space_gb, cpu_threads_bind, engine_core_in_process, model_path)
        if engine_core_in_process:
            # with the engine core in process, vLLM would pick its in-process executor, which on
            # CPU leaves OpenMP unbound and runs several times slower: keep the model in a worker.
            distributed_executor_backend = distributed_executor_backend or "mp"
        from vllm import LLM

        settings: dict[str, Any] = {
            "model": model,
            "seed": seed,
            "tensor_parallel_size": tensor_parallel_size,
            "max_model_len": max_model_len,
            "gpu_memory_utilization": gpu_memory_utilization,
            "enable_prefix_caching": enable_prefix_caching,
            "dtype": dtype,
            "max_num_seqs": max_num_seqs,
            "max_num_batched_tokens": max_num_batched_tokens,
            "enforce_eager": enforce_eager,
            "quantization": quantization,
            "distributed_executor_backend": distributed_executor_backend,
            "trust_remote_code": trust_remote_code,
        }
        self.llm = LLM(**_llm_kwargs(settings, compact_json, engine_kwargs))
        self.model = model_name
        self.seed = seed
        self._rejected: tuple = _rejected_errors()
        self._submitted: queue.SimpleQueue = queue.SimpleQueue()
        self._loop_thread: threading.Thread | None = None
        self._loop_lock = threading.Lock()
        self._broken: str | None = None
        # loop_stats: the streaming loop's counters: engine steps, seconds inside them (the engine busy), requests
        self.loop_stats: dict[str, float] = {"steps": 0, "busy_s": 0.0, "requests": 0}

    def _params(self, p: JudgePrompt, temperature: float, seed: int) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        return SamplingParams(
            temperature=temperature, seed=seed, max_tokens=p.max_tokens,
            # no schema: free text, as a reference protocol's prompt asks for it
            structured_outputs=StructuredOutputsParams(json=p.schema) if p.schema is not None else None,
            **dict(p.params),  # presence_penalty, top_p
        )

    def _chat(self, prompts: Sequence[JudgePrompt], params: list,
              on_done: Callable[[int], None] | None = None) -> list[Generation]:
        tqdm = _counting_tqdm(on_done) if on_done is not None else False
        outs = self.llm.chat([safe_messages(p.messages) for p in prompts], params, use_tqdm=tqdm)
        return [
            Generation(o.outputs[0].text if o.outputs else "", len(o.prompt_token_ids or ()),
                       len(o.outputs[0].token_ids) if o.outputs else 0)
            for o in outs
        ]

    def generate(self, prompts: Sequence[JudgePrompt], temperature: float = 0.0, seed: int | None = None,
                 on_done: Callable[[int], None] | None = None) -> list[Generation]:
        """All prompts in one continuous batch; texts in input order; ``on_done(n)`` as vLLM
        finishes them (its progress-bar hook, drawing nothing).

        A prompt vLLM rejects (e.g. longer than ``max_model_len``) fails the whole batch call:
        then each prompt is submitted alone and only the rejected ones get ``error`` set.
        Once ``submit`` has started the streaming loop, the prompts go through it (one owner of
        the engine).
        """
        if not prompts:
            return []
        if self._loop_thread is not None:
            futures = [self.submit(p, temperature, self.seed if seed is None else seed) for p in prompts]
            out = []
            for f in futures:
                out.append(f.result())
                if on_done is not None:
                    on_done(1)
            return out
        params = [self._params(p, temperature, self.seed if seed is None else seed) for p in prompts]
        try:
            return self._chat(prompts, params, on_done)
        except self._rejected:
            outs = [g for p, sp in zip(prompts, params) for g in self._one(p, sp)]
            if on_done is not None:
                on_done(len(prompts))
            return outs

    def _one(self, p: JudgePrompt, sp: Any) -> list[Generation]:
        try:
            return self._chat([p], [sp])
        except self._rejected as e:
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            return [Generation("", error=f"vllm: {msg}")]

    # -- streaming: requests join the running batch as they are submitted ------------------

    def submit(self, prompt: JudgePrompt, temperature: float = 0.0, seed: int | None = None) -> Future:
        """Queue one prompt; the Future resolves to its Generation (an ``error`` on failure, it
        never raises). A background thread owns the engine: it adds what was submitted between
        two engine steps to the running batch (continuous batching across records, rounds and
        concurrent batches of the judge actor), so a record's next round starts as soon as its
        own prompt is back. Prompts queued together are added in order of their text, so those
        sharing a prefix are scheduled together and vLLM's prefix cache stays hot."""
        fut: Future = Future()
        sp = self._params(prompt, temperature, self.seed if seed is None else seed)
        with self._loop_lock:
            if self._broken is not None:
                fut.set_result(Generation("", error=self._broken))
                return fut
            self._submitted.put((prompt, sp, fut))
            if self._loop_thread is None:
                self._loop_thread = threading.Thread(target=self._loop, name="vllm-stream", daemon=True)
                self._loop_thread.start()
        return fut

    def _drain(self, block: bool) -> list[tuple[JudgePrompt, Any, Future]]:
        items = [self._submitted.get()] if block else []
        while True:
            try:
                items.append(self._submitted.get_nowait())
            except queue.Empty:
                return items

    def _enqueue(self, items: list[tuple[JudgePrompt, Any, Future]], pending: dict[str, Future]) -> None:
        """Add ``items`` to the engine (prefix order); a rejected prompt resolves to its error."""
        items = sorted(items, key=lambda it: it[0].text())
        try:
            ids = self.llm.enqueue_chat([safe_messages(p.messages) for p, _, _ in items], [sp for _, sp, _ in items],
                                        use_tqdm=False)
        except self._rejected:  # vLLM aborted the ones it had added: add them one by one
            for it in items:
                try:
                    (rid,) = self.llm.enqueue_chat([safe_messages(it[0].messages)], [it[1]], use_tqdm=False)
                except self._rejected as e:
                    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                    it[2].set_result(Generation("", error=f"vllm: {msg}"))
                else:
                    pending[_external_id(rid)] = it[2]
            return
        for rid, (_, _, fut) in zip(ids, items):
            pending[_external_id(rid)] = fut

    def _loop(self) -> None:
        engine = self.llm.llm_engine
        pending: dict[str, Future] = {}
        try:
            while True:
                items = self._drain(block=not pending)
                if items:
                    self.loop_stats["requests"] += len(items)
                    self._enqueue(items, pending)
                if not pending:
                    continue
                if not engine.has_unfinished_requests():  # never expected: fail them rather than spin
                    for fut in pending.values():
                        fut.set_result(Generation("", error="vllm: the engine dropped the request"))
                    pending.clear()
                    continue
                t0 = time.perf_counter()
                outputs = engine.step()
                self.loop_stats["busy_s"] += time.perf_counter() - t0
                self.loop_stats["steps"] += 1
                for o in outputs:
                    if o.finished and _external_id(o.request_id) in pending:
                        pending.pop(_external_id(o.request_id)).set_result(Generation(
                            o.outputs[0].text if o.outputs else "", len(o.prompt_token_ids or ()),
                            len(o.outputs[0].token_ids) if o.outputs else 0))
        except BaseException as e:  # the engine died: fail what is in flight and every later submit
            msg = f"vllm: engine loop failed: {type(e).__name__}: {str(e).strip()[:300]}"
            with self._loop_lock:
                self._broken = msg
                leftover = self._drain(block=False)
            for fut in [*pending.values(), *(f for _, _, f in leftover)]:
                if not fut.done():
                    fut.set_result(Generation("", error=msg))
            raise
