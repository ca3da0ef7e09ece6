"""Answer relevancy with embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint
(``relevancy.embeddings=openai``) against a local server (tests/fake_embeddings.py): the requests,
batching and order by ``index``, the scores against ragas' own code over the same endpoint,
failures as ``null`` with their reason (never a crash), and the config checks (secrets refused,
the encoder not planned). The end-to-end run is tests/integration/test_relevancy_endpoint.py."""

from __future__ import annotations

import base64
import json
import socket
import warnings

import numpy as np
import pytest

pytest.importorskip("httpx")

from fake_embeddings import EmbeddingsServer, hash_vectors  # noqa: E402

from ragscale.actors.embeddings_http import EmbeddingsClient, plan_embeddings  # noqa: E402
from ragscale.actors.encoder import RelevancyActor  # noqa: E402
from ragscale.errors import UserError  # noqa: E402
from ragscale.row import judge_error_entries  # noqa: E402
from rows import worker_row  # noqa: E402 - tests/rows.py

KEY = "sk-test-PLANTED-9d2c4b7a1e3f55"
ENV = "RAGSCALE_TEST_EMB_KEY"
CONF = {"embeddings": "openai", "model": "emb-m", "base_url": None, "api_key_env": ENV, "batch_size": 128,
        "concurrency": 4, "timeout_s": 60.0, "max_attempts": 6, "backoff_s": 1.0, "backoff_max_s": 60.0}


def endpoint(url: str, **kw) -> dict:
    return {"model": "emb-m", "base_url": url, "api_key_env": ENV, "backoff_s": 0.0, "max_attempts": 2,
            "timeout_s": 5.0, **kw}


def refused_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: every connection is refused
    return f"http://127.0.0.1:{port}/v1"


def f32(texts) -> np.ndarray:
    return hash_vectors(texts).astype(np.float32).astype(float)  # what the server sends


def row(question, generated, noncommittal, metrics=None) -> dict:
    d = {"question": question, "generated": generated, "noncommittal": noncommittal, "failed": 0}
    return worker_row(metrics=dict(metrics or {"answer_relevancy": None}),
                      details={"ragas_answer_relevancy": json.dumps(d)})


def mean_cos(q, gs, noncommittal) -> float:
    """ragas' score computed by hand: the mean cosine, times 0 when every generation is noncommittal."""
    cos = [float(np.dot(q, g) / (np.linalg.norm(q) * np.linalg.norm(g))) for g in gs]
    return sum(cos) / len(cos) * (0 if all(noncommittal) else 1)


# -- the client: requests, batching, order ------------------------------------------------


def test_requests_are_model_and_input_list_batched_and_read_by_index(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    texts = ["b", "a", "", "c", "a", "d", "e"]
    with EmbeddingsServer(hash_vectors) as srv:
        c = EmbeddingsClient(**endpoint(srv.url + "/", batch_size=2, concurrency=1))
        vecs, errors = c.embed(texts)
        monkeypatch.setenv(ENV, KEY + "\n")  # read at each call, stripped
        c.embed(["z"])
    assert errors == {}
    bodies = srv.embedding_bodies()
    # unique texts in first-seen order, batch_size at a time; the empty string alone; nothing else
    assert bodies == [{"model": "emb-m", "input": ["b", "a"]}, {"model": "emb-m", "input": ["c", "d"]},
                      {"model": "emb-m", "input": ["e"]}, {"model": "emb-m", "input": [""]},
                      {"model": "emb-m", "input": ["z"]}]
    assert {p for p, _, _ in srv.requests} == {"/v1/embeddings"}
    headers = [h for _, h, _ in srv.requests]
    assert all(h["Content-Type"] == "application/json" for h in headers)
    assert not any("Authorization" in h for h in headers[:4]) and headers[4]["Authorization"] == f"Bearer {KEY}"
    # the server lists its items in reverse order: each vector is its own text's
    for t in set(texts):
        assert np.array_equal(vecs[t], f32([t])[0]), t
    assert c.stats["requests"] == 5 and c.stats["http_errors"] == 0 and c.stats["http_retries"] == 0
    assert KEY not in repr(c) and KEY not in json.dumps(vars(c), default=str)


def test_base64_embeddings_are_read_as_float32():
    def to_b64(p):
        for item in p["data"]:
            item["embedding"] = base64.b64encode(np.asarray(item["embedding"], "<f4").tobytes()).decode()
        return p

    with EmbeddingsServer(hash_vectors, mangle=to_b64) as srv:
        vecs, errors = EmbeddingsClient(**endpoint(srv.url)).embed(["one", "two"])
    assert errors == {} and all(np.array_equal(vecs[t], f32([t])[0]) for t in ("one", "two"))


@pytest.mark.parametrize("mangle, reason", [
    (lambda p: {**p, "data": p["data"][1:]}, "1 embeddings for 2 inputs"),
    (lambda p: {**p, "data": [{**i, "index": 0} for i in p["data"]]}, "missing or repeated index"),
    (lambda p: {**p, "data": [{**i, "index": i["index"] + 1} for i in p["data"]]}, "indices [1, 2] instead of 0..1"),
    (lambda p: {**p, "data": [{"index": i["index"]} for i in p["data"]]}, "without 'embedding'"),
    (lambda p: {**p, "data": [{**i, "embedding": [float("nan")] * 8} for i in p["data"]]}, "non-finite"),
    (lambda p: {**p, "data": [{**i, "embedding": "not base64!"} for i in p["data"]]}, "neither numbers nor base64"),
    (lambda p: {**p, "data": [{**i, "embedding": i["embedding"][: 4 + i["index"]]} for i in p["data"]]},
     "different lengths [4, 5]"),
    (lambda p: {"object": "list"}, "without embeddings"),
])
def test_a_malformed_answer_fails_its_texts_without_retries(mangle, reason):
    with EmbeddingsServer(hash_vectors, mangle=mangle) as srv:
        c = EmbeddingsClient(**endpoint(srv.url))
        vecs, errors = c.embed(["one", "two"])
    assert vecs == {} and set(errors) == {"one", "two"}
    assert errors["one"].startswith(f"openai engine: {srv.url}/embeddings: HTTP 200 ") and reason in errors["one"]
    assert c.stats["requests"] == 1 and c.stats["http_errors"] == 1


def test_retryable_errors_are_retried_then_succeed():
    seen = []

    def fail(body, headers):
        seen.append(1)
        return (503, "busy") if len(seen) <= 2 else None

    with EmbeddingsServer(hash_vectors, fail=fail) as srv:
        c = EmbeddingsClient(**endpoint(srv.url, max_attempts=3))
        vecs, errors = c.embed(["one"])
    assert errors == {} and np.array_equal(vecs["one"], f32(["one"])[0])
    assert (c.stats["requests"], c.stats["http_retries"], c.stats["http_errors"]) == (3, 2, 0)


def test_a_fatal_error_is_not_retried_and_the_key_never_shows(monkeypatch):
    monkeypatch.setenv(ENV, KEY)

    def echo(body, headers):  # a server that quotes the request's credentials back
        return 401, f"invalid key {headers.get('Authorization')}, {json.dumps(KEY)}"

    with EmbeddingsServer(hash_vectors, fail=echo) as srv:
        c = EmbeddingsClient(**endpoint(srv.url, max_attempts=5))
        vecs, errors = c.embed(["one", "two"])
    assert vecs == {} and c.stats["requests"] == 1
    msg = errors["one"]
    assert "HTTP 401" in msg and f"the key comes from ${ENV}: set on this node" in msg and "(1 attempt)" in msg
    assert KEY not in msg and "Bearer ***" in msg


def test_endpoint_down_fails_every_text_after_the_retries():
    url = refused_url()
    c = EmbeddingsClient(**endpoint(url, batch_size=1))
    vecs, errors = c.embed(["one", "two", ""])
    assert vecs == {} and set(errors) == {"one", "two", ""}
    assert all(e.startswith(f"openai engine: {url}/embeddings: ConnectError") and e.endswith("(2 attempts)")
               for e in errors.values())
    assert (c.stats["requests"], c.stats["http_retries"], c.stats["http_errors"]) == (6, 3, 3)


# -- the actor: scores, failures ----------------------------------------------------------

ROWS = [
    ("Where is Ulm?", ["Where is the city of Ulm?", "Which country is Ulm in?", "Is Ulm in Germany?"], [0, 0, 1]),
    ("How do I bake bread?", ["How is bread baked?", "", "What do I need for bread?"], [0, 0, 0]),
    ("What is the fee?", ["What does it cost?", "Is there a fee?", "How much?"], [1, 1, 1]),  # all noncommittal: 0
]


def test_actor_with_an_endpoint_equals_ragas_and_the_hand_computed_score():
    """ragas' ResponseRelevancy scoring, with its default embeddings class (langchain's
    OpenAIEmbeddings in ragas' LangchainEmbeddingsWrapper) pointed at the same endpoint, gives
    the actor's values; so does the mean cosine computed by hand."""
    pytest.importorskip("ragas")
    lc = pytest.importorskip("langchain_openai")
    from ragas.embeddings import LangchainEmbeddingsWrapper
    from ragas.metrics._answer_relevance import ResponseRelevanceOutput, ResponseRelevancy

    with EmbeddingsServer(hash_vectors) as srv:
        actor = RelevancyActor(endpoint=endpoint(srv.url, batch_size=3))
        rows = [row(*r, metrics={"answer_relevancy": None, "RL_F": 0.25}) for r in ROWS]
        counters = actor.process(rows)
        # ragas as evaluate() builds it, token ids off (tiktoken's files are not offline)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            emb = LangchainEmbeddingsWrapper(lc.OpenAIEmbeddings(model="emb-m", base_url=srv.url, api_key="unused",
                                                                 check_embedding_ctx_length=False))
        metric = ResponseRelevancy(embeddings=emb)
        theirs = [metric._calculate_score([ResponseRelevanceOutput(question=g, noncommittal=n) for g, n in zip(gs, ns)],
                                          {"user_input": q}) for q, gs, ns in ROWS]
        ragas_inputs = [b["input"] for b in srv.embedding_bodies()[-2 * len(ROWS):]]
    assert ragas_inputs[:2] == [[ROWS[0][0]], ROWS[0][1]]  # ragas: embed_query, then embed_documents
    texts = sorted({t for q, gs, _ in ROWS for t in (q, *gs)})
    assert "" in texts and len(texts) == 12  # 11 texts in 4 requests of <= 3, the empty string alone
    assert counters == {"encoder_relevancy_texts": len(texts), "encoder_relevancy_requests": 5,
                        "encoder_relevancy_http_retries": 0, "encoder_relevancy_rate_limited": 0,
                        "encoder_relevancy_http_errors": 0, "encoder_relevancy_backoff_s": 0.0}
    for r, (q, gs, ns), t in zip(rows, ROWS, theirs):
        m = r["metrics"]
        assert m["RL_F"] == 0.25 and r["judge_errors"] == []  # the rest of the record kept
        assert m["answer_relevancy"] == pytest.approx(t, abs=1e-12)
        assert m["answer_relevancy"] == pytest.approx(mean_cos(f32([q])[0], f32(gs), ns), abs=1e-12)
    got = [r["metrics"]["answer_relevancy"] for r in rows]
    assert got[0] > 0.5 and got[2] == 0


def test_actor_with_the_endpoint_down_nulls_the_metric_with_its_reason():
    from ragscale.pipeline.stage import process_rows

    url = refused_url()
    actor = RelevancyActor(endpoint=endpoint(url))
    assert actor.encoder is None  # no encoder model loaded for the endpoint
    rows = [row(*r, metrics={"answer_relevancy": None, "RL_F": 0.5}) for r in ROWS]
    rows.append({**row("q?", [], []), "judge_errors": [json.dumps({"judge": "ragas_answer_relevancy", "reason": "x"})]})
    process_rows(actor, "relevancy", rows)  # the pipeline's wrapper: a crash would become a record error
    for r in rows[:3]:
        assert r["error"] is None and r["metrics"] == {"answer_relevancy": None, "RL_F": 0.5}
        (err,) = judge_error_entries(r)
        assert err["judge"] == "ragas_answer_relevancy" and err["stage"] == "relevancy"
        assert err["reason"].startswith(f"engine error: openai engine: {url}/embeddings: ConnectError")
        assert err["reason"].endswith("(2 attempts)")
    assert judge_error_entries(rows[3]) == [{"judge": "ragas_answer_relevancy", "reason": "x"}]  # untouched
    stats = json.loads(rows[0]["stats"])
    # two requests (the texts, the empty string alone), each tried twice
    assert stats["encoder_relevancy_http_errors"] == 2 and stats["encoder_relevancy_requests"] == 4


def test_a_failed_request_nulls_only_the_records_that_need_its_texts():
    bad = ROWS[1][1][2]  # one generated question of the second record

    def fail(body, headers):
        return (400, "input rejected") if bad in body["input"] else None

    with EmbeddingsServer(hash_vectors, fail=fail) as srv:
        rows = [row(*r) for r in ROWS]
        RelevancyActor(endpoint=endpoint(srv.url, batch_size=1)).process(rows)
    got = [r["metrics"]["answer_relevancy"] for r in rows]
    (err,) = judge_error_entries(rows[1])
    assert got[1] is None and 'HTTP 400: {"error": {"message": "input rejected"' in err["reason"]
    q, gs, ns = ROWS[0]
    assert got[0] == pytest.approx(mean_cos(f32([q])[0], f32(gs), ns), abs=1e-12) and rows[0]["judge_errors"] == []
    assert got[2] == 0 and srv.failed == [[bad]]


def test_a_zero_embedding_is_undefined_not_nan():
    def vectors(texts):
        v = hash_vectors(texts)
        v[[i for i, t in enumerate(texts) if t == "Is Ulm in Germany?"]] = 0
        return v

    with EmbeddingsServer(vectors) as srv:
        rows = [row(*ROWS[0])]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no numpy division warning either
            RelevancyActor(endpoint=endpoint(srv.url)).process(rows)
    assert rows[0]["metrics"]["answer_relevancy"] is None
    (err,) = judge_error_entries(rows[0])
    assert err["undefined"] is True and err["stage"] == "relevancy" and "zero length" in err["reason"]


# -- the config: checks before the run --------------------------------------------------------


@pytest.mark.parametrize("change, message", [
    ({"embeddings": "opnai"}, "must be one of encoder, openai, got 'opnai' (did you mean 'openai'?)"),
    ({"model": ""}, "needs relevancy.model"),
    ({"model": "bge-small"}, "set relevancy.base_url to the server's OpenAI-compatible URL"),
    ({"base_url": "ftp://host/v1"}, "relevancy.base_url must be an http(s) URL"),
    # user info is a secret's shape (ragscale.secrets.SHAPES): the one check refuses it first
    ({"base_url": "http://user:pw@host/v1"}, "relevancy.base_url look like secrets (API keys, tokens; not shown)"),
    ({"base_url": "http://host/v1?api-version=2024"}, "must not carry credentials or a query"),
    ({"api_key_env": "not a name", "base_url": "http://h/v1"}, "relevancy.api_key_env must be the NAME of"),
    ({"api_key_env": "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6", "base_url": "http://h/v1"},  # Azure's key shape
     "relevancy.api_key_env look like secrets (API keys, tokens; not shown)"),
    ({"batch_size": 0, "base_url": "http://h/v1"}, "relevancy.batch_size must be >= 1, got 0"),
    ({"timeout_s": "soon", "base_url": "http://h/v1"}, "relevancy.timeout_s must be a number, got 'soon'"),
    ({"model": "text-embedding-3-small"},
     f"environment variable {ENV} (relevancy.api_key_env) is not set; api.openai.com needs an API key"),
])
def test_bad_settings_are_one_line_user_errors(monkeypatch, change, message):
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(UserError) as e:
        plan_embeddings({**CONF, **change})
    assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("key, value, message", [
    ("api_key_env", KEY, "relevancy.api_key_env look like secrets"),
    ("model", KEY, "relevancy.model look like secrets"),
    ("base_url", f"http://h/v1/{KEY}", "relevancy.base_url look like secrets"),
    ("base_url", f"http://h/v1?Authorization=Bearer%20{KEY}", "relevancy.base_url look like secrets"),
    ("base_url", f"http://me:{KEY[3:]}@h/v1", "relevancy.base_url look like secrets"),
])
def test_a_value_that_looks_like_a_secret_is_refused_unshown(key, value, message):
    for used in (True, False):  # refused even when the run has no answer relevancy
        with pytest.raises(UserError) as e:
            plan_embeddings({**CONF, key: value}, used=used)
        assert message in str(e.value) and "not shown" in str(e.value) and KEY[8:20] not in str(e.value)


def test_a_secret_on_the_command_line_or_under_a_secret_name_is_refused():
    from ragscale.secrets import secret_override
    from ragscale.plan import compose

    assert secret_override(f"relevancy.api_key_env={KEY}") == "relevancy.api_key_env"
    assert secret_override(f"relevancy.model={KEY}") == "relevancy.model"
    assert secret_override("relevancy.api_key=anything") == "relevancy.api_key"
    assert secret_override("relevancy.api_key_env=MY_KEY_VAR") is None
    with pytest.raises(Exception, match="api_key"):  # the schema has no place for a key
        compose(["+scenario=ragas", "relevancy.api_key=abc"])


def test_openai_defaults_and_the_returned_arguments(monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    kw = plan_embeddings({**CONF, "model": "text-embedding-ada-002"})
    assert kw == {"model": "text-embedding-ada-002", "base_url": "https://api.openai.com/v1", "api_key_env": ENV,
                  "batch_size": 128, "concurrency": 4, "timeout_s": 60.0, "max_attempts": 6, "backoff_s": 1.0,
                  "backoff_max_s": 60.0}
    assert plan_embeddings({**CONF, "base_url": " http://h:8000/v1/embeddings/ "})["base_url"] == "http://h:8000/v1"
    assert plan_embeddings({**CONF, "embeddings": "encoder"}) == {} == plan_embeddings(CONF, used=False)
    assert EmbeddingsClient(**kw).url == "https://api.openai.com/v1/embeddings"
    assert EmbeddingsClient(**{**kw, "base_url": "https://r.openai.azure.com/openai/v1"})._headers()["api-key"] == KEY


def test_the_plan_graph_and_run_json(monkeypatch):
    """With an endpoint the encoder is not planned for answer relevancy alone, the relevancy
    stage gets the client's arguments and no GPU, the resume fingerprint and run.json name the
    endpoint and model; never the key. The offline default is unchanged."""
    from ragscale.pipeline.graph import build_stages
    from ragscale.plan import compose, plan_run
    from ragscale.provenance import relevancy_embeddings

    monkeypatch.setenv(ENV, KEY)
    offline = plan_run(compose(["+scenario=ragas", "cluster=1xh100"]))
    (st,) = [s for s in build_stages(offline) if s.name == "relevancy"]
    assert offline.relevancy_kwargs == {} and st.kwargs == {"encoder": offline.encoder_kwargs}
    assert st.pool == offline.cluster["encoder"] and st.pool["num_gpus"] > 0
    assert "relevancy_embeddings" not in offline.fingerprint()
    assert relevancy_embeddings(offline)["source"] == "encoder"

    plan = plan_run(compose(["+scenario=ragas", "cluster=1xh100", "relevancy.embeddings=openai",
                             "relevancy.base_url=http://127.0.0.1:9/v1", "relevancy.model=bge-small",
                             f"relevancy.api_key_env={ENV}"]))
    assert plan.encoder_kwargs == {} and "encoder" not in plan.stages  # no encoder for answer relevancy alone
    (st,) = [s for s in build_stages(plan) if s.name == "relevancy"]
    assert st.kwargs == {"endpoint": plan.relevancy_kwargs} and st.pool["num_gpus"] == 0.0
    assert plan.fingerprint()["relevancy_embeddings"] == {"model": "bge-small", "base_url": "http://127.0.0.1:9/v1"}
    assert relevancy_embeddings(plan) == {"source": "openai", "url": "http://127.0.0.1:9/v1/embeddings",
                                          "model": "bge-small", "api_key_env": ENV}
    assert KEY not in json.dumps([plan.relevancy_kwargs, plan.fingerprint(), relevancy_embeddings(plan)])
    # without answer relevancy the endpoint's settings are not used (nor checked)
    other = plan_run(compose(["+scenario=ragas", "metrics.ragas=[RL_F]", "relevancy.embeddings=openai"]))
    assert other.relevancy_kwargs == {} and relevancy_embeddings(other) is None
