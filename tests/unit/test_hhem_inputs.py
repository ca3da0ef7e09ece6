"""HHEM's inputs and where its files are found, without torch (ragscale.metrics.hhem, issue 37):
the premise is the passages joined by one space and cut to ``max_chars``, the hypothesis the answer
without citation markers (open-rag-eval's hallucination metric); the prompt is the model card's; the
locator finds a snapshot directory, its weights and its tokenizer, and says in one sentence what is
missing where (tests/integration/test_hhem.py runs a real tiny HHEM)."""

from __future__ import annotations

import json

import pytest

from ragscale.metrics import hhem


def test_premise_and_hypothesis():
    assert hhem.premise_hypothesis(["ab", "cd"], "Yes [1] and no [2].") == ("ab cd", "Yes and no")  # parse_generated_answer's parts
    assert hhem.premise_hypothesis(["abc", "def"], "x", max_chars=5) == ("abc d", "x")
    assert hhem.premise_hypothesis(["abc", "def"], "x", max_chars=7) == ("abc def", "x")
    assert hhem.premise_hypothesis(["abc"], "x", max_chars=0) == ("abc", "x")  # 0: no cut
    assert hhem.premise_hypothesis([], None) == ("", "")  # type: ignore[arg-type]
    assert hhem.premise_hypothesis(["p" * 9000], "x")[0] == "p" * hhem.DEFAULT_MAX_CHARS


def test_prompt():
    assert hhem.format_prompt("P", "H") == ("<pad> Determine if the hypothesis is true given the premise?\n\n"
                                            "Premise: P\n\nHypothesis: H")
    assert hhem.format_prompt("P", "H", "{text2}|{text1}") == "H|P"


def snapshot(root, config=None, weights="model.safetensors", tokenizer="tokenizer.json"):
    root.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (root / "config.json").write_text(json.dumps(config))
    if weights:
        (root / weights).write_bytes(b"w")
    if tokenizer:
        (root / tokenizer).write_text("{}")
    return root


@pytest.fixture
def no_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))


def test_a_snapshot_directory_is_found_with_its_parts(tmp_path, no_hub):
    tok = snapshot(tmp_path / "tok", tokenizer="spiece.model", weights=None)
    found = snapshot(tmp_path / "flan", {"model_type": "t5", "d_model": 8}, weights=None)
    model = snapshot(tmp_path / "hhem", {"model_type": "HHEMv2Config", "foundation": str(found), "prompt": "{text1}/{text2}"},
                     weights="pytorch_model.bin", tokenizer=None)
    p = hhem.locate_hhem(str(model), tokenizer=str(tok))
    assert (p.model_dir, p.weights, p.tokenizer_dir) == (str(model), str(model / "pytorch_model.bin"), str(tok))
    assert (p.foundation, p.prompt) == (str(found), "{text1}/{text2}")
    assert p.t5_config == {"model_type": "t5", "d_model": 8} and p.t5_config_source == str(found / "config.json")
    assert p.as_dict()["weights"] == p.weights
    # without a tokenizer of its own, the foundation's directory is the tokenizer's
    snapshot(found, {"model_type": "t5", "d_model": 8}, weights=None, tokenizer="tokenizer_config.json")
    assert hhem.locate_hhem(str(model)).tokenizer_dir == str(found)
    assert hhem.hhem_unavailable(str(model)) is None


def test_the_architecture_names_an_hhem_config_too(tmp_path, no_hub):
    tok = snapshot(tmp_path / "tok", weights=None)
    model = snapshot(tmp_path / "hhem", {"model_type": "other", "architectures": ["HHEMv2ForSequenceClassification"],
                                         "foundation": "google/flan-t5-base"})
    p = hhem.locate_hhem(str(model), tokenizer=str(tok))
    assert p.prompt == hhem.PROMPT and p.foundation == "google/flan-t5-base"
    assert p.t5_config == hhem.FLAN_T5_BASE_CONFIG and p.t5_config_source == "built-in google/flan-t5-base config"
    assert p.weights.endswith("model.safetensors")


@pytest.mark.parametrize("config, files, reason", [
    (None, {}, "has no config.json"),
    ("[1]", {}, "is unreadable: not a JSON object"),
    ("{", {}, "is unreadable"),
    ({"model_type": "bert", "architectures": ["BertModel"]}, {}, "is not an HHEM-2.1 config (model_type='bert', "
                                                                  "architectures=['BertModel']"),
    ({"model_type": "HHEMv2"}, {"weights": None}, "has no weights (model.safetensors or pytorch_model.bin)"),
    ({"model_type": "HHEMv2", "foundation": "org/t5-small"}, {}, "no T5 config.json found for HHEM's foundation 'org/t5-small'"),
])
def test_what_is_missing_is_said(tmp_path, no_hub, config, files, reason):
    tok = snapshot(tmp_path / "tok", weights=None)
    model = tmp_path / "hhem"
    snapshot(model, config if isinstance(config, dict) else None, weights=files.get("weights", "model.safetensors"),
             tokenizer=None)
    if isinstance(config, str):
        (model / "config.json").write_text(config)
    with pytest.raises(hhem.HHEMNotFound, match=None) as e:
        hhem.locate_hhem(str(model), tokenizer=str(tok))
    assert reason in str(e.value)
    assert reason in hhem.hhem_unavailable(str(model), tokenizer=str(tok))


def test_paths_and_repo_ids(tmp_path, no_hub):
    with pytest.raises(hhem.HHEMNotFound, match="HHEM model directory '/no/such' does not exist"):
        hhem.locate_hhem("/no/such")
    (tmp_path / "file").write_text("x")
    with pytest.raises(hhem.HHEMNotFound, match="is a file, not a directory"):
        hhem.locate_hhem(str(tmp_path / "file"))
    with pytest.raises(hhem.HHEMNotFound, match=r"'org/model' is not a local directory and is not in the Hugging Face "
                                                r"cache .*empty-hub \(\w+\); downloads are disabled"):
        hhem.locate_hhem("org/model")
    model = snapshot(tmp_path / "hhem", {"model_type": "HHEMv2"}, tokenizer=None)
    empty = snapshot(tmp_path / "tok", weights=None, tokenizer=None)
    with pytest.raises(hhem.HHEMNotFound, match="has none of tokenizer.json, spiece.model, tokenizer_config.json"):
        hhem.locate_hhem(str(model), tokenizer=str(empty))
    with pytest.raises(hhem.HHEMNotFound, match=r"HHEM tokenizer \(the foundation 'google/flan-t5-base'; set the "
                                                r"tokenizer to override\) 'google/flan-t5-base' is not a local"):
        hhem.locate_hhem(str(model))
    assert hhem._looks_like_path("a/b/c") and hhem._looks_like_path("~/x") and hhem._looks_like_path("./x")
    assert hhem._looks_like_path("name") and hhem._looks_like_path("a\\b") and not hhem._looks_like_path("org/name")


def test_the_hub_cache_is_read_from_the_environment(monkeypatch, tmp_path):
    for var in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hhem.hf_cache_dir() == str(tmp_path / ".cache" / "huggingface" / "hub")
    monkeypatch.setenv("XDG_CACHE_HOME", "/x")
    assert hhem.hf_cache_dir() == "/x/huggingface/hub"
    monkeypatch.setenv("HF_HOME", "~/hf")
    assert hhem.hf_cache_dir() == str(tmp_path / "hf" / "hub")
    monkeypatch.setenv("HF_HUB_CACHE", "~/hub")
    assert hhem.hf_cache_dir() == str(tmp_path / "hub")


def hub_snapshot(hub, repo, config, files=("tokenizer.json",)):
    """``repo`` as the Hugging Face cache lays it out: refs/main names the snapshot that holds the files."""
    base = hub / ("models--" + repo.replace("/", "--"))
    snap = base / "snapshots" / "0123abcd"
    snapshot(snap, config, weights="model.safetensors" if "weights" in files else None,
             tokenizer="tokenizer.json" if "tokenizer.json" in files else None)
    (base / "refs").mkdir(parents=True, exist_ok=True)
    (base / "refs" / "main").write_text("0123abcd")
    return snap


def test_repo_ids_are_found_in_the_local_hub_cache(tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    model = hub_snapshot(hub, hhem.DEFAULT_MODEL, {"model_type": "HHEMv2Config"}, files=("weights",))
    found = hub_snapshot(hub, hhem.DEFAULT_FOUNDATION, {"model_type": "t5", "d_model": 16})
    p = hhem.locate_hhem()  # the defaults: vectara's repo, its foundation google/flan-t5-base
    assert (p.model_dir, p.weights, p.tokenizer_dir) == (str(model), str(model / "model.safetensors"), str(found))
    assert p.t5_config == {"model_type": "t5", "d_model": 16} and p.t5_config_source == str(found / "config.json")
    # a foundation whose config is no T5's, or is unreadable, or absent: flan-t5-base's built-in config
    for text in (json.dumps({"model_type": "bert"}), "{", json.dumps([1])):
        (found / "config.json").write_text(text)
        p = hhem.locate_hhem()
        assert (p.t5_config, p.t5_config_source) == (hhem.FLAN_T5_BASE_CONFIG, "built-in google/flan-t5-base config")
    (found / "config.json").unlink()
    assert hhem.locate_hhem().t5_config_source == "built-in google/flan-t5-base config"
    assert hhem.locate_hhem().t5_config is not hhem.FLAN_T5_BASE_CONFIG  # a copy: a caller's change stays its own


def test_a_foundation_path_without_a_config_falls_back_by_its_name(tmp_path, no_hub):
    tok = snapshot(tmp_path / "tok", weights=None)
    for foundation, ok in ((str(tmp_path / "models" / "flan-t5-base") + "/", True), ("org/flan-t5-base", True),
                           (str(tmp_path / "flan-t5-base-v2"), False)):
        model = snapshot(tmp_path / "hhem", {"model_type": "HHEMv2", "foundation": foundation}, tokenizer=None)
        if ok:
            assert hhem.locate_hhem(str(model), tokenizer=str(tok)).t5_config == hhem.FLAN_T5_BASE_CONFIG
        else:
            assert hhem.hhem_unavailable(str(model), tokenizer=str(tok)) == (
                f"no T5 config.json found for HHEM's foundation {foundation!r}")


def test_relative_and_home_paths_are_made_absolute(tmp_path, no_hub, monkeypatch):
    model = snapshot(tmp_path / "hhem", {"model_type": "HHEMv2"}, tokenizer=None)
    tok = snapshot(tmp_path / "tok", weights=None)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    p = hhem.locate_hhem("./hhem", tokenizer="~/tok")
    assert (p.model_dir, p.tokenizer_dir) == (str(model), str(tok))
    with pytest.raises(hhem.HHEMNotFound) as e:
        hhem.locate_hhem("~/none")
    assert str(e.value) == "HHEM model directory '~/none' does not exist"
    (tmp_path / "f").write_text("")
    assert hhem.hhem_unavailable("~/f") == "HHEM model '~/f' is a file, not a directory"
    assert hhem.hhem_unavailable(str(model), tokenizer="~/f") == "HHEM tokenizer '~/f' is a file, not a directory"
