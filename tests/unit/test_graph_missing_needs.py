"""The stage graph's check (ragscale.pipeline.graph.check_graph): a stage whose needs no earlier
stage produces is refused in one line naming the stage, every missing need (sorted) and what to do."""

from __future__ import annotations

import pytest

from ragscale.errors import UserError
from ragscale.pipeline.graph import check_graph
from ragscale.stage_kinds import Stage


def test_the_error_names_every_missing_need_and_the_remedy():
    stages = [Stage("judge", object, produces=frozenset({"RL_F"})),
              Stage("derive", object, needs=frozenset({"RL_F", "RB_llm", "Recall", "HHEM"}),
                    produces=frozenset({"HMean"}))]
    with pytest.raises(UserError) as e:
        check_graph(stages, first=frozenset({"Recall"}))
    assert str(e.value) == ("stage derive needs HHEM, RB_llm, which no earlier stage produces "
                            "(enable the metric or step that computes it)")


def test_needs_met_by_the_first_stage_or_earlier_stages_pass():
    check_graph([Stage("a", object, needs=frozenset({"x"}), produces=frozenset({"y"})),
                 Stage("b", object, needs=frozenset({"x", "y"}))], first=frozenset({"x"}))
