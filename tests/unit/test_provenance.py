"""run.json's content (ragscale.provenance.run_info, issue 37): what a user reads to know what a
run did. Each field states one thing: the status the exit code gives, UTC times, timings to the
millisecond, the work counters of each pool by their prefix, the judge's counters per judge, the
config with its secrets redacted, the inputs, and the models of the stages the run had (none for a
stage it did not have), with the versions of the packages that decide the numbers. run.json is built
from the frozen plan alone (issue 34): the config it records is the plan's snapshot, redacted when
``plan_run`` took it, so a secret planted in the config before the plan never reaches it."""

from __future__ import annotations

import datetime as dt

import pytest
from omegaconf import OmegaConf, open_dict

from ragscale.exitcodes import STATUS, of_run
from ragscale.judges import JUDGES
from ragscale.overrides import compose
from ragscale.plan import plan_run
from ragscale.provenance import PACKAGES, judge_work, run_info

STATS = {"time_lexical": 0.12345, "time_judge": 2.0, "encoder_pairs": 3, "encoder_batches": 1, "judge_calls": 2,
         "judge_cache_hits": 1, "judgeby|idk|calls": 1, "judgeby|radbench|calls": 1, "judgeby|radbench|failed": 0,
         "nli_pairs": 4, "records": 9}
RECORDS = {"total": 3, "ok": 3, "errored": 0}


SECRET = "not-a-real-key-1234"
SHAPED = "sk-ragscale-planted-provenance-7c2e4b19af03"  # a key's shape under a name that is not a credential's


def planted(overrides: list[str], secrets: dict | None = None):
    """A composed config with ``secrets`` (dotted key -> value) planted past the command line's
    gate, as a program calling the driver may, BEFORE the plan is made; and its plan."""
    cfg = compose(overrides)
    with open_dict(cfg):
        for key, value in (secrets or {}).items():
            OmegaConf.update(cfg, key, value, force_add=True)
    return cfg, plan_run(cfg)


def run_json(plan, failure: str | None = None, records: dict = RECORDS, stats: dict = STATS) -> dict:
    return run_info(plan, t_start=1_700_000_000.5, failure=failure,
                    timings={"total": 12.34567, "report": 0.0004}, stats=stats,
                    ray_info={"address": "127.0.0.1:6379", "resources": {"CPU": 2.0}, "other": 1}, records=records)


def info(overrides: list[str], failure: str | None = None, records: dict = RECORDS, stats: dict = STATS,
         secrets: dict | None = None) -> dict:
    return run_json(planted(overrides, secrets)[1], failure, records, stats)


@pytest.fixture  # per test, not per module: mutation testing runs a test only where its own calls reach
def mtrag() -> dict:
    # the judge's own settings refuse a key (a judge stage's plan: ragscale.actors.engines.resolve),
    # so the secret goes where nothing of the run reads it, as a program's extra key may
    return info(["+scenario=mtrag"], secrets={"notes.api_key": SECRET, "notes.about": f"made with {SHAPED}"})


def test_times_timings_and_the_ray_cluster(mtrag):
    assert mtrag["started"] == "2023-11-14T22:13:20.500000+00:00"
    finished = dt.datetime.fromisoformat(mtrag["finished"])
    assert finished.tzinfo is not None and finished.utcoffset() == dt.timedelta(0)
    assert abs((dt.datetime.now(dt.timezone.utc) - finished).total_seconds()) < 60
    assert mtrag["timings_s"] == {"total": 12.346, "report": 0.0, "stage_compute": {"lexical": 0.123, "judge": 2.0}}
    assert mtrag["ray"] == {"address": "127.0.0.1:6379", "resources": {"CPU": 2.0}}
    assert mtrag["records"] == RECORDS and mtrag["failure"] is None


def test_the_work_of_each_pool_is_its_prefixed_counters(mtrag):
    assert mtrag["encoder_work"] == {"pairs": 3, "batches": 1}
    assert mtrag["nli_work"] == {"pairs": 4}
    assert mtrag["judge_work"] == {"calls": 2, "cache_hits": 1,
                                   "by_judge": {"idk": {"calls": 1}, "radbench": {"calls": 1, "failed": 0}}}
    assert judge_work({"records": 1}) is None
    bare = info(["+scenario=mtrag"], stats={})
    assert bare["encoder_work"] is bare["judge_work"] is bare["nli_work"] is None
    assert bare["timings_s"]["stage_compute"] == {}


@pytest.mark.parametrize("failure, records", [(None, RECORDS), (None, {"total": 3, "ok": 2, "errored": 1}),
                                              (None, {"total": 3, "ok": 0, "errored": 3}), ("KeyboardInterrupt", RECORDS)])
def test_the_status_is_the_exit_codes(failure, records):
    got = info(["+scenario=custom"], failure=failure, records=records)
    assert got["status"] == STATUS[of_run(failure, records)] and got["failure"] == failure


def test_the_config_is_resolved_with_its_secrets_redacted(mtrag):
    assert mtrag["config"]["notes"] == {"api_key": "***", "about": "made with ***"}
    assert SECRET not in repr(mtrag) and SHAPED not in repr(mtrag)
    assert mtrag["config"]["scenario_name"] == "mtrag"
    assert mtrag["config"]["judge"]["cache_path"].endswith("judge.sqlite")  # resolved: ${ragscale.cache:...}


def test_a_secret_planted_before_the_plan_never_enters_its_snapshot_nor_run_json():
    """The snapshot is redacted when ``plan_run`` takes it: the plan, and run.json built from it
    alone, hold no secret; a change to the config after the plan changes neither."""
    secrets = {"judge.options.api_key": SECRET, "judge.options.organization": SHAPED,
               "judge.options.password": "ragscale-planted-password-e41b"}  # no judge stage: the plan takes them
    cfg, plan = planted(["+scenario=custom", "judge=openai"], secrets)
    assert plan.config["judge"]["options"]["api_key"] == plan.config["judge"]["options"]["password"] == "***"
    assert plan.config["judge"]["options"]["organization"] == "***"
    for secret in secrets.values():
        assert secret not in repr(plan.config) and secret not in repr(plan.options)
    before = run_json(plan)
    with open_dict(cfg):
        cfg.judge.options.api_key = "another-planted-key-0000"
        cfg.scenario_name = "changed"
    after = run_json(plan)
    assert after["config"] == before["config"] and after["config"]["scenario_name"] == "custom"
    text = repr(after)
    assert not any(s in text for s in (*secrets.values(), "another-planted-key-0000"))


def test_inputs_and_versions(mtrag):
    assert mtrag["inputs"] and all(set(f) == {"path", "format", "default_model_id"} for f in mtrag["inputs"])
    assert all(f["path"].endswith(".jsonl") and f["format"] == "jsonl" for f in mtrag["inputs"])
    assert set(mtrag["versions"]) == {*PACKAGES, "python"}
    assert mtrag["ragscale_version"] == mtrag["versions"]["ragscale"]


def test_models_of_the_stages_the_run_has(mtrag):
    m = mtrag["models"]
    enc = m["encoder"]
    assert enc["model"] and enc["num_layers"] and enc["idf"] is False
    assert enc["bertscore_rescaled_with_baseline"] is bool(enc["baseline"])
    judge = m["judge"]
    assert judge["judges"] == ["idk", "ragas_faithfulness", "radbench"]
    assert judge["prompt_versions"] == {j: JUDGES[j].version for j in judge["judges"]}
    assert judge["protocol"] == dict.fromkeys(judge["judges"], "constrained")
    assert judge["engine_options"]["engine"] == judge["engine"] == "llama.cpp"
    assert m["hallucination"] is None and m["judge_panel"] is None and m["answer_relevancy_embeddings"] is None
    custom = info(["+scenario=custom"])["models"]
    assert custom["encoder"] is None and custom["judge"] is None
    trec = info(["+scenario=trec"])["models"]
    assert trec["hallucination"]["model"] == "vectara/hallucination_evaluation_model"
    assert trec["hallucination"]["found"] is (trec["hallucination"]["unavailable"] is None)
    assert trec["judge"]["judges"] == ["umbrela", "nuggets", "citation", "no_answer"]


def test_each_model_entry_names_its_fields_as_docs_outputs_md_lists_them():
    cfg = compose(["+scenario=mtrag", "steps=[algorithmic,idk,hallucination]", "metrics.hallucination=[hhem]"])
    plan = plan_run(cfg)
    m = run_info(plan, t_start=0.0, failure=None, timings={}, stats={}, ray_info={}, records=RECORDS)["models"]
    enc, kw = m["encoder"], plan.encoder_kwargs
    assert enc == {"name": plan.encoder_conf["name"], "model": plan.encoder_conf["model"],
                   "local_path": kw.get("model_path"), "num_layers": plan.encoder_conf["num_layers"],
                   "bertscore_rescaled_with_baseline": bool(plan.baseline), "baseline": plan.baseline, "idf": False,
                   "dtype": kw.get("dtype"), "device": kw.get("device"), "disk_cache_path": kw.get("disk_cache_path")}
    judge, jc = m["judge"], plan.judge_conf
    assert set(judge) == {"name", "engine", "model", "local_path", "engine_options", "judges", "protocol",
                          "prompt_versions", "cache_path"}
    assert (judge["name"], judge["engine"], judge["model"]) == (jc["name"], jc["engine"], jc["model"])
    assert judge["local_path"] == plan.judge_kwargs["engine"].get("model_path")
    assert judge["cache_path"] == plan.judge_kwargs["cache_path"] and judge["judges"] == ["idk"]
    hal = m["hallucination"]
    assert hal == {"model": cfg.hallucination.model, "tokenizer": cfg.hallucination.tokenizer,
                   "found": not plan.nli_unavailable, "unavailable": plan.nli_unavailable,
                   "max_chars": cfg.hallucination.max_chars, "device": (plan.nli_kwargs.get("hhem") or {}).get("device")}


def test_a_panel_member_says_how_each_of_its_metrics_is_combined():
    """A jury combines each metric as the catalog says (majority, median or mean): run.json said
    "median" for every member whatever the metric (issue 35)."""
    panel = info(["+scenario=mtrag", "+judge_panel=local-pair", "panel_metrics=[RB_llm,idk_eval,RL_F]"])
    members = panel["models"]["judge_panel"]
    assert [p["name"] for p in members] == ["smollm2-a", "smollm2-b"]
    for p in members:
        assert p["judges"] == ["idk", "ragas_faithfulness", "radbench"]
        assert p["reduction"] == {"RB_llm": "median", "idk_eval": "majority", "RL_F": "mean"}
