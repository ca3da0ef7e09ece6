"""``config.register`` in a fresh process's state (Hydra's ConfigStore and OmegaConf's resolvers are
process-wide, so every other test sees them already made): ragscale's schema where conf/config.yaml's
defaults list finds it (``ragscale_schema``), each group's schema under its group and nowhere else,
and the two resolvers the conf files use, ``${ragscale.or:VALUE,DEFAULT}`` and ``${ragscale.cache:NAME}``."""

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf
from omegaconf.basecontainer import BaseContainer

from ragscale import config
from ragscale.cachedir import cache_file

GROUPS = {"encoder": config.EncoderConf, "cluster": config.ClusterConf, "judge": config.JudgeConf,
          "tracking": config.TrackingConf}


@pytest.fixture
def fresh(monkeypatch):
    store = ConfigStore.instance()
    monkeypatch.setattr(store, "repo", {})
    monkeypatch.setattr(BaseContainer, "_resolvers", {})
    return store


def test_the_schema_and_each_groups_schema_are_stored_where_the_conf_files_find_them(fresh):
    config.register()
    assert sorted(fresh.list("")) == ["cluster", "encoder", "judge", "ragscale_schema.yaml", "tracking"]
    assert fresh.load("ragscale_schema.yaml").node == OmegaConf.structured(config.RagscaleConf)
    for group, schema in GROUPS.items():
        assert fresh.list(group) == [f"{group}_schema.yaml"]
        assert fresh.load(f"{group}/{group}_schema.yaml").node == OmegaConf.structured(schema)


def test_the_or_resolver_gives_the_value_or_the_default_where_it_is_null(fresh):
    config.register()
    conf = OmegaConf.create({"none": None, "set": "mtrag", "empty": "",
                             "a": "${ragscale.or:${none},metrics}", "b": "${ragscale.or:${set},metrics}",
                             "c": "${ragscale.or:${empty},metrics}"})
    assert (conf.a, conf.b, conf.c) == ("metrics", "mtrag", "")


def test_the_cache_resolver_names_a_file_in_ragscales_cache_folder(fresh):
    config.register()
    assert OmegaConf.create({"p": "${ragscale.cache:judge_cache.sqlite}"}).p == cache_file("judge_cache.sqlite")


def test_registering_twice_keeps_one_of_each(fresh):
    config.register()
    config.register()
    assert OmegaConf.has_resolver("ragscale.or") and OmegaConf.has_resolver("ragscale.cache")
    assert sorted(fresh.list("")) == ["cluster", "encoder", "judge", "ragscale_schema.yaml", "tracking"]
