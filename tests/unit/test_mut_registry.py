"""The metric catalog's edges that mutation testing found unpinned (make mutate): the families
imported once on first use, declaring (and re-declaring) metrics, the lexical_metric decorator,
the P@k / AP@k cut-offs, labels, record fields, per-record scalars and the messages of the checks
that reject bad steps, metrics and specs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import ragscale
from ragscale.errors import UserError
from ragscale.metrics import registry
from ragscale.metrics.registry import MetricSpec


@pytest.fixture
def scratch_catalog(monkeypatch):
    """A copy of the full catalog that the test may declare into (the real one is left as it was)."""
    monkeypatch.setattr(registry, "_CATALOG", dict(registry.catalog()))
    return registry._CATALOG


# ---------------------------------------------------------------- catalog()


def test_catalog_imports_the_built_in_families_on_first_use():
    """A fresh interpreter that imports only the registry sees every family's metrics."""
    code = ("from ragscale.metrics.registry import catalog\n"
            "c = catalog()\n"
            "print(sorted(n for n in ('RB_agg', 'Recall', 'HMean', 'umbrela_mean', 'hhem') if n in c))")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(ragscale.__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['HMean', 'RB_agg', 'Recall', 'hhem', 'umbrela_mean']"


def test_catalog_imports_the_families_only_once(monkeypatch):
    """Once loaded, later calls import nothing (a broken module list is never touched again)."""
    first = registry.catalog()
    monkeypatch.setattr(registry, "FAMILY_MODULES", ("ragscale.no_such_family_module",))
    assert registry.catalog() is first
    assert registry.catalog() is first


def test_catalog_loads_the_real_family_modules(monkeypatch):
    """Loading (again) imports each named family module and keeps the catalog."""
    monkeypatch.setattr(registry, "_loaded", False)
    assert "RB_agg" in registry.catalog()
    assert registry._loaded is True


# ---------------------------------------------------------------- declare()


def test_declare_a_new_metric_adds_it(scratch_catalog):
    spec = MetricSpec("zz_new_metric", "judge", "custom")
    registry.declare(spec)
    assert registry.lookup("zz_new_metric") is spec
    assert scratch_catalog["zz_new_metric"] is spec


def test_declare_the_same_facts_twice_is_fine(scratch_catalog):
    registry.declare(MetricSpec("zz_twice", "judge", "custom"))
    registry.declare(MetricSpec("zz_twice", "judge", "custom"))  # equal facts: no error
    assert registry.lookup("zz_twice") == MetricSpec("zz_twice", "judge", "custom")


def test_declare_different_facts_under_one_name_is_an_error(scratch_catalog):
    registry.declare(MetricSpec("zz_clash", "judge", "custom"))
    with pytest.raises(ValueError, match=r"^metric 'zz_clash' is declared twice with different facts$"):
        registry.declare(MetricSpec("zz_clash", "judge", "custom", decimals=2))
    assert registry.lookup("zz_clash").decimals == 4  # the first declaration stays


def test_redeclaring_a_built_in_metric_with_other_facts_fails(scratch_catalog):
    with pytest.raises(ValueError, match="'RB_agg' is declared twice"):
        registry.declare(MetricSpec("RB_agg", "lexical", "algorithmic"))


# ---------------------------------------------------------------- MetricSpec


def test_spec_with_unknown_stage_alone_is_rejected():
    with pytest.raises(ValueError, match=r"^metric m: stage 'bogus' / shape 'record' unknown$"):
        MetricSpec("m", "bogus", "custom")


def test_spec_with_unknown_shape_alone_is_rejected():
    with pytest.raises(ValueError, match=r"^metric m: stage 'judge' / shape 'cube' unknown$"):
        MetricSpec("m", "judge", "custom", shape="cube")


# ---------------------------------------------------------------- lexical_metric


def test_lexical_metric_declares_a_lexical_record_metric(scratch_catalog):
    """The decorator returns the function and declares it with its facts (shape 'record' by default)."""

    def fn(prediction, targets, passages):
        return float(len(prediction))

    assert registry.lexical_metric("zz_len", family="custom", short="ZL", higher_is_better=None)(fn) is fn
    spec = registry.lookup("zz_len")
    assert spec == MetricSpec("zz_len", "lexical", "custom", shape="record", short="ZL", higher_is_better=None,
                              compute=fn)
    assert (spec.name, spec.stage, spec.family, spec.shape) == ("zz_len", "lexical", "custom", "record")
    assert spec.compute is fn and spec.compute("abc", [], []) == 3.0
    assert spec.label == "ZL" and spec.higher_is_better is None


def test_lexical_metric_keeps_a_given_shape(scratch_catalog):
    @registry.lexical_metric("zz_per_target", family="algorithmic", shape="target")
    def per_target(prediction, targets, passages):
        return [1.0 for _ in targets]

    spec = registry.lookup("zz_per_target")
    assert spec.shape == "target" and spec.family == "algorithmic" and spec.stage == "lexical"
    assert spec.compute is per_target and spec.short == "" and spec.label == "zz_per_target"


# ---------------------------------------------------------------- lookup, label, expand_k


def test_lookup_of_a_cut_off_form_carries_its_own_name():
    p5 = registry.lookup("P@5")
    assert p5.name == "P@5" and p5.family == "retrieval" and p5.label == "P@5"
    assert registry.lookup("AP@10").name == "AP@10"
    assert registry.lookup("P@0") is None and registry.lookup("nope") is None


def test_label_of_an_undeclared_name_is_the_name():
    assert registry.label("RB_llm@judge") == "RB_llm@judge"
    assert registry.label("umbrela_mean") == "UMBRELA"


def test_expand_k_replaces_both_templates_in_order():
    assert registry.expand_k(["P@k", "AP@k", "MRR"], [1, 5]) == ["P@1", "P@5", "AP@1", "AP@5", "MRR"]
    assert registry.expand_k(["MRR", "AP@k"], [10]) == ["MRR", "AP@10"]
    assert registry.expand_k(["p@k", "AP@K"], [3]) == ["p@k", "AP@K"]  # only the exact templates


@pytest.mark.parametrize("k", [0, -3])
def test_expand_k_rejects_non_positive_integers(k):
    with pytest.raises(UserError, match=rf"^trec.k_values must be positive integers, got {k}$"):
        registry.expand_k(["P@k"], [5, k])


def test_expand_k_rejects_non_integers():
    with pytest.raises(UserError, match=r"^trec.k_values must be positive integers, got '5'$"):
        registry.expand_k(["P@k"], ["5"])


# ---------------------------------------------------------------- steps, requirements, fields, scalars


def test_unknown_step_message_lists_every_step():
    with pytest.raises(UserError) as e:
        registry.validate_steps(["algorithmic", "ragass"])
    assert str(e.value) == ("unknown step 'ragass' (did you mean 'ragas'?); steps are " + ", ".join(registry.STEPS))
    assert "steps are algorithmic, idk, ragas, radbench, idk_condition, hmean," in str(e.value)


def test_missing_requirements_are_listed_with_their_steps():
    with pytest.raises(UserError) as e:
        registry.resolve_metrics(["HMean"], ["hmean"])
    assert str(e.value) == ("metric 'HMean' needs RL_F (step ragas), RB_llm (step radbench), "
                            "RB_agg (step algorithmic) to be enabled too")


def test_needs_field_is_true_only_when_a_metric_needs_it():
    assert registry.needs_field(["MRR", "umbrela_mean"], "reference") is False
    assert registry.needs_field(["MRR", "Recall"], "reference") is True
    assert registry.needs_field([], "reference") is False


def test_record_scalar_of_a_per_passage_vector_is_none():
    assert registry.record_scalar("umbrela_scores", [3, 1, 2]) is None
    assert registry.record_scalar("Extractiveness_RougeL", [0.2, 0.7]) == 0.7  # per passage: the best
    assert registry.record_scalar("Recall", [0.2, 0.7]) == 0.2  # per target: the first


def test_a_derived_metric_has_a_derive_function_and_runs_after_what_it_requires():
    """The catalog computes its derived metrics (issue 34): a derive-stage spec without a derive
    function, or another stage's with one, is refused; the run's derived metrics come in
    ``requires`` order, whatever order the run lists them in."""
    with pytest.raises(ValueError, match="derive function"):
        MetricSpec("zz_no_fn", "derive", "custom")
    with pytest.raises(ValueError, match="derive function"):
        MetricSpec("zz_fn", "judge", "custom", derive=lambda d: None)
    order = registry.derived_order(["HMean_idk", "RL_F", "RB_agg_idk", "RL_F_idk", "RB_llm_idk", "RB_agg", "P@5", "MRR"])
    assert order.index("RB_agg") < order.index("RB_agg_idk") < order.index("HMean_idk")
    assert order.index("RL_F_idk") < order.index("HMean_idk") and order.index("RB_llm_idk") < order.index("HMean_idk")
    assert "RL_F" not in order and {"P@5", "MRR"} <= set(order)


def test_a_plugin_that_fails_to_load_fails_every_catalog_call(monkeypatch):
    """ragscale.plugins: the catalog never answers without a plugin that failed to load (a later
    call does not find a catalog that silently lacks its metrics)."""
    from ragscale import plugins

    def broken():
        raise UserError("ragscale plugin 'demo' (demo_module) failed to load: RuntimeError: no")

    monkeypatch.setattr(registry, "_loaded", False)
    monkeypatch.setattr(plugins, "plugin_modules", broken)
    for _ in range(2):
        with pytest.raises(UserError, match="plugin 'demo'"):
            registry.catalog()


def test_derived_metrics_that_require_each_other_are_named_in_a_chain(monkeypatch):
    specs = registry.catalog()
    for name, req in (("zz_a", "zz_b"), ("zz_b", "zz_c"), ("zz_c", "zz_a")):
        monkeypatch.setitem(specs, name, MetricSpec(name, "derive", "custom", requires=(req,), derive=lambda d: None))
    with pytest.raises(ValueError) as e:
        registry.derived_order(["zz_a", "zz_b", "zz_c"])
    assert str(e.value) == "derived metrics require each other: zz_a -> zz_b -> zz_c -> zz_a"


def test_a_panels_verdict_when_nobody_scored_and_on_bad_input():
    from ragscale.metrics.registry import jury_verdict

    assert jury_verdict("RB_llm", [None, []]) == (None, 0)
    assert jury_verdict("umbrela_scores", [None]) == (None, 0)
    assert jury_verdict("umbrela_scores", [[None, None], [None, None]]) == ([None, None], 0)  # a null per passage
    assert jury_verdict("RB_llm", [[None], [None]]) == (None, 0)  # a per-target metric: null, not [null]
    with pytest.raises(ValueError) as e:
        jury_verdict("zz_unknown", [1.0])
    assert str(e.value) == "metric 'zz_unknown' is not in the catalog: no jury for it"
    with pytest.raises(ValueError) as e:
        jury_verdict("umbrela_scores", [[3, 2], [1], [0, 1, 2]])
    assert str(e.value) == "the panel's umbrela_scores values differ in length (2, 1, 3)"
