"""Fixtures of the Python client's tests: real `attest dev` processes on OS-chosen loopback ports (no mocks of
Attest), and a small corpus from data/squad-sample ingested through the client.

The binary: $ATTEST_BIN, else $CARGO_TARGET_DIR/debug/attest, else ~/.cache/attest-target/debug/attest. Processes
are stopped at the end of the session; their stderr is printed when one fails to start.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import attest

REPO = Path(__file__).resolve().parents[3]
CORPUS = REPO / "data" / "squad-sample" / "corpus.jsonl"
START_TIMEOUT_S = 120
ADMIN_KEY = "pyclient-test-admin-key-0123456789"

# Questions with a known outcome on the first 20 paragraphs of the sample (the article "Super Bowl 50").
ANSWERABLE = "Where was Super Bowl 50 played?"
UNANSWERABLE = "Who was the first emperor of the Inca empire?"


def pytest_configure(config):
    # scripts/python-client-test.sh tests the installed wheel: make sure it is not the source tree instead.
    if os.environ.get("ATTEST_PYCLIENT_WHEEL") and "site-packages" not in attest.__file__:
        raise pytest.UsageError(f"attest imported from {attest.__file__}, not from the installed wheel")


def attest_bin() -> Path:
    """The binary under test (never built here)."""
    if os.environ.get("ATTEST_BIN"):
        path = Path(os.environ["ATTEST_BIN"])
    elif os.environ.get("CARGO_TARGET_DIR"):
        path = Path(os.environ["CARGO_TARGET_DIR"]) / "debug" / "attest"
    else:
        path = Path.home() / ".cache" / "attest-target" / "debug" / "attest"
    if not os.access(path, os.X_OK):
        pytest.fail(f"no attest binary at {path}: build it (make build) or set ATTEST_BIN", pytrace=False)
    return path


def wait_until(condition, timeout: float, what: str, interval: float = 0.05):
    """Polls `condition` until it returns something truthy (returned) or `timeout` seconds pass (fails)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}", pytrace=False)
        time.sleep(interval)


class Dev:
    """One `attest dev` on 127.0.0.1 ports the OS chose, over its own data directory."""

    def __init__(self, name: str, root: Path, args: list[str]):
        self.name = name
        self.dir = root / name
        self.dir.mkdir(parents=True)
        self.stderr_path = self.dir / "stderr.log"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [str(attest_bin()), "dev", "--data-dir", str(self.dir / "data"), "--http", "127.0.0.1:0",
             "--grpc", "127.0.0.1:0", "--log-level", "warn", *args],
            stdout=subprocess.PIPE, stderr=self._stderr, cwd=REPO,
        )
        try:
            self.url = self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> str:
        # The first stdout line names the ports: read it (blocking) on a thread, with a deadline.
        first: list[bytes] = []
        reader = threading.Thread(target=lambda: first.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        line = first[0].decode() if first else ""
        # Whatever it prints later is drained, so a full pipe never blocks it.
        threading.Thread(target=lambda: self.proc.stdout.read(), daemon=True).start()
        if "http=" not in line:
            raise RuntimeError(f"attest dev {self.name} did not start: {self.stderr_path.read_text()[-2000:]}")
        url = next(w for w in line.split() if w.startswith("http="))[len("http="):]
        assert url.startswith("http://127.0.0.1:"), line

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"attest dev {self.name} exited: {self.stderr_path.read_text()[-2000:]}")
            try:
                return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(ready, START_TIMEOUT_S, f"attest dev {self.name} /readyz")
        return url

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()


@pytest.fixture(scope="session")
def workdir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="attest-pyclient-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def dev(workdir, tmp_path_factory) -> Iterator[Dev]:
    """`attest dev` with authentication off; snapshot destinations may be any test's `tmp_path` (the server admits
    directory destinations only under its configured roots)."""
    d = Dev("open", workdir, ["--snapshot-root", str(tmp_path_factory.getbasetemp())])
    yield d
    d.stop()


@pytest.fixture(scope="session")
def dev_auth(workdir) -> Iterator[Dev]:
    """`attest dev --admin-key ADMIN_KEY`: every request needs a key."""
    d = Dev("auth", workdir, ["--admin-key", ADMIN_KEY])
    yield d
    d.stop()


@pytest.fixture(scope="session")
def client(dev) -> Iterator[attest.Client]:
    with attest.Client(dev.url) as c:
        yield c


def sample(start: int, stop: int) -> list[dict]:
    """Paragraphs [start, stop) of data/squad-sample/corpus.jsonl (distinct texts: none is a near-duplicate)."""
    with open(CORPUS, encoding="utf-8") as f:
        return [json.loads(line) for line in itertools.islice(f, start, stop)]


@pytest.fixture(scope="session")
def squad(client) -> str:
    """A collection holding the first 20 paragraphs of the sample (Super Bowl 50), ingested by the client."""
    client.create_collection("squad")
    report = client.upload_documents("squad", sample(0, 20), progress=False)
    assert report.accepted == 20 and report.ok, report
    return "squad"


@pytest.fixture(scope="session")
def tenants(client) -> str:
    """A one-shard collection with documents of three tenants and metadata to filter on."""
    client.create_collection("tenants", shards=1)
    docs = [
        {"id": "acme-1", "text": "Acme builds rockets for lunar missions.", "tenant": "acme",
         "metadata": {"lang": "en", "year": 2001}},
        {"id": "acme-2", "text": "Acme tests rocket engines in the desert.", "tenant": "acme",
         "metadata": {"lang": "fr", "year": 1995}},
        {"id": "globex-1", "text": "Globex builds rockets for orbital tourism.", "tenant": "globex",
         "metadata": {"lang": "de", "year": 1999}},
        {"id": "open-1", "text": "Rockets of the default tenant are built in Ohio.",
         "metadata": {"lang": "en", "year": 2010}},
    ]
    assert client.upload_documents("tenants", docs, progress=False).accepted == 4
    return "tenants"


_names = itertools.count()


@pytest.fixture
def fresh(client) -> Iterator[str]:
    """The name of a new empty collection (one shard), dropped after the test."""
    name = f"fresh-{next(_names)}"
    client.create_collection(name, shards=1)
    yield name
    try:
        client.drop_collection(name)
    except attest.NotFoundError:
        pass
