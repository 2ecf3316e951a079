"""Operations: statistics, API keys, snapshots, re-embeddings and the cluster's state."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ._base import ApiModel, RequestModel


class RecallEstimate(ApiModel):
    """Recall@k of a replica's dense searches, measured on a sample of them run again exactly."""

    recall: float
    low: float
    high: float
    samples: int
    measured: int = 0
    dropped: int = 0


class SearchTuning(ApiModel):
    """The search setting a replica tuned for its collection's recall target, and what it measured."""

    nprobe: int
    exact_refine: int
    recall: float
    target: float
    reached: bool
    queries: int
    tuned_at_ms: int


class ShardStats(ApiModel):
    """One shard of a collection."""

    shard: int
    live_documents: int = 0
    growing_rows: int = 0
    sealed_rows: int = 0
    sealed_segments: int = 0
    last_seq: int = 0
    rebuilt_segments: list[Any] = Field(default_factory=list)
    disk_bytes: int = 0
    #: The live recall estimate (``None`` before the first sample).
    recall: RecallEstimate | None = None
    #: The setting tuned for the recall target (``None`` before the first tuning, or without a target).
    tuned: SearchTuning | None = None
    #: Times the quantizer was trained again because no setting reached the recall target.
    recall_retrains: int = 0


class CollectionStats(ApiModel):
    """``GET /v1/collections/{name}/stats`` (and the answer of ``maintain``)."""

    collection: str
    shards: list[ShardStats] = Field(default_factory=list)

    @property
    def live_documents(self) -> int:
        """Documents over every shard."""
        return sum(s.live_documents for s in self.shards)


class KeyRequest(RequestModel):
    """Body of ``POST /v1/keys``: scopes (``read``, ``write``, ``admin``), tenants (``*`` = all), optionally
    collections and an expiry (``30d``, ``12h``, ``90m``, ``3600s``)."""

    scopes: list[str]
    tenants: list[str]
    collections: list[str] | None = None
    expires_in: str | None = None


class ApiKey(ApiModel):
    """An API key's record (meta keeps only its hash)."""

    id: str
    scopes: list[str] = Field(default_factory=list)
    tenants: list[str] = Field(default_factory=list)
    collections: list[str] = Field(default_factory=list)
    created_ms: int | None = None
    expires_at_ms: int | None = None
    revoked: bool = False


class CreatedKey(ApiKey):
    """A key just minted: ``key`` is the secret, shown this once."""

    key: str


class SnapshotReplica(ApiModel):
    """One shard replica's files in a snapshot."""

    shard: int
    node_id: int | None = None
    prefix: str | None = None
    bytes: int = 0
    last_seq: int | None = None
    live_documents: int = 0
    manifest_sha256: str | None = None
    #: Of ``bytes``, those not sent because the destination already held them (an earlier snapshot's files).
    skipped_bytes: int = 0


class SnapshotCollection(ApiModel):
    """One collection in a snapshot."""

    name: str
    shards: int
    replication: int | None = None
    replicas: list[SnapshotReplica] = Field(default_factory=list)


class SnapshotManifest(ApiModel):
    """A snapshot's manifest (``<id>/attest-snapshot.json``)."""

    id: str
    format: int | None = None
    created_ms: int | None = None
    checksum: str | None = None
    collections: list[SnapshotCollection] = Field(default_factory=list)
    meta_version: int | None = None
    meta_state_sha256: str | None = None
    #: The key prefix of the content-addressed files (format 2); empty or absent in format 1, whose files are
    #: under each replica's ``prefix``.
    blobs: str | None = None


class ListedSnapshot(ApiModel):
    """A snapshot found in a destination: its manifest, or the ``problem`` that makes it unusable (damaged)."""

    id: str
    manifest: SnapshotManifest | None = None
    problem: str | None = None


class SnapshotRequest(RequestModel):
    """Body of ``POST /v1/snapshots``."""

    destination: str
    id: str | None = None
    collections: list[str] | None = None
    keep: int | None = None


class RestoreRequest(RequestModel):
    """Body of ``POST /v1/snapshots/restore``."""

    source: str
    id: str
    collections: list[str] | None = None
    rename: dict[str, str] | None = None
    force: bool | None = None


class RestoredCollection(ApiModel):
    """A collection a restore made."""

    name: str
    #: Its name in the snapshot (``from`` on the wire).
    from_: str = Field(alias="from")
    shards: int
    replication: int | None = None
    live_documents: int = 0
    bytes: int = 0


class ReplicaProgress(ApiModel):
    """How far one replica's upload of a snapshot has come."""

    collection: str
    shard: int
    bytes: int = 0
    complete: bool = False


class SnapshotProgress(ApiModel):
    """``GET /v1/snapshots/{id}/progress``."""

    id: str
    replicas: list[ReplicaProgress] = Field(default_factory=list)


class ShardTransfer(ApiModel):
    """One replica's transfer in a snapshot job: its upload (create) or its download into a node's staging area
    (restore)."""

    collection: str
    shard: int
    #: The node moving the files (0 until a create picks the replica).
    node_id: int = 0
    #: ``pending``, ``running``, ``done`` or ``failed``.
    state: str
    #: Bytes moved so far.
    bytes: int = 0
    #: Bytes not sent because the destination already held them (an earlier snapshot's files).
    skipped_bytes: int = 0
    #: The replica's bytes in all (0 until its transfer starts).
    total_bytes: int = 0


class SnapshotJob(ApiModel):
    """A snapshot or restore job (``POST /v1/snapshots``, ``POST /v1/snapshots/restore``,
    ``GET /v1/snapshots/jobs/{id}``): it runs on a router after the request that started it, and ends
    ``succeeded`` (with its ``manifest`` or ``restored`` collections), ``failed`` (with its ``error``) or
    ``cancelled``."""

    id: str
    #: ``create`` or ``restore``.
    kind: str
    #: The snapshot's id.
    snapshot: str
    #: The destination (create) or the source (restore).
    location: str
    #: ``running``, ``succeeded``, ``failed`` or ``cancelled``.
    state: str
    cancel_requested: bool = False
    #: The router running it.
    router: str | None = None
    #: Unix ms, meta's clock.
    created_ms: int | None = None
    updated_ms: int | None = None
    transfers: list[ShardTransfer] = Field(default_factory=list)
    error: str | None = None
    #: A succeeded create's manifest.
    manifest: SnapshotManifest | None = None
    #: A succeeded restore's collections.
    restored: list[RestoredCollection] | None = None

    @property
    def running(self) -> bool:
        """It has not ended yet."""
        return self.state == "running"


class ReembedRequest(RequestModel):
    """Body of ``POST /v1/collections/{name}/reembed``."""

    #: The model to embed the collection with: the router's configured embedder or a local model it loads
    #: (``all-minilm-l6-v2``, ``bge-small-en-v1.5``).
    embedder: str


class ShardReembed(ApiModel):
    """One shard's progress in a re-embedding job."""

    shard: int
    #: Live documents the shard held at its last listing.
    documents: int = 0
    #: Documents written to the copy with new vectors (the first pass and the repairs after it).
    copied: int = 0
    #: Of those, written by a pass after the first (what mirroring had missed).
    repaired: int = 0


class ReembedJob(ApiModel):
    """A re-embedding job (``POST /v1/collections/{name}/reembed``, ``GET /v1/reembed/jobs/{id}``): a copy of
    the collection is built with the new model's vectors and index while the collection serves and takes writes,
    then the collection switches to it at once. It ends ``succeeded`` (the collection is embedded with
    ``embedder``), ``failed`` (with its ``error``) or ``cancelled``; in both of the latter the copy is dropped and
    the collection serves as before."""

    id: str
    collection: str
    #: The model the collection is being re-embedded with.
    embedder: str
    #: The model it was embedded with.
    from_embedder: str
    #: The stored name of the copy being built (``collection~tag``; ``copy`` on the wire).
    copy_: str = Field(alias="copy")
    #: ``running``, ``succeeded``, ``failed`` or ``cancelled``.
    state: str
    #: ``copying``, ``comparing`` (repairing what the copy missed), ``switching`` or ``ended``.
    phase: str
    cancel_requested: bool = False
    #: The router running it.
    router: str | None = None
    #: Unix ms, meta's clock.
    created_ms: int | None = None
    updated_ms: int | None = None
    #: Comparison passes run so far (the first copies everything).
    passes: int = 0
    shards: list[ShardReembed] = Field(default_factory=list)
    error: str | None = None

    @property
    def running(self) -> bool:
        """It has not ended yet."""
        return self.state == "running"


class ClusterNode(ApiModel):
    """A node as meta knows it."""

    id: int
    name: str | None = None
    address: str | None = None
    role: str | None = None
    zone: str | None = None
    alive: bool = False
    draining: str | None = None
    last_heartbeat_ms: int | None = None


class ClusterStatus(ApiModel):
    """``GET /v1/cluster``: meta voters and leader, nodes, replica sets and their health, moves under way. The
    nested replica sets are left as JSON objects (``collections``, ``meta``, ``rebalancing``)."""

    leader: int | None = None
    term: int | None = None
    commit_index: int | None = None
    state_version: int | None = None
    voters: list[dict[str, Any]] = Field(default_factory=list)
    meta: list[dict[str, Any]] = Field(default_factory=list)
    nodes: list[ClusterNode] = Field(default_factory=list)
    collections: list[dict[str, Any]] = Field(default_factory=list)
    rebalancing: list[dict[str, Any]] = Field(default_factory=list)
