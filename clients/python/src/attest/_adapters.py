"""What the LangChain and LlamaIndex adapters share: the client an adapter uses when it is not given one."""

from __future__ import annotations

from typing import Any

from .client import Client


def adapter_client(url: str | None, client: Client | None) -> Client:
    """The given client, else a :class:`~attest.Client` of ``url`` (``None``: ``$ATTEST_SERVER``, else
    ``http://127.0.0.1:7700``)."""
    if client is not None:
        if url is not None:
            # Two URLs, one of them silently unused, is the kind of mistake this is here to surface.
            raise ValueError("give url= or client=, not both: the client has its own URL")
        return client
    return Client(url)


def with_adapter_client(data: Any) -> Any:
    """A pydantic adapter's constructor arguments with ``client`` filled in from ``url`` (a ``mode="before"``
    model validator: the field's own default, ``Client()``, would not know the URL)."""
    if isinstance(data, dict) and data.get("url") is not None:
        return {**data, "client": adapter_client(data["url"], data.get("client"))}
    return data
