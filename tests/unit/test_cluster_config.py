"""Clusters, without a GPU or a cloud account:

- cluster.yaml passes the cluster launcher's own checks as ``ray up`` runs them before any
  cloud call (``prepare_config``: defaults fill and setup-command merge; ``validate_config``:
  ray-schema.json and the node-type rules), and those checks really reject broken copies;
- its setup commands install ragscale with extras that pyproject.toml has, the ``gpu`` extra
  among them (vLLM), and keep Ray's token authentication on;
- every ``cluster=`` profile composes with ``+scenario=mtrag judge=vllm``; the GPU profiles'
  actor pools, as ``run_pipeline`` hands them to Ray Data (recorded from its ``map_batches``
  calls), carry their sizes, CPUs and GPUs, fit the profile's GPUs, and the judge's tensor
  parallel size reaches ``vllm.LLM`` (a stand-in module records its arguments).
"""

from __future__ import annotations

import copy
import os
import re
import sys
import tomllib

import pytest
import yaml

from conftest import ROOT

CLUSTER_YAML = os.path.join(ROOT, "cluster.yaml")
PROFILES = ("local", "ray", "1xh100", "8xh100")
# profile -> (GPUs of the machine it describes, expected pools: name -> (size, num_cpus, num_gpus, batch_size), judge TP)
GPU_PROFILES = {
    "1xh100": (1, {"encoder": (1, 2, 0.1, 2048), "nli": (1, 1, 0.1, 64), "judge": (1, 2, 0.7, 256)}, 1, 0.7),
    "8xh100": (8, {"encoder": (2, 4, 0.25, 2048), "nli": (2, 2, 0.25, 128), "judge": (6, 4, 1, 256)}, 1, 0.9),
}


def _raw() -> dict:
    with open(CLUSTER_YAML) as fh:
        return yaml.safe_load(fh)


def _prepared(raw: dict) -> dict:
    from ray.autoscaler._private.util import prepare_config, validate_config

    cfg = prepare_config(copy.deepcopy(raw))
    validate_config(cfg)
    return cfg


# -- cluster.yaml ---------------------------------------------------------------------------


def test_cluster_yaml_passes_ray_launcher_validation():
    raw = _raw()
    cfg = _prepared(raw)
    types = cfg["available_node_types"]
    assert cfg["head_node_type"] == "head" and set(types) == {"head", "gpu_worker"}
    assert types["head"]["max_workers"] == 0 and "GPU" not in types["head"]["resources"]
    gpu = types["gpu_worker"]
    assert gpu["resources"]["GPU"] == 8 == GPU_PROFILES["8xh100"][0]  # one worker node = cluster=8xh100
    assert 0 == gpu["min_workers"] < gpu["max_workers"] <= cfg["max_workers"]
    # setup_commands run on both node types (merged by prepare_config), the extras come first
    install = raw["setup_commands"][0]
    assert cfg["head_setup_commands"][0] == install == cfg["worker_setup_commands"][0]
    for excluded in (".venv", ".git", ".ragscale_cache", "outputs"):
        assert excluded in cfg["rsync_exclude"]  # never sync a local venv or caches to the nodes


def test_ray_validation_rejects_broken_copies():
    """The validation the tests rely on is real: typos and impossible values fail."""
    import jsonschema

    raw = _raw()
    bad = copy.deepcopy(raw)
    bad["setup_comands"] = bad.pop("setup_commands")  # a misspelled top-level key
    with pytest.raises(jsonschema.ValidationError):
        _prepared(bad)
    bad = copy.deepcopy(raw)
    bad["available_node_types"]["gpu_worker"]["resources"]["GPU"] = 0.5  # resources are integers
    with pytest.raises(jsonschema.ValidationError):
        _prepared(bad)
    bad = copy.deepcopy(raw)
    bad["head_node_type"] = "cpu_head"
    with pytest.raises(ValueError, match="head_node_type"):
        _prepared(bad)
    bad = copy.deepcopy(raw)
    bad["available_node_types"]["gpu_worker"]["min_workers"] = bad["max_workers"] + 1
    with pytest.raises(ValueError, match="min_workers"):
        _prepared(bad)


def test_setup_installs_extras_that_exist_including_gpu():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        extras = tomllib.load(fh)["project"]["optional-dependencies"]
    assert any(re.match(r"vllm\b", r) for r in extras["gpu"])
    install = " ".join(_raw()["setup_commands"])
    m = re.search(r'-e "\.\[([a-z0-9_,-]+)\]"', install)
    assert m, install
    wanted = m.group(1).split(",")
    assert "gpu" in wanted and "models" in wanted
    assert set(wanted) <= set(extras), set(wanted) - set(extras)


def test_cluster_yaml_keeps_token_authentication_on():
    raw = _raw()
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = [c for c in raw[key] if "ray start" in c]
        assert start and all("RAY_AUTH_MODE=token" in c for c in start), raw[key]
    assert raw["file_mounts"].get("~/.ray/auth_token") == "~/.ray/auth_token"  # every node gets the token


def test_ragscale_never_disables_ray_token_authentication():
    """No code or config of the project sets RAY_AUTH_MODE (to 'disabled' or anything else):
    the mode is the user's, from the environment (docs/clusters.md)."""
    hits = []
    for top in ("ragscale", "scripts", "benchmarks"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".py", ".yaml", ".yml", ".sh", ".txt")):
                    path = os.path.join(d, f)
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        if "RAY_AUTH_MODE" in fh.read():
                            hits.append(os.path.relpath(path, ROOT))
    for f in ("Makefile", "cluster.yaml"):
        with open(os.path.join(ROOT, f)) as fh:
            text = fh.read()
        assert not re.search(r"RAY_AUTH_MODE\s*=\s*(?!token)", text), f
    assert not hits, hits


# -- cluster= profiles --------------------------------------------------------------------


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """A stand-in ``vllm`` package on sys.path (``LLM`` records its keyword arguments) and a
    model folder: the vLLM engine's resolve and constructor run without vLLM or a GPU."""
    pkg = tmp_path / "site" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "CALLS = []\n"
        "class LLM:\n"
        "    def __init__(self, **kwargs):\n"
        "        CALLS.append(kwargs)\n"
        "class SamplingParams:\n"
        "    def __init__(self, **kwargs):\n"
        "        self.kwargs = kwargs\n"
    )
    model = tmp_path / "Judge-7B"
    model.mkdir()
    (model / "config.json").write_text("{}")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    sys.modules.pop("vllm", None)
    yield str(model)
    sys.modules.pop("vllm", None)


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_composes_for_mtrag_with_the_vllm_judge(profile):
    from ragscale.run import compose

    cfg = compose(["+scenario=mtrag", "judge=vllm", f"cluster={profile}"])
    assert cfg.cluster.name == profile and cfg.judge.engine == "vllm"
    assert cfg.judge.options.tensor_parallel_size is None  # the profile decides, unless set on purpose
    for pool in ("encoder", "nli", "judge"):
        assert cfg.cluster[pool].size >= 1 and cfg.cluster[pool].batch_size >= 1
    if profile in ("local", "ray"):
        assert all(cfg.cluster[p].num_gpus == 0 for p in ("encoder", "nli", "judge"))
        assert cfg.cluster.address == (None if profile == "local" else "auto")


def _record_pipeline(plan, monkeypatch) -> list[tuple[str, dict]]:
    """(stage, map_batches keyword arguments) in the order run_pipeline builds them, without Ray
    running anything (ray.data.from_arrow returns a recorder)."""
    import ray.data

    from ragscale.pipeline.dataset import run_pipeline

    calls: list[tuple[str, dict]] = []

    class Recorder:
        def map_batches(self, fn, **kwargs):
            calls.append((getattr(fn, "__name__", str(fn)), kwargs))
            return self

        def iter_batches(self, **kwargs):
            return iter(())

    monkeypatch.setattr(ray.data, "from_arrow", lambda blocks: Recorder())
    assert run_pipeline(plan, [], lambda rows: None) == {}
    return calls


def test_building_the_pipeline_raises_no_deprecation_warning(monkeypatch):
    import warnings

    import ray.data.context

    from ragscale.run import compose, validate

    plan = validate(compose(["+scenario=mtrag"]))
    # a fresh DataContext, as in a new driver: Ray 2.60's constructor sets its own deprecated fields
    monkeypatch.setattr(ray.data.context, "_default_context", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        calls = _record_pipeline(plan, monkeypatch)
    assert "EncoderActor" in dict(calls)


@pytest.mark.parametrize("profile", sorted(GPU_PROFILES))
def test_gpu_profile_pools_and_tensor_parallelism_reach_ray_data_and_vllm(profile, fake_vllm, monkeypatch):
    from omegaconf import OmegaConf

    from ragscale.actors.engines import build
    from dataclasses import replace

    from ragscale.run import compose, validate

    gpus, pools, tp, mem = GPU_PROFILES[profile]
    cfg = compose(["+scenario=mtrag", "judge=vllm", f"cluster={profile}", f"judge.model={fake_vllm}"])
    setup = validate(cfg)  # what the CLI checks before Ray starts (vllm located, model folder found)
    engine = setup.judge_kwargs["engine"]
    assert engine["tensor_parallel_size"] == tp and engine["gpu_memory_utilization"] == mem
    assert engine["distributed_executor_backend"] == ("mp" if tp > 1 else None)
    cluster = OmegaConf.to_container(cfg.cluster, resolve=True)
    if tp > 1:
        assert cluster["judge"]["num_gpus"] == tp  # a TP>1 judge actor holds exactly its TP GPUs

    # The run plan, plus the HHEM and answer-relevancy pools so that every GPU pool a run can
    # start is recorded.
    judges = [*setup.judge_kwargs["judges"], "ragas_answer_relevancy"]
    plan = replace(setup, metrics=(*setup.metrics, "answer_relevancy"), stages=setup.stages | {"nli"},
                   judge_kwargs={**setup.judge_kwargs, "judges": judges},
                   nli_kwargs={"hhem": {"model": "unused"}}, cluster=cluster)
    calls = dict(_record_pipeline(plan, monkeypatch))
    assert {"EncoderActor", "NLIActor", "JudgeActor", "RelevancyActor"} <= set(calls)
    total = 0.0
    for stage, pool in (("EncoderActor", "encoder"), ("NLIActor", "nli"), ("JudgeActor", "judge"),
                        ("RelevancyActor", "encoder")):
        kw = calls[stage]
        size, cpus, ngpu, batch = pools[pool]
        assert (kw["compute"].min_size, kw["compute"].max_size) == (size, size), stage
        assert (kw["num_cpus"], kw["num_gpus"], kw["batch_size"]) == (cpus, ngpu, batch), stage
        total += size * ngpu
    assert total <= gpus + 1e-9, f"{profile}: the pools ask for {total} GPUs, the profile has {gpus}"
    judge_kwargs = calls["JudgeActor"]["fn_constructor_kwargs"]
    assert judge_kwargs["engine"]["tensor_parallel_size"] == tp
    # vLLM streams: each judge actor is threaded, with 4 batches in flight; the other pools one at a time
    judge = calls["JudgeActor"]["compute"]
    assert (judge.max_concurrent_calls_per_actor, judge.max_tasks_in_flight_per_actor) == (4, 4)
    assert judge.enable_true_multi_threading and calls["EncoderActor"]["compute"].max_concurrent_calls_per_actor is None

    # ... and the judge actor's engine hands it to vllm.LLM
    import vllm

    build(judge_kwargs["engine"])
    llm = vllm.CALLS[-1]
    assert llm["tensor_parallel_size"] == tp and llm["gpu_memory_utilization"] == mem
    assert llm["model"] == fake_vllm and llm.get("distributed_executor_backend") == ("mp" if tp > 1 else None)


@pytest.mark.parametrize(
    "overrides, tp, gpus",
    [
        (["cluster.judge.tensor_parallel_size=4", "cluster.judge.num_gpus=4", "cluster.judge.size=1"], 4, 4),
        (["cluster.judge.tensor_parallel_size=null", "cluster.judge.num_gpus=1"], 1, 1),  # from num_gpus
        (["cluster.judge.tensor_parallel_size=null", "cluster.judge.num_gpus=2", "cluster.judge.size=3"], 2, 2),  # num_gpus 2 -> TP 2
        (["judge.options.tensor_parallel_size=2", "cluster.judge.tensor_parallel_size=null", "cluster.judge.num_gpus=2",
          "cluster.judge.size=3"], 2, 2),  # the judge's own setting, consistent
    ],
)
def test_tensor_parallel_size_sources(overrides, tp, gpus, fake_vllm):
    from ragscale.run import compose, validate

    cfg = compose(["+scenario=mtrag", "judge=vllm", "cluster=8xh100", f"judge.model={fake_vllm}", *overrides])
    engine = validate(cfg).judge_kwargs["engine"]
    assert engine["tensor_parallel_size"] == tp and cfg.cluster.judge.num_gpus == gpus


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["judge.options.tensor_parallel_size=4"], "judge.options.tensor_parallel_size=4 needs cluster.judge.num_gpus=4"),
        (["cluster.judge.num_gpus=3"], "cluster.judge.tensor_parallel_size=1 needs cluster.judge.num_gpus=1"),
        (["cluster.judge.tensor_parallel_size=0"], "must be a positive integer"),
        (["cluster.judge.gpu_memory_utilization=1.5"], "gpu_memory_utilization must be a number in (0, 1]"),
    ],
)
def test_inconsistent_gpu_placement_is_a_one_line_error(overrides, message, fake_vllm):
    from ragscale.errors import UserError
    from ragscale.run import compose, validate

    cfg = compose(["+scenario=mtrag", "judge=vllm", "cluster=8xh100", f"judge.model={fake_vllm}", *overrides])
    with pytest.raises(UserError) as e:
        validate(cfg)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_cpu_judges_ignore_the_gpu_placement_options():
    """cluster.judge.tensor_parallel_size is the vLLM engine's; llama.cpp resolves as before."""
    from ragscale.run import compose, validate

    cfg = compose(["+scenario=mtrag", "cluster=8xh100", "steps=[idk]"])
    engine = validate(cfg).judge_kwargs["engine"]
    assert engine["engine"] == "llama.cpp" and "tensor_parallel_size" not in engine


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("overrides", [(), ("cluster.encoder.num_gpus=1", "cluster.nli.num_gpus=0.5"),
                                       ("cluster.encoder.num_gpus=0", "cluster.nli.num_gpus=0")])
def test_torch_pools_run_on_the_gpu_only_when_given_one(profile, overrides, monkeypatch):
    """The encoder and HHEM actors get ``device='cuda'`` exactly when their pool has num_gpus > 0,
    else ``'cpu'``: Ray leaves every GPU visible to an actor that asked for none, so the actor
    cannot tell by looking (seen on an H100: cluster=local's encoder ran on the GPU)."""
    from omegaconf import OmegaConf

    import ragscale.metrics.hhem as hhem
    from ragscale.actors.encoder import plan_encoder
    from ragscale.actors.nli import plan_nli
    from ragscale.run import compose

    monkeypatch.setattr(hhem, "hhem_unavailable", lambda model, tokenizer: None)  # as if HHEM's weights were here
    cfg = compose(["+scenario=mtrag", f"cluster={profile}", *overrides])
    cluster = OmegaConf.to_container(cfg.cluster, resolve=True)
    encoder, _ = plan_encoder(OmegaConf.to_container(cfg.encoder, resolve=True), cluster)
    nli, unavailable = plan_nli(OmegaConf.to_container(cfg.hallucination, resolve=True), cluster)
    assert unavailable is None
    for device, pool in ((encoder["device"], "encoder"), (nli["hhem"]["device"], "nli")):
        assert device == ("cuda" if cluster[pool]["num_gpus"] > 0 else "cpu"), (profile, overrides, pool)
    if profile in GPU_PROFILES and not overrides:
        assert encoder["device"] == nli["hhem"]["device"] == "cuda"


@pytest.mark.parametrize("overrides, on_gpu", [((), ""), (("cluster.encoder.num_gpus=0.5",), "; on GPU: encoder")])
def test_the_start_line_says_which_pools_run_on_a_gpu(overrides, on_gpu):
    from ragscale.pipeline.dataset import stage_labels
    from ragscale.plan import plan_run
    from ragscale.run import compose
    from ragscale.driver import start_line

    plan = plan_run(compose(["+scenario=mtrag", "steps=[algorithmic]", *overrides]))
    assert start_line(plan, stage_labels(plan)) == f"[ragscale] starting Ray and the stages' workers (read, encoder, derive{on_gpu})"


@pytest.mark.parametrize("engine, asked, calls", [("vllm", None, 4), ("llama.cpp", None, 1), ("openai", None, 4),
                                                  ("vllm", 2, 2), ("llama.cpp", 3, 3)])
def test_batches_in_flight_follow_the_engine_unless_asked(engine, asked, calls):
    """cluster.judge.batches_in_flight: null gives 4 to an engine that streams (submit), 1 to the others."""
    from ragscale.errors import UserError
    from ragscale.pipeline.dataset import actor_pool
    from ragscale.actors.judge_plan import batches_in_flight

    n = batches_in_flight({"engine": engine}, {"batches_in_flight": asked})
    assert n == calls
    compute = actor_pool({"size": 2}, 16, calls=n)["compute"]
    assert compute.max_concurrent_calls_per_actor == (n if n > 1 else None)
    with pytest.raises(UserError, match="batches_in_flight must be >= 1"):
        batches_in_flight({"engine": engine}, {"batches_in_flight": 0})


@pytest.mark.parametrize("cluster, env, want", [
    ({"address": None, "num_cpus": 2}, None, {"address": "local", "num_cpus": 2}),  # a fresh local instance
    ({"address": None, "num_cpus": 2}, "10.0.0.5:6379", {"address": "10.0.0.5:6379"}),  # ray job submit's driver
    ({"address": "auto"}, "10.0.0.5:6379", {"address": "auto"}),  # the profile's own address wins
])
def test_init_ray_address_from_the_profile_then_ray_address(cluster, env, want, monkeypatch):
    """cluster.address, else RAY_ADDRESS (as `ray job submit` sets it), else a fresh local
    instance; num_cpus only for a local start (Ray refuses it when connecting)."""
    import ray

    from ragscale.pipeline import dataset

    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(kw))
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    if env is None:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("RAY_ADDRESS", env)
    info = dataset.init_ray(cluster)
    assert {k: calls[0][k] for k in ("address", "num_cpus") if k in calls[0]} == want
    assert info == {"address": want["address"], "resources": {"CPU": 2.0}}
