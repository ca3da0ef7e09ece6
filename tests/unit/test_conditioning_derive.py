"""The derive stage's IDK-conditioned metrics and harmonic means as the catalog declares them
(ragscale.metrics.conditioning, MT-RAG step 5): each reads its own base metric's first target, the
IDK judge (and the underspecified judge for ``*_idk_underspecified``), and MT-RAG's "unknown" IDK
label from the judge's details; a null where a judge it needs has no value."""

from __future__ import annotations

import json

import pytest

from ragscale.metrics.registry import Derivation, lookup


def derive(name: str, metrics: dict, answerability: str | None = "ANSWERABLE", details: dict | None = None):
    return lookup(name).derive(Derivation(metrics, answerability, details))


BASES = {"RB_agg": [0.25, 0.9], "RB_llm": [0.5], "RL_F": [0.75]}  # per-target: the first target counts


@pytest.mark.parametrize("name, base", [("RB_agg_idk", "RB_agg"), ("RB_llm_idk", "RB_llm"), ("RL_F_idk", "RL_F"),
                                        ("RB_agg_idk_underspecified", "RB_agg"),
                                        ("RB_llm_idk_underspecified", "RB_llm"),
                                        ("RL_F_idk_underspecified", "RL_F")])
def test_each_conditioned_metric_reads_its_own_base(name, base):
    first = BASES[base][0]
    assert derive(name, {**BASES, "idk_eval": [0.0], "underspecified_eval": [0.0]}) == [first]
    assert derive(name, {**BASES, "idk_eval": [1.0], "underspecified_eval": [0.0]}) == [0.0]  # an IDK, answerable
    assert derive(name, {**BASES, "idk_eval": [1.0]}, "UNANSWERABLE") == [1.0]
    assert derive(name, {**BASES, "idk_eval": [0.5]}, "CONVERSATIONAL") == [0.0]
    assert derive(name, {**BASES}) is None  # the IDK judge failed
    unknown = {"idk": json.dumps({"label": "unknown"})}  # MT-RAG's first_token_idk found no word: the value kept
    assert derive(name, {**BASES, "idk_eval": [None]}, "UNANSWERABLE", unknown) == [first]
    assert derive(name, {**BASES}, "ANSWERABLE", {"idk": json.dumps({"label": "yes"})}) is None
    assert derive(name, {**BASES}, "ANSWERABLE", {"idk": json.dumps(["unknown"])}) is None
    # with an IDK value, the details are not what decides
    assert derive(name, {**BASES, "idk_eval": [1.0]}, "ANSWERABLE", unknown) == [0.0]


@pytest.mark.parametrize("name", ["RB_agg_idk_underspecified", "RB_llm_idk_underspecified",
                                  "RL_F_idk_underspecified"])
def test_underspecified_records_read_the_underspecified_judge(name):
    assert derive(name, {**BASES, "idk_eval": [1.0], "underspecified_eval": [1.0]}, "UNDERSPECIFIED") == [1.0]
    assert derive(name, {**BASES, "idk_eval": [1.0], "underspecified_eval": [0.0]}, "UNDERSPECIFIED") == [0.0]
    assert derive(name, {**BASES, "idk_eval": [1.0]}, "UNDERSPECIFIED") is None


def test_without_the_underspecified_rule_an_underspecified_record_is_conditioned_as_answerable():
    assert derive("RB_agg_idk", {**BASES, "idk_eval": [0.0], "underspecified_eval": [1.0]}, "UNDERSPECIFIED") == [0.25]
    assert derive("RB_agg_idk", {**BASES, "idk_eval": [1.0], "underspecified_eval": [1.0]}, "UNDERSPECIFIED") == [0.0]


def test_the_harmonic_means_read_their_three_parts():
    parts = {"RL_F": [0.5], "RB_llm": [1.0], "RB_agg": [0.25, 1.0], "RL_F_idk": [1.0], "RB_llm_idk": [0.5],
             "RB_agg_idk": [0.5]}
    assert derive("HMean", parts) == [pytest.approx(3 / (2 + 1 + 4))]
    assert derive("HMean_idk", parts) == [pytest.approx(3 / (1 + 2 + 2))]
    assert derive("HMean", {**parts, "RB_llm": [None]}) is None
    assert derive("HMean", {**parts, "RB_agg": []}) is None
    assert derive("HMean_idk", {**parts, "RL_F_idk": [0.0]}) == [0.0]
