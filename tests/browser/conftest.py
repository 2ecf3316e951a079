"""Fixtures of the console's browser tests: real `attest dev` processes on OS-chosen loopback ports and Debian's
headless Chromium driven by Playwright.

Environment: ATTEST_BIN (the binary, required), ATTEST_CHROMIUM (default /usr/bin/chromium), ATTEST_CONSOLE_SHOTS
(where screenshots go; default a temporary directory), ATTEST_CONSOLE_LOGS (where the logs of a failed run are kept;
default ~/.cache/attest-console-logs). Processes are killed at the end; their logs are kept only when a test failed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
START_TIMEOUT_S = 120


class Dev:
    """One `attest dev` process: its base URL, data directory and log files."""

    def __init__(self, name: str, root: Path, args: list[str], env: dict[str, str] | None = None):
        self.name = name
        self.dir = root / name
        self.dir.mkdir(parents=True)
        self.stderr = open(self.dir / "stderr.log", "wb")
        self.proc = subprocess.Popen(
            [os.environ["ATTEST_BIN"], "dev", "--data-dir", str(self.dir / "data"), "--http", "127.0.0.1:0",
             "--grpc", "127.0.0.1:0", "--log-level", "warn", *args],
            stdout=subprocess.PIPE, stderr=self.stderr, env={**os.environ, **(env or {})}, cwd=REPO)
        self.url = self._wait_listening()

    def _wait_listening(self) -> str:
        # The first stdout line names the ports the OS chose: read it (blocking) with a deadline.
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        text = line[0].decode() if line else ""
        (self.dir / "stdout.log").write_text(text)
        # Whatever it prints later goes on to the log, so a full pipe never blocks it.
        threading.Thread(target=self._drain, daemon=True).start()
        if "listening" not in text:
            self.stop()
            raise RuntimeError(f"attest dev {self.name} did not start; see {self.dir}/stderr.log: "
                               + (self.dir / "stderr.log").read_text()[-2000:])
        http = next(p for p in text.split() if p.startswith("http="))[len("http="):]
        host = urlparse(http)
        assert host.hostname == "127.0.0.1", text
        with urllib.request.urlopen(f"{http}/readyz", timeout=10) as r:
            assert r.status == 200
        return http

    def _drain(self) -> None:
        with open(self.dir / "stdout.log", "ab") as log:
            for chunk in iter(lambda: self.proc.stdout.read1(4096), b""):
                log.write(chunk)
                log.flush()

    def api(self, method: str, path: str, body=None, key: str | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if key:
            req.add_header("Authorization", f"Bearer {key}")
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read() or b"null")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()


def dead_port() -> int:
    """A loopback port nothing listens on: bound by the OS, then released."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def workdir(request):
    root = Path(tempfile.mkdtemp(prefix="attest-console-"))
    yield root
    if request.session.testsfailed:
        keep = Path(os.environ.get("ATTEST_CONSOLE_LOGS", Path.home() / ".cache/attest-console-logs"))
        keep = keep / time.strftime("%Y%m%dT%H%M%S")
        keep.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(root, keep, ignore=shutil.ignore_patterns("data"))
        print(f"\nconsole-test: logs of the failed run kept in {keep}")
    shutil.rmtree(root, ignore_errors=True)


EVAL_REPORT = REPO / "docs/eval/squad-sample.json"


@pytest.fixture(scope="session")
def dev(workdir):
    """`attest dev` with the local embedder: the console's main cluster (open, no key), keeping the committed
    squad-sample eval report as the latest report of the collection `console`."""
    reports = workdir / "eval-reports"
    reports.mkdir()
    shutil.copy(EVAL_REPORT, reports / "console.json")
    # Every search sampled for the live recall estimate, so the stats table has one to show.
    d = Dev("dev", workdir, [], env={
        "ATTEST__ROUTER__EVAL_REPORTS_DIR": str(reports),
        "ATTEST__ENGINE__RECALL_PROBE__SAMPLE_RATE": "1",
        "ATTEST__ENGINE__RECALL_PROBE__CPU_SHARE": "1",
        "ATTEST__ENGINE__RECALL_PROBE__GATHER_MS": "0",
    })
    yield d
    d.stop()


@pytest.fixture(scope="session")
def dev_no_embedder(workdir):
    """`attest dev` whose embedder is a remote service on a dead loopback port: every embedding fails."""
    d = Dev("no-embedder", workdir, ["--embedder-url", f"http://127.0.0.1:{dead_port()}/v1/embeddings"])
    yield d
    d.stop()


ADMIN_KEY = "console-test-admin-key-0123456789"


@pytest.fixture(scope="session")
def dev_auth(workdir):
    """`attest dev` with authentication on."""
    d = Dev("auth", workdir, ["--admin-key", ADMIN_KEY])
    yield d
    d.stop()


@pytest.fixture(scope="session")
def shots():
    out = Path(os.environ.get("ATTEST_CONSOLE_SHOTS") or tempfile.mkdtemp(prefix="attest-console-shots-"))
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=os.environ.get("ATTEST_CHROMIUM", "/usr/bin/chromium"),
                              args=["--no-sandbox"])
        yield b
        b.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "call":
        item.failed_call = outcome.get_result().failed


@pytest.fixture
def page(browser, request, workdir):
    """A fresh tab at 1280 px that fails the test on a JavaScript error or a request to another origin."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    # A refused Content-Security-Policy directive or a failed module load shows only on the console; an API
    # answer of 4xx/5xx is logged there too ("Failed to load resource") and is what some tests provoke.
    pg.on("console", lambda m: problems.append(f"console: {m.text}")
          if m.type == "error" and "Failed to load resource" not in m.text else None)
    pg.on("request", lambda r: None if urlparse(r.url).hostname in ("127.0.0.1", None) or r.url.startswith("data:")
          else problems.append(f"request to another origin: {r.url}"))
    yield pg
    if getattr(request.node, "failed_call", False):
        # What the page showed when the test failed, kept with the logs.
        pg.screenshot(path=str(workdir / f"{request.node.name}.png"), full_page=True)
        (workdir / f"{request.node.name}.txt").write_text(pg.locator("body").inner_text())
    context.close()
    assert not problems, problems
