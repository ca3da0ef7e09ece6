"""Where the vLLM engine's model comes from and how it is placed (ragscale.actors.engines.vllm_placement,
issue 37), decided on the driver without vLLM: a model folder, a file, a path that is not there, a
Hugging Face id in the local cache or not; the tensor parallel size and the GPU memory share from the
judge's options, then the cluster profile, then the defaults; bad values in one line."""

from __future__ import annotations

import json

import pytest

from ragscale.actors.engines.vllm_placement import gpu_memory_utilization, locate_model, tensor_parallel_size
from ragscale.errors import UserError


def folder(tmp_path, name="my-judge", config=True):
    d = tmp_path / name
    d.mkdir(parents=True)
    if config:
        (d / "config.json").write_text("{}")
    return d


def test_a_model_folder_by_path_relative_or_home(tmp_path, monkeypatch):
    d = folder(tmp_path)
    assert locate_model(str(d), download=False) == (str(d), str(d), "my-judge")
    assert locate_model(str(d) + "/", download=False) == (str(d), str(d), "my-judge")
    monkeypatch.chdir(tmp_path)
    assert locate_model("./my-judge", download=False) == (str(d), str(d), "my-judge")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert locate_model("~/my-judge", download=False) == (str(d), str(d), "my-judge")


@pytest.mark.parametrize("spec, message", [
    ("{bare}", "judge model folder {bare} has no config.json (vLLM needs a Hugging Face model folder)"),
    ("{file}", "judge model {file} is a file: the vLLM engine needs a Hugging Face model folder "
               "(scripts/dequantize_gguf.py turns a GGUF into one) or a model id"),
    ("/no/such/folder", "judge model folder not found: /no/such/folder"),
    ("./gone", "judge model folder not found: ./gone"),
    ("~/gone", "judge model folder not found: ~/gone"),
    ("org/name/extra", "judge model folder not found: org/name/extra"),
    ("org/not-cached", "judge model 'org/not-cached' is neither a local folder nor in the local Hugging Face cache: "
                       "download it first (huggingface-cli download org/not-cached), set "
                       "judge.model=/path/to/folder, or set judge.options.download=true"),
])
def test_what_cannot_be_loaded_is_said_in_one_line(tmp_path, monkeypatch, spec, message):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.setenv("HOME", str(tmp_path))
    paths = {"bare": str(folder(tmp_path, "bare", config=False)), "file": str(tmp_path / "model.gguf")}
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    with pytest.raises(UserError) as e:
        locate_model(spec.format(**paths), download=False)
    assert str(e.value) == message.format(**paths)


def test_a_hub_id_from_the_local_cache_or_to_download(tmp_path, monkeypatch):
    from huggingface_hub import constants

    hub = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))  # the cache huggingface_hub read at its import
    snap = hub / "models--org--judge" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (hub / "models--org--judge" / "refs").mkdir()
    (hub / "models--org--judge" / "refs" / "main").write_text("abc123")
    assert locate_model("org/judge", download=False) == (str(snap), str(snap), "org/judge")
    assert locate_model("org/other", download=True) == (None, "org/other", "org/other")  # vLLM downloads it


@pytest.mark.parametrize("options, pool, expected", [
    ({"tensor_parallel_size": 4}, {"tensor_parallel_size": 2, "num_gpus": 8},
     (4, "judge.options.tensor_parallel_size")),
    ({}, {"tensor_parallel_size": 2, "num_gpus": 8}, (2, "cluster.judge.tensor_parallel_size")),
    ({"tensor_parallel_size": None}, {"num_gpus": 2}, (2, "cluster.judge.num_gpus")),
    ({}, {"num_gpus": 2.0}, (2, "cluster.judge.num_gpus")),
    ({}, {"num_gpus": 1}, (1, "cluster.judge.num_gpus")),
    ({}, {"num_gpus": 0.5}, (1, "tensor_parallel_size")),  # a fraction of a GPU: one
    ({}, {"num_gpus": 1.5}, (1, "tensor_parallel_size")),
    ({}, {"num_gpus": True}, (1, "tensor_parallel_size")),
    ({}, {"num_gpus": "2"}, (1, "tensor_parallel_size")),
    ({}, {}, (1, "tensor_parallel_size")),
])
def test_the_tensor_parallel_size_and_where_it_comes_from(options, pool, expected):
    assert tensor_parallel_size(options, pool) == expected


@pytest.mark.parametrize("options, pool, where, value", [
    ({"tensor_parallel_size": 0}, {}, "judge.options.tensor_parallel_size", 0),
    ({"tensor_parallel_size": 1.0}, {}, "judge.options.tensor_parallel_size", 1.0),
    ({"tensor_parallel_size": True}, {}, "judge.options.tensor_parallel_size", True),
    ({}, {"tensor_parallel_size": -2}, "cluster.judge.tensor_parallel_size", -2),
])
def test_a_tensor_parallel_size_that_is_no_positive_integer_is_refused(options, pool, where, value):
    with pytest.raises(UserError) as e:
        tensor_parallel_size(options, pool)
    assert str(e.value) == f"{where} must be a positive integer, got {value!r}"


@pytest.mark.parametrize("option, pool, expected", [
    (0.5, {"gpu_memory_utilization": 0.45}, 0.5),
    (None, {"gpu_memory_utilization": 0.45}, 0.45),
    (None, {}, 0.9),
    (1, {}, 1.0),
])
def test_the_gpu_memory_share(option, pool, expected):
    assert gpu_memory_utilization(option, pool) == expected and isinstance(gpu_memory_utilization(option, pool), float)


@pytest.mark.parametrize("option", [0, 1.5, -0.1, True, "0.5"])
def test_a_gpu_memory_share_outside_zero_to_one_is_refused(option):
    with pytest.raises(UserError) as e:
        gpu_memory_utilization(option, {})
    assert str(e.value) == f"gpu_memory_utilization must be a number in (0, 1], got {option!r}"
