"""Shared start-up of the torch-holding actors (encoder, HHEM)."""

from __future__ import annotations

from typing import Any


def start_torch(torch_threads: int | None, device: str | None) -> tuple[Any, str]:
    """Import torch with the Hugging Face hub offline and its logging quiet, set the thread
    count, and pick the device (CUDA when present, unless given). Returns (torch, device)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub from a worker
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if torch_threads:
        torch.set_num_threads(int(torch_threads))
    return torch, device or ("cuda" if torch.cuda.is_available() else "cpu")
