"""Where the server is and how to reach it: base URL, API key, CA, timeout; from arguments or the environment.

The environment variables are those of the ``attest`` CLI: ``ATTEST_SERVER``, ``ATTEST_API_KEY``,
``ATTEST_CA_CERT``.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

import httpx

from ._version import __version__

DEFAULT_SERVER = "http://127.0.0.1:7700"


@dataclass(frozen=True)
class Settings:
    """Resolved connection settings."""

    base_url: str
    api_key: str | None
    ca_cert: str | None
    timeout: float

    @classmethod
    def resolve(
        cls,
        base_url: str | None,
        api_key: str | None,
        ca_cert: str | os.PathLike[str] | None,
        timeout: float,
    ) -> Settings:
        """Arguments win; what they leave out comes from the environment, then the defaults."""
        url = base_url or os.environ.get("ATTEST_SERVER") or DEFAULT_SERVER
        key = api_key if api_key is not None else os.environ.get("ATTEST_API_KEY") or None
        ca = ca_cert if ca_cert is not None else os.environ.get("ATTEST_CA_CERT") or None
        return cls(url.rstrip("/"), key, os.fspath(ca) if ca is not None else None, timeout)

    def verify(self) -> ssl.SSLContext | bool:
        """httpx's ``verify``: the system's trust store, or a context that trusts this CA (PEM) besides."""
        if self.ca_cert is None:
            return True
        path = Path(self.ca_cert)
        if not path.is_file():
            raise FileNotFoundError(f"ca_cert: no CA certificate at {path}")
        return ssl.create_default_context(cafile=str(path))

    def headers(self) -> dict[str, str]:
        """Headers of every request: the bearer key when there is one."""
        headers = {"user-agent": f"attest-client-python/{__version__}"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers

    def client_kwargs(self) -> dict:
        """Keyword arguments of ``httpx.Client`` / ``httpx.AsyncClient``."""
        return {
            "base_url": self.base_url,
            "headers": self.headers(),
            "verify": self.verify(),
            "timeout": httpx.Timeout(self.timeout),
        }
