"""consistency.encoder as ragscale.plan.plan_consistency plans it: a local model folder is taken
whole (every layer its config.json names), unrescaled and uncut, whatever the run's own encoder
says; an encoder config (ragscale/conf/encoder/NAME.yaml) is resolved, and one whose weights are
not here is refused in one line that says what to do."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from ragscale import plan
from ragscale.errors import UserError

CLUSTER = {"encoder": {"torch_threads": 1}}


def run_encoder(model):
    return {"name": "run-encoder", "model": str(model), "num_layers": 12, "rescale_with_baseline": True,
            "baseline": {"P": 0.8, "R": 0.8, "F": 0.8}, "max_length": 128, "batch_tokens": 1024, "cache_mb": 64,
            "disk_cache_path": None, "disk_cache_mb": 2048, "dtype": "fp32"}


def model_folder(path, layers):
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"num_hidden_layers": layers}))
    return str(path)


def test_a_local_folder_is_taken_whole_unrescaled_and_uncut(tmp_path):
    own = model_folder(tmp_path / "run-model", 12)
    folder = model_folder(tmp_path / "other-model", 3)
    run = run_encoder(own)
    c = plan.plan_consistency(SimpleNamespace(min_runs=2, encoder=folder), run,
                              {"encoder_kwargs": {"model_path": own}, "baseline": run["baseline"]}, CLUSTER)
    assert c["encoder"] == {"name": folder, "model_path": folder, "num_layers": 3, "rescale_with_baseline": False,
                            "baseline": None}
    assert c["baseline"] is None and c["min_runs"] == 2
    assert c["encoder_kwargs"] == {"model_path": folder, "num_layers": 3, "max_length": None, "batch_tokens": 1024,
                                   "cache_mb": 64, "torch_threads": 1, "device": "cpu", "dtype": "fp32",
                                   "disk_cache_path": None, "disk_cache_mb": 2048}


@pytest.fixture
def conf_dir(tmp_path, monkeypatch):
    (tmp_path / "conf" / "encoder").mkdir(parents=True)
    monkeypatch.setattr(plan, "CONF_DIR", str(tmp_path / "conf"))
    return tmp_path / "conf" / "encoder"


def test_an_encoder_config_is_resolved(tmp_path, conf_dir, monkeypatch):
    folder = model_folder(tmp_path / "mine", 4)
    monkeypatch.setenv("MY_ENCODER_DIR", folder)
    (conf_dir / "mine.yaml").write_text("name: mine\nmodel: ${oc.env:MY_ENCODER_DIR}\nnum_layers: 2\n")
    c = plan.plan_consistency(SimpleNamespace(min_runs=2, encoder="mine"), run_encoder(folder),
                              {"encoder_kwargs": {}, "baseline": None}, CLUSTER)
    assert c["encoder"] == {"name": "mine", "model_path": folder, "num_layers": 2, "rescale_with_baseline": False,
                            "baseline": None}


def test_an_encoder_config_without_its_weights_is_refused_in_full(tmp_path, conf_dir):
    (conf_dir / "absent.yaml").write_text("name: absent\nmodel: package:no_such_encoder_package\nnum_layers: 2\n")
    with pytest.raises(UserError) as e:
        plan.plan_consistency(SimpleNamespace(min_runs=2, encoder="absent"), run_encoder(tmp_path),
                              {"encoder_kwargs": {}, "baseline": None}, CLUSTER)
    assert str(e.value) == ("consistency.encoder=absent: the weights of 'package:no_such_encoder_package' are not "
                            "available locally (models are never downloaded): put them in the local Hugging Face "
                            "cache, or set consistency.encoder to a local model folder")


def test_an_encoder_config_the_encoder_refuses_is_refused_under_its_key(tmp_path, conf_dir, monkeypatch):
    folder = model_folder(tmp_path / "mine", 4)
    monkeypatch.setenv("MY_ENCODER_DIR", folder)
    (conf_dir / "mine.yaml").write_text("name: mine\nmodel: ${oc.env:MY_ENCODER_DIR}\nnum_layers: 2\n"
                                        "rescale_with_baseline: true\n")
    with pytest.raises(UserError) as e:
        plan.plan_consistency(SimpleNamespace(min_runs=2, encoder="mine"), run_encoder(folder),
                              {"encoder_kwargs": {}, "baseline": None}, CLUSTER)
    assert str(e.value) == "consistency.encoder=mine: encoder mine: rescale_with_baseline needs baseline P and R values"
