"""Typed models (pydantic v2) of HTTP API v1's requests and responses."""

from .admin import (
    ApiKey,
    ClusterNode,
    ClusterStatus,
    CollectionStats,
    CreatedKey,
    KeyRequest,
    ListedSnapshot,
    RecallEstimate,
    ReembedJob,
    ReembedRequest,
    ReplicaProgress,
    RestoredCollection,
    RestoreRequest,
    SearchTuning,
    ShardReembed,
    ShardStats,
    ShardTransfer,
    SnapshotCollection,
    SnapshotJob,
    SnapshotManifest,
    SnapshotProgress,
    SnapshotReplica,
    SnapshotRequest,
)
from .ask import (AskDelta, AskSources, Retrieved, AskRequest, AskResponse, Citation, Claim, NearMiss, NearMissSource, Status, Terminology, Turn,
                  Verdict, Verdicts)
from .collections import (
    Chunking,
    Collection,
    CreateCollection,
    EmbedderIdentity,
    IndexParams,
    IndexRequest,
    Thresholds,
    ThresholdsRequest,
)
from .documents import Deleted, Document, IngestReport, Rejection, UploadReport
from .search import Hit, Lane, LaneHit, Lanes, SearchRequest, SearchResponse

__all__ = [
    "ApiKey", "AskDelta", "AskSources", "Retrieved", "AskRequest", "AskResponse", "Chunking", "Citation", "Claim", "NearMiss", "NearMissSource", "ClusterNode",
    "ClusterStatus", "Collection", "CollectionStats", "CreateCollection", "CreatedKey", "Deleted", "Document", "EmbedderIdentity",
    "Hit", "IndexParams", "IndexRequest", "IngestReport", "KeyRequest", "Lane", "LaneHit", "Lanes",
    "ListedSnapshot", "RecallEstimate", "ReembedJob", "ReembedRequest", "Rejection", "ReplicaProgress", "RestoreRequest", "RestoredCollection", "SearchRequest",
    "SearchResponse", "SearchTuning", "ShardReembed", "ShardStats", "ShardTransfer", "SnapshotCollection", "SnapshotJob", "SnapshotManifest",
    "SnapshotProgress", "SnapshotReplica", "SnapshotRequest", "Status", "Terminology", "Thresholds",
    "ThresholdsRequest", "Turn", "UploadReport", "Verdict", "Verdicts",
]
