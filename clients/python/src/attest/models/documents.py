"""Documents: ``POST /v1/collections/{name}/documents`` (JSON or NDJSON) and what it answers."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._base import ApiModel


class Document(BaseModel):
    """A document to ingest. Unknown fields are kept and sent: the server refuses them, naming the field, as a
    per-document rejection of a bulk upload."""

    model_config = ConfigDict(extra="allow")

    id: str | int
    text: str
    title: str | None = None
    metadata: dict[str, Any] | None = None
    tenant: str | None = None
    #: A precomputed embedding (the collection's dimension); sent as a JSON batch, NDJSON cannot carry it.
    vector: list[float] | None = None


class Rejection(ApiModel):
    """A document the server did not ingest, and why.

    ``index`` is the document's position in what was given to the call (across every batch of a bulk upload);
    ``id`` its id when it could be read; ``field`` the field the server refused, when it named one; ``line``
    the line of a single NDJSON request (the server's numbering, from 1).
    """

    index: int
    reason: str
    id: str | None = None
    field: str | None = None
    line: int | None = None


class IngestReport(ApiModel):
    """What one ingest request did."""

    accepted: int
    rejected: list[Rejection] = Field(default_factory=list)
    duplicates: int = 0
    chunks: int = 0


class UploadReport(ApiModel):
    """What a bulk upload did, over all its batches. Rejections are returned here, never raised."""

    accepted: int = 0
    rejected: list[Rejection] = Field(default_factory=list)
    duplicates: int = 0
    chunks: int = 0
    #: Requests sent (a batch sent again without a refused document counts again).
    batches: int = 0
    #: Documents given to the upload.
    documents: int = 0

    @property
    def ok(self) -> bool:
        """Every document was accepted."""
        return not self.rejected


class Deleted(ApiModel):
    """Answer of a delete: what was deleted (``deleted``) or dropped (``dropped``)."""

    deleted: str | None = None
    dropped: str | None = None
