"""Search: ``POST /v1/collections/{name}/search``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from ._base import ApiModel, RequestModel

Lane = Literal["dense", "bm25"]


class SearchRequest(RequestModel):
    """Body of a search. ``lanes`` default to both (hybrid); ``weights`` per lane for the RRF fusion; ``filter``
    on metadata (``{"lang": "en", "year": {"gte": 2000}, "tag": {"in": ["a", "b"]}}``); ``tenant`` must be among
    the API key's tenants; ``nprobe`` overrides the collection's for the dense lane; ``vector`` is the query's own
    embedding (the collection's dimension: the dense lane searches with it instead of embedding ``query``, which
    may then be empty for the dense lane alone). Values are checked by the server (an unknown lane is an
    InvalidArgumentError naming ``lanes``), types here."""

    query: str
    k: int | None = None
    lanes: list[str] | None = None
    rrf_k: float | None = None
    weights: dict[str, float] | None = None
    filter: dict[str, Any] | None = None
    tenant: str | None = None
    nprobe: int | None = None
    vector: list[float] | None = None


class LaneHit(ApiModel):
    """A hit's rank (1 = first) and raw score in one lane."""

    rank: int
    score: float


class Lanes(ApiModel):
    """The lanes that found a hit (a lane that did not is absent)."""

    dense: LaneHit | None = None
    bm25: LaneHit | None = None


class Hit(ApiModel):
    """A chunk found, with its provenance: ``doc_id``, ``chunk_id``, ``title``, ``shard``, lane ranks."""

    chunk_id: str
    doc_id: str
    title: str = ""
    text: str = ""
    score: float
    lanes: Lanes = Field(default_factory=Lanes)
    shard: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metadata", mode="before")
    @classmethod
    def _no_metadata(cls, v: Any) -> Any:
        return {} if v is None else v


class SearchResponse(ApiModel):
    """Hits best first. ``degraded`` with ``missing_shards`` when part of the corpus could not be searched;
    ``fallback_mode`` when the embedder failed and only BM25 answered."""

    hits: list[Hit] = Field(default_factory=list)
    degraded: bool = False
    missing_shards: list[int] = Field(default_factory=list)
    fallback_mode: bool = False
    request_id: str | None = None
    took_ms: float | None = None
