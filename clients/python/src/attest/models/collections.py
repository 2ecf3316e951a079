"""Collections: ``POST/GET /v1/collections``, ``GET/DELETE /v1/collections/{name}``, thresholds."""

from __future__ import annotations

from typing import Any

from ._base import ApiModel, RequestModel


class IndexParams(ApiModel):
    """IVF_PQ parameters of a collection's dense index."""

    nlist: int
    m: int
    nbits: int
    #: Lists probed by a search that names none, until the shards have tuned a setting for ``recall_target``.
    nprobe: int
    #: The recall@10 each shard tunes its search setting to reach; ``None``: ``nprobe`` serves every search.
    recall_target: float | None = None


class Chunking(ApiModel):
    """How documents are cut into chunks."""

    max_tokens: int | None = None
    overlap_tokens: int | None = None
    title_prefix: bool | None = None


class Thresholds(ApiModel):
    """A collection's answer thresholds: below ``min_confidence`` the answer tier abstains (``low_confidence``).
    The other fields are what ``attest eval --sweep`` measured at that threshold (absent when set by hand)."""

    min_confidence: float
    hallucination_budget: float | None = None
    coverage: float | None = None
    hallucination_rate: float | None = None
    data_hash: str | None = None


class EmbedderIdentity(ApiModel):
    """The embedder a collection is embedded by, and only by: its model, weights' sha256 (empty when unknown, as
    for a remote service), dimension, pooling and the instruction put before queries."""

    model: str
    checksum: str = ""
    dimension: int | None = None
    pooling: str = ""
    query_prefix: str = ""


class Collection(ApiModel):
    """A collection as the router describes it."""

    name: str
    shards: int
    replication: int
    dimension: int | None = None
    index: IndexParams | None = None
    seal_threshold: int | None = None
    embedder: str | None = None
    embedder_identity: EmbedderIdentity | None = None
    chunking: Chunking | None = None
    thresholds: Thresholds | None = None


class IndexRequest(RequestModel):
    """Index parameters to create a collection with (any left out: the server's default)."""

    nlist: int | None = None
    m: int | None = None
    nbits: int | None = None
    #: Named alone, it serves every search that names none (no tuning).
    nprobe: int | None = None
    #: 0.5–1; left out: 0.95 unless ``nprobe`` is given.
    recall_target: float | None = None


class CreateCollection(RequestModel):
    """Body of ``POST /v1/collections``."""

    name: str
    shards: int | None = None
    replication: int | None = None
    index: IndexRequest | None = None
    chunking: dict[str, Any] | None = None
    thresholds: Thresholds | None = None
    embedder: str | None = None


class ThresholdsRequest(RequestModel):
    """Body of ``PUT /v1/collections/{name}/thresholds``."""

    min_confidence: float
    hallucination_budget: float | None = None
    coverage: float | None = None
    hallucination_rate: float | None = None
    data_hash: str | None = None
