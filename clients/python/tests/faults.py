"""A fault-injecting stand-in in front of a real `attest dev`, for the retry tests only: a loopback HTTP server
that answers the first requests with the faults it was given (a status and a `Retry-After`), then forwards every
request to the real server and relays its answer. It records when each request arrived."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class FaultProxy:
    """``FaultProxy(upstream, [(503, "1"), None, ...])``: the n-th request gets the n-th fault (``None``: it is
    forwarded); once the list is used up every request is forwarded to the real server."""

    def __init__(self, upstream: str, faults: list[tuple[int, str | None] | None]):
        self.upstream = urlparse(upstream)
        self.faults = deque(faults)
        self.arrivals: list[tuple[float, str, str]] = []  # (monotonic time, method, path)
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _handle(self):
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                with proxy.lock:
                    proxy.arrivals.append((time.monotonic(), self.command, self.path))
                    fault = proxy.faults.popleft() if proxy.faults else None
                if fault is not None:
                    status, retry_after = fault
                    code = {429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}.get(status, "INTERNAL")
                    payload = json.dumps({"error": {"code": code, "message": "injected fault"}}).encode()
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    if retry_after is not None:
                        self.send_header("retry-after", retry_after)
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=120)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for k, v in answer.getheaders():
                    if k.lower() not in _HOP_BY_HOP:
                        self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def gaps(self) -> list[float]:
        """Seconds between consecutive requests."""
        times = [t for t, _, _ in self.arrivals]
        return [b - a for a, b in zip(times, times[1:], strict=False)]

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)
