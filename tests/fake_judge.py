"""A fake OpenAI-compatible judge endpoint for tests: answers the IDK judge deterministically,
and can fail (HTTP 500s, dropped connections, timeouts), refuse connections, or be slow."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

IDK_LABELS = ("yes", "partial", "no")
IDK_SCORE = {"yes": 1.0, "partial": 0.5, "no": 0.0}


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: dict) -> None:
    """Answer a request of the fake servers with ``payload`` as JSON (a client that gave up is ignored)."""
    data = json.dumps(payload).encode()
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up (timeout)


def idk_label(response: str) -> str:
    """The fake judge's deterministic verdict on a response."""
    return IDK_LABELS[len(response) % 3]


class FlakyJudgeServer:
    """An OpenAI-compatible chat-completions server in a thread. The first ``failures``
    requests fail in turn as HTTP 500, a connection closed without an answer, and an answer
    slower than the client's timeout (``hang_s``); later ones answer the IDK judge's JSON,
    ``idk_label`` of the prompt's response. ``failures=None``: every request is an HTTP 500.
    ``listening=False``: the port is bound but not listening (every connection is refused)
    until ``listen()``. ``delay_s``: every answer takes that long (a slow judge)."""

    def __init__(self, failures: int | None, hang_s: float = 1.5, listening: bool = True, delay_s: float = 0.0):
        self.failures, self.hang_s, self.delay_s = failures, hang_s, delay_s
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
                time.sleep(srv.delay_s)
                prompt = body["messages"][-1]["content"]
                response = prompt.rsplit("[Response]\n", 1)[1].rsplit("\n\n[Output]", 1)[0]
                self._send(200, {"id": f"c{n}", "object": "chat.completion", "model": body["model"],
                                 "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                     "role": "assistant", "content": json.dumps({"label": idk_label(response)})}}],
                                 "usage": {"prompt_tokens": 100, "completion_tokens": 5}})

            def _send(self, status: int, payload: dict) -> None:
                send_json(self, status, payload)

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
