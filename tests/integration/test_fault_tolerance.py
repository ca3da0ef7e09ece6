"""Fault tolerance on a simulated multi-node Ray cluster (``ray.cluster_utils.Cluster``).

The cluster: a head node without CPUs (this test process is the driver there, and it writes
records.jsonl) and two worker nodes of 2 CPUs that run every task and actor. Each run goes
through the product's own entry point (``ragscale.run.execute``) with the real packaged
encoder (and, for the judge, the packaged SmolLM2 GGUF in llama.cpp), and is compared with
an undisturbed run of the same records:

* a worker node removed mid-run (the one holding the encoder actor): the run completes,
  every record is written exactly once, the non-LLM metrics equal the undisturbed run's;
* the encoder actor's process, then the judge actor's, SIGKILLed mid-run: Ray restarts the
  actor, its batches are retried, same records and metrics (greedy judge: same labels), and
  run.json counts the restart; the control: with ``cluster.encoder.max_restarts=0`` the same
  kill fails the run (so the kill is real and the restarts are what saves it);
* an OpenAI-compatible judge endpoint (a local HTTP server in this file) failing for a
  while (HTTP 500s, dropped connections, timeouts; or nothing listening on its port): the
  engine retries with backoff (and logs that it does) and every judgement arrives; an
  endpoint that always fails (HTTP 500, or connection refused):
  the run finishes, every record is there with a per-record judge error naming the
  endpoint's failure, and its other metrics intact.

The driver SIGKILL + resume case is tests/integration/test_kill_resume.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time

import pytest

from conftest import records_by_key, sample_copies
from fake_judge import IDK_SCORE, FlakyJudgeServer, idk_label

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.own_ray]  # a simulated cluster of its own

COPIES = 4  # the bundled sample (30 records) four times: 120 records
LEXICAL = ("Recall", "RougeL_stemFalse", "Extractiveness_RougeL", "Length", "RB_agg_zero_denominator")
ENCODED = ("BertscoreP", "BertscoreR", "BertKPrec", "RB_agg")  # float sums: equal up to float noise
WORKER = {"num_cpus": 2}
# small batches: many of them, so that a disturbance lands mid-run
SMALL_BATCHES = ("cluster.chunk_size=4", "cluster.encoder.batch_size=4")


# -- cluster, runs, disturbances ----------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(2):
        c.add_node(**WORKER)
    c.wait_for_nodes()
    ray.init(address=c.address)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    path = tmp_path_factory.mktemp("ft-input") / "copies.jsonl"
    return path, sample_copies(path, COPIES)


def run(cluster, inp, out, *overrides: str, code: int = 0) -> tuple[dict, dict]:
    """One evaluation on the cluster through ``ragscale.run.execute``: (records by key, run.json);
    the run must exit with ``code`` (ragscale.exitcodes)."""
    from ragscale.run import compose, execute

    lines: list[str] = []
    args = ["+scenario=mtrag", f"input={inp}", f"output_dir={out}", f"cluster.address={cluster.address}",
            "html_report=false", "print_summary=false", "progress_interval_s=3600", *overrides]
    got = execute(compose(args), printer=lines.append)
    assert got == code, "\n".join(lines)
    with open(out / "run.json") as fh:
        info = json.load(fh)
    return records_by_key(out), info


@pytest.fixture(scope="module")
def baseline(cluster, inputs, tmp_path_factory):
    """The undisturbed run: step 1 (lexical + BERTScore-family metrics) of every record."""
    inp, n = inputs
    recs, info = run(cluster, inp, tmp_path_factory.mktemp("ft-baseline") / "out", "steps=[algorithmic]",
                     *SMALL_BATCHES)
    assert len(recs) == n and info["status"] == "ok"
    return recs


class WhenWritten(threading.Thread):
    """Runs ``action`` once ``out``/records.jsonl holds ``at`` records (mid-run), remembering
    how many it held then; an exception in ``action`` is kept for the test to raise."""

    def __init__(self, out, at: int, action):
        super().__init__(daemon=True)
        self.path, self.at, self.action = out / "records.jsonl", at, action
        self.lines_then: int | None = None
        self.result = None
        self.error: BaseException | None = None
        self.start()

    def _lines(self) -> int:
        try:
            with open(self.path, "rb") as fh:
                return fh.read().count(b"\n")
        except OSError:
            return 0

    def run(self) -> None:
        deadline = time.time() + 600
        while self._lines() < self.at and time.time() < deadline:
            time.sleep(0.02)
        self.lines_then = self._lines()
        try:
            self.result = self.action()
        except BaseException as e:  # noqa: BLE001 - reported by check()
            self.error = e

    def check(self, total: int) -> None:
        self.join(150)
        assert not self.is_alive(), "the disturbance never happened"
        if self.error is not None:
            raise self.error
        assert self.lines_then is not None and self.at <= self.lines_then < total, (
            f"the disturbance did not land mid-run ({self.lines_then}/{total} records written)")


def alive_actor(stage: str, since: float = 0.0, timeout: float = 120) -> dict:
    """GCS's entry of a live Ray Data actor running ``stage`` (its Pid and node), created after
    ``since`` (a time.time(): not a previous run's actor on its way out)."""
    import ray

    deadline = time.time() + timeout
    while time.time() < deadline:
        for a in ray._private.state.actors().values():  # no dashboard here: GCS's actor table
            if (stage in a["ActorClassName"] and a["State"] == "ALIVE" and a.get("Pid")
                    and a.get("StartTime", 0) >= since * 1000):
                return a
        time.sleep(0.05)
    raise AssertionError(f"no live {stage} actor")


def kill_actor(stage: str):
    since = time.time()

    def action() -> dict:
        a = alive_actor(stage, since)
        os.kill(a["Pid"], signal.SIGKILL)  # a crash, not a polite ray.kill
        return a
    return action


def assert_same_non_llm_metrics(recs: dict, baseline: dict, names=LEXICAL + ENCODED) -> None:
    """Each record's non-LLM metrics equal the undisturbed run's: the lexical ones exactly, the
    encoder's up to 1e-6 (a text's embedding can be computed in a different padding group)."""
    worst = 0.0
    for key, rec in recs.items():
        base = baseline[key]["metrics"]
        for name in names:
            if name not in base:
                continue
            got, want = rec["metrics"].get(name), base[name]
            if name in ENCODED and want is not None and got is not None:
                assert len(got) == len(want), (key, name)
                worst = max([worst, *(abs(a - b) for a, b in zip(got, want))])
            else:
                assert got == want, (key, name, got, want)
    assert worst <= 1e-6, f"encoder metrics differ by {worst}"


def assert_every_record_once(recs: dict, info: dict, keys, status: str = "ok") -> None:
    assert set(recs) == set(keys)  # records_by_key already failed on a key written twice
    assert info["status"] == status and info["failure"] is None
    r = info["records"]
    assert r["out"] == r["in"] == r["written_this_run"] == len(keys) and r["missing"] == 0
    assert all(rec["error"] is None for rec in recs.values())


# -- a node lost, an actor killed -----------------------------------------------------------------


def test_worker_node_removed_mid_run(cluster, inputs, baseline, tmp_path):
    """The node holding the encoder actor (with the read/lexical stage fused into it) goes away
    after the first records: Ray restarts the actor on the other node and retries its batches,
    Ray Data re-runs the lost tasks; the run completes with every record once and the same
    metrics."""
    inp, n = inputs

    since = time.time()

    def remove_encoder_node():
        node_id = alive_actor("EncoderActor", since)["Address"]["NodeID"]
        [node] = [w for w in cluster.worker_nodes if w.node_id == node_id]
        cluster.remove_node(node)
        return node_id

    out = tmp_path / "out"
    disturb = WhenWritten(out, 4, remove_encoder_node)
    try:
        recs, info = run(cluster, inp, out, "steps=[algorithmic]", *SMALL_BATCHES)
        disturb.check(n)
    finally:
        disturb.join(60)
        cluster.add_node(**WORKER)  # back to two workers for the next tests
        cluster.wait_for_nodes()
    import ray

    assert disturb.result not in {nd["NodeID"] for nd in ray.nodes() if nd["Alive"]}
    assert_every_record_once(recs, info, baseline)
    assert info["encoder_work"]["actor_restarts"] >= 1
    assert_same_non_llm_metrics(recs, baseline)


def test_encoder_actor_killed_mid_run(cluster, inputs, baseline, tmp_path):
    inp, n = inputs
    out = tmp_path / "out"
    disturb = WhenWritten(out, 4, kill_actor("EncoderActor"))
    recs, info = run(cluster, inp, out, "steps=[algorithmic]", *SMALL_BATCHES)
    disturb.check(n)
    assert_every_record_once(recs, info, baseline)
    assert info["encoder_work"]["actor_restarts"] >= 1
    assert_same_non_llm_metrics(recs, baseline)


def test_judge_actor_killed_mid_run(cluster, inputs, baseline, tmp_path):
    """The llama.cpp judge actor (SmolLM2, greedy) SIGKILLed after its first batch (the slow
    one: later batches reuse the few-shot prefix's KV state, about a second each): the
    restarted actor redoes the lost batches and the judgements equal an undisturbed run's."""
    inp, _ = inputs
    limit = 6
    args = ("steps=[algorithmic,idk]", "metrics.algorithmic=[Recall,RougeL_stemFalse,Length]", f"limit={limit}",
            "cluster.chunk_size=2", "cluster.judge.batch_size=2", "cluster.judge.torch_threads=1")
    calm, calm_info = run(cluster, inp, tmp_path / "calm", *args, f"judge.cache_path={tmp_path / 'calm.sqlite'}")
    out = tmp_path / "out"
    disturb = WhenWritten(out, 2, kill_actor("JudgeActor"))
    recs, info = run(cluster, inp, out, *args, f"judge.cache_path={tmp_path / 'killed.sqlite'}")
    disturb.check(limit)
    assert_every_record_once(recs, info, calm)
    assert info["judge_work"]["actor_restarts"] >= 1 and not calm_info["judge_work"].get("actor_restarts")
    assert_same_non_llm_metrics(recs, baseline, ("Recall", "RougeL_stemFalse", "Length"))
    for key, rec in recs.items():
        assert "idk_eval" in rec["metrics"]
        assert rec["metrics"] == calm[key]["metrics"], key
        assert ([e["reason"] for e in rec["ragscale"]["judge_errors"]]
                == [e["reason"] for e in calm[key]["ragscale"]["judge_errors"]])


# -- a judge endpoint that fails ------------------------------------------------------------------

def refused_url() -> str:
    """A local URL where nothing listens: every connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


ENDPOINT_LIMIT = 12


def judge_openai(url: str, tmp_path, max_attempts: int) -> tuple[str, ...]:
    return ("steps=[algorithmic,idk]", f"limit={ENDPOINT_LIMIT}", *SMALL_BATCHES, "cluster.judge.batch_size=4",
            "judge=openai", "judge.model=fake-judge", f"judge.options.base_url={url}",
            f"judge.options.max_attempts={max_attempts}", "judge.options.backoff_s=0.01",
            "judge.options.backoff_max_s=0.05", "judge.options.timeout_s=0.5", "judge.options.concurrency=4",
            f"judge.cache_path={tmp_path / 'cache.sqlite'}")


def test_judge_endpoint_failing_for_a_while(cluster, inputs, baseline, tmp_path):
    """HTTP 500s, dropped connections and timeouts for the first 9 requests: the engine retries
    with backoff (10 attempts) and every record gets its judgement, no judge error."""
    inp, _ = inputs
    server = FlakyJudgeServer(failures=9)
    try:
        recs, info = run(cluster, inp, tmp_path / "out", *judge_openai(server.url, tmp_path, max_attempts=10))
    finally:
        server.close()
    assert len(recs) == ENDPOINT_LIMIT and set(recs) <= set(baseline)
    assert_every_record_once(recs, info, recs)
    assert server.requests >= ENDPOINT_LIMIT + 9
    for rec in recs.values():
        assert rec["ragscale"]["judge_errors"] == []
        assert rec["metrics"]["idk_eval"] == [IDK_SCORE[idk_label(rec["predictions"][0]["text"])]]
    work = info["judge_work"]
    assert work["prompts"] == work["generations"] == ENDPOINT_LIMIT
    assert any("retries" in k and v >= 9 for k, v in work.items() if k.startswith("http")), work
    assert_same_non_llm_metrics(recs, baseline)


def logged(text: str, timeout: float = 180) -> bool:
    """Whether ``text`` shows up in the cluster's logs (every actor's stderr) within ``timeout`` s."""
    import glob

    import ray

    logs = os.path.join(ray._private.worker._global_node.get_session_dir_path(), "logs")
    deadline = time.time() + timeout
    while time.time() < deadline:
        for path in glob.glob(os.path.join(logs, "worker-*.err")):
            with open(path, errors="replace") as fh:
                if text in fh.read():
                    return True
        time.sleep(0.1)
    return False


def test_judge_endpoint_refusing_for_a_while(cluster, inputs, tmp_path):
    """Nothing listens on the endpoint's port when the run starts: every connection is refused.
    Once the judge actor has logged its first retry (the engine's warning names the endpoint and
    the refusal) the outage lasts 2 s more, then the server starts listening. The engine's backoff
    (up to 30 attempts) rides it out: every record gets its judgement, no judge error, and the
    retries are counted in run.json (the server itself never fails: every retry was a refusal)."""
    inp, _ = inputs
    server = FlakyJudgeServer(failures=0, listening=False)
    seen: list[bool] = []

    def open_later() -> None:
        seen.append(logged(f"openai engine: {server.url}/chat/completions: ConnectError"))
        time.sleep(2.0)
        server.listen()

    opener = threading.Thread(target=open_later, daemon=True)
    opener.start()
    args = [a for a in judge_openai(server.url, tmp_path, max_attempts=30) if not a.startswith("judge.options.backoff")]
    try:
        recs, info = run(cluster, inp, tmp_path / "out", *args, "steps=[idk]", "judge.options.backoff_s=0.25",
                         "judge.options.backoff_max_s=1.0")
        opener.join(200)
        assert seen == [True], "the judge never logged a refused connection"
    finally:
        server.close()
    assert len(recs) == ENDPOINT_LIMIT
    assert_every_record_once(recs, info, recs)
    for rec in recs.values():
        assert rec["ragscale"]["judge_errors"] == []
        assert rec["metrics"]["idk_eval"] == [IDK_SCORE[idk_label(rec["predictions"][0]["text"])]]
    work = info["judge_work"]
    assert work["prompts"] == work["generations"] == server.requests == ENDPOINT_LIMIT
    assert work["http_retries"] >= ENDPOINT_LIMIT, work  # every prompt was refused at least once


@pytest.mark.parametrize("failure", ["http500", "refused"])
def test_judge_endpoint_always_failing(cluster, inputs, baseline, tmp_path, failure):
    """The endpoint never answers (HTTP 500 every time, or nothing listening): after 3 attempts
    per prompt each record gets a judge error naming the failure; the run finishes and every
    record is there with its other metrics, but it does not exit 0: a record whose judge engine
    failed is a failed record, so every record failed (exit 4, docs/exit-codes.md)."""
    inp, _ = inputs
    server = FlakyJudgeServer(failures=None) if failure == "http500" else None
    url = server.url if server else refused_url()
    t0 = time.time()
    try:
        recs, info = run(cluster, inp, tmp_path / "out", *judge_openai(url, tmp_path, max_attempts=3), code=4)
    finally:
        if server:
            server.close()
    assert time.time() - t0 < 300  # small backoff: no long waits
    assert len(recs) == ENDPOINT_LIMIT and set(recs) <= set(baseline)
    assert_every_record_once(recs, info, recs, status="nothing_scored")  # every record's judge failed
    if server:
        assert server.requests == 3 * ENDPOINT_LIMIT  # every prompt tried exactly max_attempts times
    expected = "HTTP 500: " if failure == "http500" else "ConnectError"
    for rec in recs.values():
        assert rec["metrics"]["idk_eval"] is None
        [err] = rec["ragscale"]["judge_errors"]
        assert err["judge"] == "idk", err
        assert err["reason"].startswith(f"engine error: openai engine: {url}/chat/completions: "), err
        assert expected in err["reason"] and err["reason"].endswith("(3 attempts)"), err
    assert info["judge_work"].get("generations", 0) == 0
    assert info["records"]["judge_failed"] == info["records"]["errored"] == ENDPOINT_LIMIT
    assert_same_non_llm_metrics(recs, baseline)


def test_actor_pool_fault_tolerance_options():
    """Null keeps Ray Data's actor defaults (restart always, retry always) and its fusion of the
    read/lexical task into the pool; set values are passed to Ray."""
    from ragscale.pipeline.dataset import actor_pool

    default = actor_pool({"size": 2, "max_restarts": None, "max_task_retries": None}, 8)
    assert "max_restarts" not in default and "max_task_retries" not in default
    set_ = actor_pool({"size": 2, "max_restarts": 0, "max_task_retries": 2}, 8)
    assert set_["max_restarts"] == 0 and set_["max_task_retries"] == 2


def test_without_actor_restarts_the_same_kill_fails_the_run(cluster, inputs, baseline, tmp_path):
    """The control: with ``cluster.encoder.max_restarts=0`` the same SIGKILL fails the run (a
    one-line failure in run.json; the records written before it are kept, once each)."""
    from ragscale.run import compose, execute

    inp, n = inputs
    out = tmp_path / "out"
    disturb = WhenWritten(out, 4, kill_actor("EncoderActor"))
    lines: list[str] = []
    args = ["+scenario=mtrag", f"input={inp}", f"output_dir={out}", f"cluster.address={cluster.address}",
            "html_report=false", "print_summary=false", "steps=[algorithmic]", *SMALL_BATCHES,
            "cluster.encoder.max_restarts=0"]
    assert execute(compose(args), printer=lines.append) == 1
    disturb.check(n)
    with open(out / "run.json") as fh:
        info = json.load(fh)
    recs = records_by_key(out)
    assert info["status"] == "failed" and info["failure"], info["failure"]
    assert 4 <= len(recs) < n and info["records"]["missing"] == n - len(recs)
    assert_same_non_llm_metrics(recs, baseline)
