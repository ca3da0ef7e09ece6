"""A fake OpenAI-compatible judge endpoint for tests: answers the IDK and underspecified judges
deterministically, and can fail (HTTP 500s, dropped connections, timeouts), refuse connections, be
slow, drip its answers one byte at a time, answer some requests with another content (text that is
no judgement, a megabyte, nested JSON) or fail only the requests a predicate picks."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

IDK_LABELS = ("yes", "partial", "no")
IDK_SCORE = {"yes": 1.0, "partial": 0.5, "no": 0.0}
UNDERSPECIFIED_MARK = "determines whether a given response is asking for clarification"


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: dict, drip_s: float = 0.0) -> None:
    """Answer a request of the fake servers with ``payload`` as JSON (a client that gave up is ignored);
    ``drip_s``: the body is sent one byte every ``drip_s`` seconds (a server that a per-read timeout
    never catches)."""
    data = json.dumps(payload).encode()
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if not drip_s:
            handler.wfile.write(data)
            return
        for i in range(len(data)):
            handler.wfile.write(data[i:i + 1])
            handler.wfile.flush()
            time.sleep(drip_s)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up (timeout)


def idk_label(response: str) -> str:
    """The fake judge's deterministic verdict on a response."""
    return IDK_LABELS[len(response) % 3]


def judge_of(body: dict) -> str:
    """Which judge a chat-completions request is for: the JSON schema's name (constrained), else the prompt."""
    name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
    if name:
        return name
    return "underspecified" if UNDERSPECIFIED_MARK in body["messages"][-1]["content"] else "idk"


def default_content(judge: str, body: dict) -> str:
    """The fake's judgement: IDK's ``idk_label`` of the prompt's response; "no" clarification request."""
    prompt = body["messages"][-1]["content"]
    if judge == "underspecified":
        return json.dumps({"decision": "no", "explanation": "fake"})
    response = prompt.rsplit("[Response]\n", 1)[1].rsplit("\n\n[Output]", 1)[0]
    return json.dumps({"label": idk_label(response)})


class FlakyJudgeServer:
    """An OpenAI-compatible chat-completions server in a thread. The first ``failures``
    requests fail in turn as HTTP 500, a connection closed without an answer, and an answer
    slower than the client's timeout (``hang_s``); later ones answer the IDK judge's JSON,
    ``idk_label`` of the prompt's response (the underspecified judge's: "no").
    ``failures=None``: every request is an HTTP 500. ``listening=False``: the port is bound but
    not listening (every connection is refused) until ``listen()``. ``delay_s``: every answer
    takes that long (a slow judge). ``drip_s``: every answer's body comes one byte every
    ``drip_s`` seconds. ``content(judge, body)``: the answer's content instead of the
    judgement (None: the judgement), e.g. text that is no judgement; may be changed while the
    server runs. ``fail_when(judge, body)``: True answers that request with HTTP 500."""

    def __init__(self, failures: int | None, hang_s: float = 1.5, listening: bool = True, delay_s: float = 0.0,
                 drip_s: float = 0.0, content: Callable[[str, dict], str | None] | None = None,
                 fail_when: Callable[[str, dict], bool] | None = None):
        self.failures, self.hang_s, self.delay_s, self.drip_s = failures, hang_s, delay_s, drip_s
        self.content, self.fail_when = content, fail_when
        self.requests = 0
        self.lock = threading.Lock()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with srv.lock:
                    n = srv.requests
                    srv.requests += 1
                if srv.failures is None or n < srv.failures:
                    mode = 0 if srv.failures is None else n % 3
                    if mode == 1:
                        self.close_connection = True  # hang up without answering
                        return
                    if mode == 2:
                        time.sleep(srv.hang_s)  # the client times out first
                    return self._send(500, {"error": {"message": "simulated outage", "type": "server_error"}})
                judge = judge_of(body) if "messages" in body else "embeddings"
                if srv.fail_when is not None and srv.fail_when(judge, body):
                    return self._send(500, {"error": {"message": "simulated outage", "type": "server_error"}})
                time.sleep(srv.delay_s)
                if judge == "embeddings":  # /v1/embeddings: one small vector per input
                    inputs = body.get("input") or []
                    return self._send(200, {"object": "list", "data": [
                        {"index": i, "embedding": [1.0, float(len(t))]} for i, t in enumerate(inputs)]})
                content = srv.content(judge, body) if srv.content is not None else None
                if content is None:
                    content = default_content(judge, body)
                self._send(200, {"id": f"c{n}", "object": "chat.completion", "model": body.get("model"),
                                 "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                     "role": "assistant", "content": content}}],
                                 "usage": {"prompt_tokens": 100, "completion_tokens": 5}})

            def _send(self, status: int, payload: dict) -> None:
                send_json(self, status, payload, srv.drip_s)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self.httpd.daemon_threads = True
        self.httpd.server_bind()  # the port is ours from here on; connections are refused until listen()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.serving = False
        if listening:
            self.listen()

    def listen(self) -> None:
        self.httpd.server_activate()
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.serving = True

    def close(self) -> None:
        if self.serving:
            self.httpd.shutdown()
        self.httpd.server_close()
