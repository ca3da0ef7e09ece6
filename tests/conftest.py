"""Shared fixtures. Data in ../shared/data is used where present; tests needing it skip otherwise."""

from __future__ import annotations

import ast
import csv
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("RAGSCALE_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
MTRAG = os.path.join(SHARED, "data", "mtrag")
sys.path.insert(0, os.path.join(ROOT, "scripts"))


# ragscale's cache folder (ragscale/cachedir.py: the judge cache's default file) is a fresh temporary
# folder per test session, so that no test reads the judge answers of another session or of the
# user's own runs. Set before collection; the runs' subprocesses and Ray workers inherit it. The
# requantized judge models (a deterministic conversion, keyed by the source file) stay in the user's
# folder: RAGSCALE_GGUF_CACHE points there.
SESSION_CACHE = pytest.StashKey[str]()


def pytest_configure(config) -> None:
    import tempfile

    from ragscale.cachedir import CACHE_ENV
    from ragscale.weights import gguf_cache_dir

    os.environ.setdefault("RAGSCALE_GGUF_CACHE", gguf_cache_dir())
    config.stash[SESSION_CACHE] = os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="ragscale-test-cache-")


def pytest_unconfigure(config) -> None:
    import shutil

    if SESSION_CACHE in config.stash:
        shutil.rmtree(config.stash[SESSION_CACHE], ignore_errors=True)


# Local git copies of the reference repositories, read by the conformance tests that compare
# ragscale with the references' own code and files. Without one those tests skip with a reason
# that starts with CONFORMANCE; under CI=true they still skip (CI has no network), and the test
# summary lists each of them with what would run it (pytest_terminal_summary below).
ORAG_MIRROR = os.environ.get("RAGSCALE_ORAG_MIRROR", "/work/.mirror/vectara+open-rag-eval/repo")
ORAG_COMMIT = "dfc4175b522d1605d3d53626a141302740b6267c"  # the commit the TREC judges' templates come from
MTRAG_MIRROR = os.environ.get("RAGSCALE_MTRAG_MIRROR", "/work/.mirror/IBM+mt-rag-benchmark/repo")
RAGAS_MIRROR = os.environ.get("RAGSCALE_RAGAS_MIRROR", "/work/.mirror/explodinggradients+ragas/repo")
CONFORMANCE = "conformance:"
_REFERENCES = {  # name -> (local copy, how to provide it)
    "open-rag-eval": (ORAG_MIRROR, "git clone https://github.com/vectara/open-rag-eval DIR (it needs commit "
                                   f"{ORAG_COMMIT[:7]}), then RAGSCALE_ORAG_MIRROR=DIR"),
    "mt-rag-benchmark": (MTRAG_MIRROR, "git clone https://github.com/IBM/mt-rag-benchmark DIR, "
                                       "then RAGSCALE_MTRAG_MIRROR=DIR"),
    "ragas": (RAGAS_MIRROR, "git clone https://github.com/explodinggradients/ragas DIR (it needs tag v0.3.3, "
                            "MT-RAG's pin), then RAGSCALE_RAGAS_MIRROR=DIR"),
}


def reference_source(repo: str, path: str, commit: str = "HEAD", binary: bool = False) -> str | bytes:
    """The text (or bytes) of ``path`` at ``commit`` in the local copy of reference ``repo``
    ("open-rag-eval", "mt-rag-benchmark" or "ragas"), or skip the test saying how to provide the copy."""
    mirror, how = _REFERENCES[repo]
    try:
        out = subprocess.run(["git", "-C", mirror, "show", f"{commit}:{path}"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"{CONFORMANCE} needs {repo}'s {path} at {commit[:7]} in {mirror}; to run it: {how}")
    return out if binary else out.decode()


def load_benchmark(name: str):  # noqa: ANN201 - a module
    """benchmarks/<name>.py as a module, for testing its helpers; the script puts the repository
    and benchmarks/ on sys.path, which is put back as it was."""
    return load_file("benchmarks", name, f"bench_{name}")


def load_script(name: str):  # noqa: ANN201 - a module
    """scripts/<name>.py as a module (the MT-RAG studies' ``study`` functions)."""
    return load_file("scripts", name, name)


def load_file(folder: str, name: str, module: str):  # noqa: ANN201 - a module
    """<folder>/<name>.py of the checkout as module ``module``; sys.path is put back as it was."""
    import importlib.util

    path = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location(module, os.path.join(ROOT, folder, f"{name}.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path[:] = path
    return mod


def unavailable(reason: str) -> None:
    """Skip a test whose tool (a venv, a model, a browser) `make test` installs but which is
    missing here; under CI=true fail instead, since CI must have installed it."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI=true: `make test` must have installed it")
    pytest.skip(reason)


@pytest.fixture
def needs_ppi() -> None:
    """ppi-python (the `calibrate` extra, which `make test` installs), for the calibration tests."""
    try:
        import ppi_py  # noqa: F401
    except ImportError:
        unavailable("ppi-python not installed (pip install 'ragscale[calibrate]')")


# The integration tier's runs (`python -m ragscale.run` subprocesses) share one Ray instance,
# started once with `ray start --head`: each run connects through RAY_ADDRESS (ragscale's init_ray
# honours it, as under `ray job submit`) instead of starting and stopping Ray: about 10 s less
# per run on 2 cores.
# Tests marked `own_ray` keep their own: Ray in the test process (a process keeps the token mode
# of its first Ray connection, and the test process starts token-authenticated local instances
# too), a simulated cluster, a killed driver (Ray Data keeps a dead driver's resource request for
# minutes), .venv-vllm's workers, a key in the driver's environment that the judge actors must
# see (an attached cluster's workers have their node's environment), Ray's logs or its token
# authentication under test.
# RAGSCALE_TEST_SHARED_RAY=0 turns the sharing off.
@pytest.fixture(scope="session")
def shared_ray():
    """``(RAY_ADDRESS, RAY_AUTH_MODE)`` of a Ray instance for the session, or None where it
    could not be started (the runs then start their own)."""
    import shutil
    import socket
    import tempfile

    if os.environ.get("RAGSCALE_TEST_SHARED_RAY", "1") == "0":
        yield None
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="rs-ray-", dir="/tmp")  # short: Ray's socket paths live under it
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    # a loopback-only test instance: no token (each driver is told so through RAY_AUTH_MODE)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    res = subprocess.run([ray_cli, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                          f"--num-cpus={os.cpu_count() or 2}", "--include-dashboard=false", "--disable-usage-stats",
                          f"--temp-dir={temp}"], env=env, capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        print(f"\n[tests] ray start failed, each run starts its own Ray: {res.stderr[-500:]}")
        shutil.rmtree(temp, ignore_errors=True)
        yield None
        return
    try:
        yield f"127.0.0.1:{port}", "disabled"
    finally:
        _stop_ray_under(temp)
        shutil.rmtree(temp, ignore_errors=True)


def _stop_ray_under(temp: str) -> None:
    """Stop the processes whose command line names ``temp`` (the Ray instance started there),
    never another Ray on the machine (``ray stop`` would stop them all)."""
    import time

    for signal, wait in (("-TERM", 15.0), ("-KILL", 5.0)):
        try:
            subprocess.run(["pkill", signal, "-f", temp], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return
        deadline = time.time() + wait
        while time.time() < deadline:
            if subprocess.run(["pgrep", "-f", temp], capture_output=True).returncode != 0:
                return  # none left
            time.sleep(0.2)


@pytest.fixture(autouse=True)
def _runs_share_ray(request):
    """RAY_ADDRESS (and RAY_AUTH_MODE) of ``shared_ray`` for an integration test's duration,
    unless its module is marked ``own_ray``."""
    node = request.node
    if node.get_closest_marker("integration") is None or node.get_closest_marker("own_ray") is not None:
        yield
        return
    shared = request.getfixturevalue("shared_ray")
    if shared is None:
        yield
        return
    saved = {k: os.environ.get(k) for k in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    os.environ["RAY_ADDRESS"], os.environ["RAY_AUTH_MODE"] = shared
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """List the conformance tests that did not run, each with what would run it."""
    skipped = []
    for rep in terminalreporter.stats.get("skipped", []):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        if CONFORMANCE in reason:
            skipped.append((rep.nodeid, reason.split(CONFORMANCE, 1)[1].strip()))
    if skipped:
        terminalreporter.section(f"{len(skipped)} conformance tests not run (no local copy of a reference)")
        for nodeid, reason in skipped:
            terminalreporter.line(f"{nodeid}: {reason}")


def orag_namespace(path: str) -> dict:
    """Execute one open-rag-eval module at ORAG_COMMIT with its package imports stubbed out."""
    src = reference_source("open-rag-eval", path, ORAG_COMMIT)
    tree = ast.parse(src)
    tree.body = [n for n in tree.body if not (isinstance(n, ast.ImportFrom)
                                              and (n.module or "").startswith(("open_rag_eval", "pydantic")))]
    ns: dict = {name: object for name in ("BaseModel", "LLMJudgeModel", "RetrievalMetric", "AugmentedGenerationMetric",
                                          "RetrievalResult", "RAGResult", "AugmentedGenerationResult")}
    exec(compile(tree, path, "exec"), ns)
    return ns


def run_on_records(tmp_path, scenario: str, records: list[dict], *overrides: str, timeout: int = 900,
                   code: int = 0) -> list[dict]:
    """Write ``records`` as JSONL, run ``python -m ragscale.run +scenario=<scenario>`` on them
    (judge cache in tmp_path) and return the output records; a run that does not exit with
    ``code`` (ragscale.exitcodes: 0 every record scored, 3 some failed) fails the test."""
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ragscale.run", f"+scenario={scenario}", f"input={inp}", f"output_dir={out}",
           f"judge.cache_path={tmp_path / 'cache.sqlite'}", *overrides]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == code, res.stdout[-2000:] + res.stderr[-3000:]
    return [json.loads(line) for line in open(out / "records.jsonl")]


def shared_file(name: str) -> str:
    """Path of a file under ../shared/data/mtrag, or skip the test with the reason."""
    path = os.path.join(MTRAG, name)
    if not os.path.exists(path):
        pytest.skip(f"needs ../shared/data/mtrag/{name} (not present in a user's clone)")
    return path


@pytest.fixture
def responses10() -> str:
    return shared_file("responses-10.jsonl")


@pytest.fixture
def mtragun() -> str:
    return shared_file("mtragun-reference.jsonl")


HHEM_WORDS = (
    "Determine if the hypothesis is true given premise ? Premise : Hypothesis . , "
    "Paris capital of France Berlin Germany sky blue green grass water wet cats dogs are animals "
    "The a an and in on it was not"
).split()


def build_tiny_hhem(root):
    """A tiny randomly initialised HHEM-2.1 snapshot (T5ForTokenClassification, 2 labels) and
    its foundation folder (tiny WordLevel tokenizer + T5 config) under ``root``: the layout of
    vectara/hallucination_evaluation_model. Returns (hhem_dir, foundation_dir, reference model)."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForTokenClassification

    from ragscale.metrics.hhem import PROMPT

    foundation = root / "tiny-flan-t5"
    hhem = root / "hallucination_evaluation_model"
    foundation.mkdir()
    hhem.mkdir()

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for w in HHEM_WORDS:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(str(foundation))

    cfg = T5Config(
        vocab_size=len(vocab) + 4, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_decoder_layers=2, num_heads=4,
        feed_forward_proj="gated-gelu", tie_word_embeddings=False, pad_token_id=0, eos_token_id=1,
        decoder_start_token_id=0, num_labels=2,
    )
    cfg.save_pretrained(str(foundation))  # the foundation's config.json (model_type t5)
    torch.manual_seed(0)
    ref = T5ForTokenClassification(cfg).eval()
    assert ref.transformer.encoder.embed_tokens.weight is ref.transformer.shared.weight
    state = {f"t5.{k}": v.detach().clone().contiguous() for k, v in ref.state_dict().items()
             if k != "transformer.encoder.embed_tokens.weight"}  # tied: the published checkpoint keeps `shared` only
    save_file(state, str(hhem / "model.safetensors"))
    (hhem / "config.json").write_text(json.dumps({
        "architectures": ["HHEMv2ForSequenceClassification"],
        "auto_map": {"AutoConfig": "configuration_hhem_v2.HHEMv2Config",
                     "AutoModelForSequenceClassification": "modeling_hhem_v2.HHEMv2ForSequenceClassification"},
        "model_type": "HHEMv2Config",
        "foundation": str(foundation),
        "prompt": PROMPT,
        "id2label": {"0": "hallucinated", "1": "consistent"},
        "label2id": {"hallucinated": 0, "consistent": 1},
        "torch_dtype": "float32",
    }))
    return hhem, foundation, ref


@pytest.fixture(scope="session")
def tiny_hhem(tmp_path_factory):
    """(hhem_dir, foundation_dir, reference model) of a tiny HHEM built for the test session."""
    return build_tiny_hhem(tmp_path_factory.mktemp("hhem"))


def sample_copies(path, copies: int) -> int:
    """Write the bundled MT-RAG sample ``copies`` times to ``path`` as JSONL, task ids
    ``<task_id>#<copy>``; returns the number of records."""
    with open(os.path.join(ROOT, "ragscale", "data", "mtrag_sample.jsonl")) as fh:
        base = [json.loads(line) for line in fh]
    with open(path, "w") as out:
        for i in range(copies):
            for rec in base:
                out.write(json.dumps(dict(rec, task_id=f"{rec['task_id']}#{i}")) + "\n")
    return copies * len(base)


def records_by_key(out_dir) -> dict:
    """record key -> output record of ``out_dir``/records.jsonl; a key written twice fails the test."""
    out: dict = {}
    with open(os.path.join(str(out_dir), "records.jsonl")) as fh:
        for line in fh:
            rec = json.loads(line)
            key = rec["ragscale"]["record_key"]
            assert key not in out, f"record {key} written twice"
            out[key] = rec
    return out


# The lowest share of each judge's prompts whose output must parse with the packaged SmolLM2
# (constrained decoding) in the integration tests: measured on their inputs, then set a little
# below (docs/testing.md). A judge missing here has no floor. RAGSCALE_PARSE_RATES=FILE appends
# the measured rates as JSON lines, to re-measure after a change of model or decoding.
PARSE_FLOORS = {
    # measured 2026-11-25: 1.0 for every judge (prompts per test in brackets); 0.8 lets one of 5+
    # prompts fail, 0.5 one of 2
    "idk": 0.8, "radbench": 0.8, "ragas_faithfulness": 0.8, "underspecified": 0.8,  # [6], [6], [7], [4]
    "ragas_answer_relevancy": 0.8, "umbrela": 0.8, "nuggets": 0.8,  # [6], [2-5], [6]
    "ragas_context_precision": 0.5, "ragas_context_recall": 0.5, "citation": 0.5, "no_answer": 0.5,  # [1-2]
    "taxonomy_retrieval": 0.5, "taxonomy_grounding": 0.5, "taxonomy_generation": 0.5,  # [1-2]
}


def assert_parse_floors(run_dir, judges=None) -> dict[str, float]:
    """Each judge's parse rate in ``run_dir``/run.json (1 - parse failures / prompts) is at
    least its PARSE_FLOORS entry; returns the rates. ``judges``: the judges that must be there."""
    by = json.load(open(os.path.join(str(run_dir), "run.json")))["judge_work"]["by_judge"]
    rates = {j: 1.0 - w.get("parse_failures", 0) / w["prompts"] for j, w in by.items() if w.get("prompts")}
    if os.environ.get("RAGSCALE_PARSE_RATES"):
        with open(os.environ["RAGSCALE_PARSE_RATES"], "a") as fh:
            fh.write(json.dumps({"test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0],
                                 "rates": rates, "prompts": {j: by[j]["prompts"] for j in rates}}) + "\n")
    assert set(judges or ()) <= set(rates), f"judges without prompts: {set(judges) - set(rates)}"
    low = {j: (round(r, 3), PARSE_FLOORS[j]) for j, r in rates.items() if j in PARSE_FLOORS and r < PARSE_FLOORS[j]}
    assert not low, f"parse rate below its floor (rate, floor): {low}"
    return rates


# MT-RAG's four collections as its retrieval script names them (key: the qrels folder)
MTRAG_COLLECTIONS = {"clapnq": "mt-rag-clapnq-elser-512-100-20240503", "govt": "mt-rag-govt-elser-512-100-20240611",
                     "fiqa": "mt-rag-fiqa-beir-elser-512-100-20240501", "cloud": "mt-rag-ibmcloud-elser-512-100-20240502"}


def run_mtrag_retrieval_eval(tmp_path, records, qrels_text):
    """MT-RAG's run_retrieval_eval.py on ``records`` with ``{collection key: BEIR TSV}``, in the layout
    it reads its qrels from; returns (per-query scores, aggregate rows by collection)."""
    here = tmp_path / "scripts" / "evaluation"
    here.mkdir(parents=True)
    for name in ("run_retrieval_eval.py", "judge_utils.py"):
        (here / name).write_text(reference_source("mt-rag-benchmark", f"scripts/evaluation/{name}"))
    for c, text in qrels_text.items():
        folder = tmp_path / "human" / "retrieval_tasks_convid" / c / "qrels"
        folder.mkdir(parents=True)
        (folder / "dev.tsv").write_text(text)
    inp, out = tmp_path / "retrieval.jsonl", tmp_path / "scored.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = subprocess.run([sys.executable, str(here / "run_retrieval_eval.py"), "--input_file", str(inp),
                          "--output_file", str(out)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    theirs = {r["task_id"]: r["retriever_scores"] for r in map(json.loads, open(out))}
    rows = {r["collection"]: r for r in csv.DictReader(open(os.path.splitext(out)[0] + "_aggregate.csv"))}
    return theirs, rows
