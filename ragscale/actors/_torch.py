"""Shared start-up of the torch-holding actors (encoder, HHEM)."""

from __future__ import annotations

from typing import Any, Mapping


def start_torch(torch_threads: int | None, device: str | None) -> tuple[Any, str]:
    """Import torch with the Hugging Face hub offline and its logging quiet, set the thread
    count, and pick the device (CUDA when present, unless given: the pipeline's pools give
    ``pool_device``). Returns (torch, device)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub from a worker
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if torch_threads:
        torch.set_num_threads(int(torch_threads))
    return torch, device or ("cuda" if torch.cuda.is_available() else "cpu")


def pool_device(pool: Mapping[str, Any]) -> str:
    """The device of a pool's torch actors: ``cuda`` when ``cluster.<pool>.num_gpus`` > 0, else
    ``cpu``. Ray 2.60 leaves every GPU visible to an actor that asked for none (it sets
    CUDA_VISIBLE_DEVICES only for actors given GPUs), so detecting CUDA inside the actor would
    put a CPU pool on a GPU that Ray never assigned it (next to a vLLM engine that counts on
    its memory share)."""
    return "cuda" if float(pool.get("num_gpus") or 0) > 0 else "cpu"
