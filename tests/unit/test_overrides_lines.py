"""Lines ragscale.overrides writes for what Hydra and OmegaConf report: a new key of a mapping
takes exactly one ``+``, an error that no rule knows is one line with the schema's internal
names replaced (an error without text is named by its kind), and the schema is read with
``Any``-typed keys left free and the columns block as its dataclass."""

from __future__ import annotations

from typing import Any

import pytest

from ragscale import overrides as ov
from ragscale.config import RagscaleConf


@pytest.mark.parametrize("override", ["judge.options.x=1", "+judge.options.x=1", "++judge.options.x=1"])
def test_a_new_key_of_a_mapping_is_shown_with_one_plus(override):
    assert ov.key_problem("judge.options.x", override) == "use +judge.options.x=1 (judge.options takes new keys with +)"


def test_a_new_key_of_a_mapping_with_a_plus_is_no_problem():
    assert ov.key_problem("judge.options.x", "+judge.options.x=1", added=True) is None


@pytest.mark.parametrize("exc, line", [
    (ValueError(), "invalid configuration: ValueError (docs/configuration.md)"),
    (RuntimeError(" \n"), "invalid configuration: RuntimeError (docs/configuration.md)"),
    (ValueError("In 'judge/judge_schema': Key 'zzz' not in 'JudgeConf'\n    full_key: judge.zzz"),
     "invalid configuration: In 'judge/the configuration': Key 'zzz' not in the configuration (docs/configuration.md)"),
    (ValueError("Key 'x' is not in struct\n    full_key: RagscaleConf.x"),
     "invalid configuration: Key 'x' is not in struct (docs/configuration.md)"),
    (ValueError("Missing key zzz in ragscale_schema for RagscaleConf"),
     "invalid configuration: Missing key zzz in the configuration for the configuration (docs/configuration.md)"),
    (ValueError("a conference about conformity"),
     "invalid configuration: a conference about conformity (docs/configuration.md)"),
])
def test_an_error_no_rule_knows_is_one_line_without_internal_names(exc, line):
    assert ov.explain(exc, ["+scenario=custom"]) == line


def test_the_schema_leaves_any_typed_keys_free_and_reads_the_columns_block():
    kids = ov._children(RagscaleConf)
    assert kids["input"] is Any
    assert [f for f in ov._children(kids["columns"])][:2] == ["question", "answer"]
