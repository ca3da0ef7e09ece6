"""The one line a user reads for a bad override (ragscale.overrides.check_overrides, explain):
the key and value a type error names when the override sets a whole group, keys typed in the
wrong place, options with no close match, Hydra's own groups, and the keys type_problem leaves
to the next rule."""

from __future__ import annotations

import os

import pytest

from ragscale import overrides as ov
from ragscale.errors import UserError

JUDGES = "local, openai, vllm, vllm-cpu"

CASES = [
    (["significance={enabled:maybe}"], "significance.enabled must be true or false, got 'maybe'"),
    (["+significance={enabled:maybe}"], "significance.enabled must be true or false, got 'maybe'"),
    (["cluster={encoder:{num_gpus:x}}"], "cluster.encoder.num_gpus must be a number, got 'x'"),
    (["input.x=3"], "cannot set 'input.x' (ragscale run --help lists the main keys)"),
    (["Xlimit=3"], "unknown key 'Xlimit' (did you mean 'limit'?)"),
    (["nli.num_gpus=1"], "unknown key 'nli.num_gpus' (did you mean 'cluster.nli.num_gpus'?)"),
    (["judge=zzzzzz"], f"unknown judge 'zzzzzz'; available: {JUDGES}"),
    (["+scenario=mtrag", "Xscenario=trec"],
     "scenario given twice: use one +scenario=NAME (-m +scenario=custom,mtrag runs each)"),
    (["limit='a=b',3"],
     "limit='a=b',3 is a sweep: add -m to run one job per value (a list is written limit=['a=b',3])"),
    (["hydra/launcher=zzz"],
     "invalid configuration: In 'hydra/config': Could not find 'hydra/launcher/zzz' (docs/configuration.md)"),
]


@pytest.mark.parametrize("overrides, line", CASES, ids=[" ".join(o) for o, _ in CASES])
def test_a_bad_override_is_one_line(overrides, line):
    with pytest.raises(UserError) as e:
        ov.check_overrides(["+scenario=custom", *overrides])
    assert str(e.value) == line


@pytest.mark.parametrize("key", ["zzz", "judge.zzz", "judge.options.x", "steps.x", "input.x"])
def test_type_problem_is_none_for_a_key_outside_the_schema(key):
    assert ov.type_problem(key, [f"{key}=1"]) is None


def test_a_judge_panel_is_not_described_as_a_list():
    assert ov.type_problem("judge_panel", ["+judge_panel=local-pair", "judge_panel.0.model=x"]) is None
    assert ov.type_problem("judge_panel[0]", ["judge_panel.0.model=x"], "x") is None


def test_every_config_group_has_a_name_in_messages():
    groups = sorted(d for d in os.listdir(ov.CONF_DIR) if os.path.isdir(os.path.join(ov.CONF_DIR, d)))
    assert groups == sorted(ov.GROUP_NOUNS)
    assert set(ov.PLUS_GROUPS) <= set(ov.GROUP_NOUNS)
