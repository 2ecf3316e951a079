"""Each operation of HTTP API v1 as a :class:`Call`: method, path, body and how to read the answer.

Building requests and reading answers lives here once; :class:`attest.Client` and :class:`attest.AsyncClient`
only send the calls (the one blocking, the other awaiting).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar
from urllib.parse import quote

from .errors import AttestError, ConflictError
from .models import (
    ApiKey,
    AskRequest,
    AskResponse,
    ClusterStatus,
    Collection,
    CollectionStats,
    CreateCollection,
    CreatedKey,
    Deleted,
    IndexRequest,
    KeyRequest,
    ListedSnapshot,
    ReembedJob,
    ReembedRequest,
    RestoredCollection,
    RestoreRequest,
    SearchRequest,
    SearchResponse,
    SnapshotJob,
    SnapshotManifest,
    SnapshotProgress,
    SnapshotRequest,
    ThresholdsRequest,
    Turn,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request and the function that turns its JSON answer into ``T``."""

    method: str
    path: str
    parse: Callable[[Any], T]
    json: Any = None
    content: bytes | None = None
    params: Mapping[str, str] | None = None
    headers: Mapping[str, str] | None = None


def seg(value: str | int) -> str:
    """A path segment, percent-encoded (document ids may hold ``/``, ``#``, spaces)."""
    return quote(str(value), safe="")


def _collection(name: str) -> str:
    return f"/v1/collections/{seg(name)}"


# --- collections --------------------------------------------------------------------------------------------


def create_collection(
    name: str,
    *,
    shards: int | None = None,
    replication: int | None = None,
    index: IndexRequest | Mapping[str, float] | None = None,
    chunking: Mapping[str, Any] | None = None,
    embedder: str | None = None,
) -> Call[Collection]:
    body = CreateCollection(
        name=name,
        shards=shards,
        replication=replication,
        index=IndexRequest.model_validate(index) if index is not None else None,
        chunking=dict(chunking) if chunking is not None else None,
        embedder=embedder,
    )
    return Call("POST", "/v1/collections", Collection.model_validate, json=body.body())


def existing_collection(create: Call[Collection], existing: Collection, conflict: ConflictError) -> Collection:
    """``create_collection(..., exist_ok=True)`` after the server's 409: the collection that exists, when it has
    every setting the create request gave; else a ConflictError naming each difference.

    The server compares the settings a request leaves out too, as their defaults, so a collection made with
    ``shards=1`` conflicts with a bare ``create_collection(name)``; here what the caller did not ask for does
    not matter.
    """
    have = existing.model_dump(mode="json")
    differences = []
    for key, asked in create.json.items():
        if key == "name":
            continue
        if isinstance(asked, dict):
            got_all = have.get(key) or {}
            differences += [
                f"{key}.{sub} {got_all.get(sub)} (asked {value})"
                for sub, value in asked.items()
                if got_all.get(sub) != value
            ]
        elif have.get(key) != asked:
            differences.append(f"{key} {have.get(key)} (asked {asked})")
    if differences:
        raise ConflictError(
            f"collection `{existing.name}` already exists with another configuration: {', '.join(differences)}",
            code=conflict.code,
            status=conflict.status,
            request_id=conflict.request_id,
        )
    return existing


def list_collections() -> Call[list[Collection]]:
    return Call("GET", "/v1/collections", lambda d: [Collection.model_validate(c) for c in d["collections"]])


def get_collection(name: str) -> Call[Collection]:
    return Call("GET", _collection(name), Collection.model_validate)


def drop_collection(name: str) -> Call[Deleted]:
    return Call("DELETE", _collection(name), Deleted.model_validate)


def set_thresholds(name: str, min_confidence: float, **measured: Any) -> Call[Collection]:
    body = ThresholdsRequest(min_confidence=min_confidence, **measured)
    return Call("PUT", f"{_collection(name)}/thresholds", Collection.model_validate, json=body.body())


def clear_thresholds(name: str) -> Call[Collection]:
    return Call("DELETE", f"{_collection(name)}/thresholds", Collection.model_validate)


def stats(name: str) -> Call[CollectionStats]:
    return Call("GET", f"{_collection(name)}/stats", CollectionStats.model_validate)


def maintain(name: str, *, seal: bool = False, compact: bool = False) -> Call[CollectionStats]:
    body = {"seal": seal, "compact": compact}
    return Call("POST", f"{_collection(name)}/maintain", CollectionStats.model_validate, json=body)


def eval_report(name: str) -> Call[dict[str, Any]]:
    return Call("GET", f"{_collection(name)}/eval", dict)


# --- documents, search, ask ---------------------------------------------------------------------------------


def delete_document(collection: str, doc_id: str | int, *, tenant: str | None = None) -> Call[Deleted]:
    params = {"tenant": tenant} if tenant is not None else None
    path = f"{_collection(collection)}/documents/{seg(doc_id)}"
    return Call("DELETE", path, Deleted.model_validate, params=params)


def search(
    collection: str,
    query: str,
    *,
    k: int | None = None,
    lanes: Sequence[str] | str | None = None,
    rrf_k: float | None = None,
    weights: Mapping[str, float] | None = None,
    filter: Mapping[str, Any] | None = None,
    tenant: str | None = None,
    nprobe: int | None = None,
    vector: Sequence[float] | None = None,
) -> Call[SearchResponse]:
    if isinstance(lanes, str):
        lanes = None if lanes == "hybrid" else [lanes]
    body = SearchRequest(
        query=query,
        k=k,
        lanes=list(lanes) if lanes is not None else None,
        rrf_k=rrf_k,
        weights=dict(weights) if weights is not None else None,
        filter=dict(filter) if filter is not None else None,
        tenant=tenant,
        nprobe=nprobe,
        vector=[float(x) for x in vector] if vector is not None else None,
    )
    return Call("POST", f"{_collection(collection)}/search", SearchResponse.model_validate, json=body.body())


HistoryItem = Turn | Mapping[str, str] | tuple[str, str]


def history_turns(history: Sequence[HistoryItem] | None) -> list[Turn] | None:
    """Earlier turns, oldest first, from :class:`Turn`, ``{"role", "content"}`` or ``(role, content)``."""
    if history is None:
        return None
    turns = []
    for item in history:
        if isinstance(item, Turn):
            turns.append(item)
        elif isinstance(item, tuple):
            turns.append(Turn(role=item[0], content=item[1]))
        else:
            turns.append(Turn.model_validate(dict(item)))
    return turns


def ask(
    collection: str,
    question: str,
    *,
    history: Sequence[HistoryItem] | None = None,
    tenant: str | None = None,
    stream: bool = False,
) -> Call[AskResponse]:
    body = AskRequest(question=question, history=history_turns(history), tenant=tenant, stream=stream or None)
    headers = {"accept": "text/event-stream"} if stream else None
    return Call("POST", f"{_collection(collection)}/ask", AskResponse.model_validate, json=body.body(), headers=headers)


# --- keys, snapshots, cluster -------------------------------------------------------------------------------


def create_key(
    scopes: Sequence[str],
    tenants: Sequence[str],
    *,
    collections: Sequence[str] | None = None,
    expires_in: str | None = None,
) -> Call[CreatedKey]:
    body = KeyRequest(
        scopes=list(scopes),
        tenants=list(tenants),
        collections=list(collections) if collections is not None else None,
        expires_in=expires_in,
    )
    return Call("POST", "/v1/keys", CreatedKey.model_validate, json=body.body())


def list_keys() -> Call[list[ApiKey]]:
    return Call("GET", "/v1/keys", lambda d: [ApiKey.model_validate(k) for k in d["keys"]])


def revoke_key(key_id: str) -> Call[ApiKey]:
    return Call("DELETE", f"/v1/keys/{seg(key_id)}", ApiKey.model_validate)


def start_snapshot(
    destination: str,
    *,
    id: str | None = None,
    collections: Sequence[str] | None = None,
    keep: int | None = None,
) -> Call[SnapshotJob]:
    """Answered 202 with the job, running."""
    body = SnapshotRequest(
        destination=destination,
        id=id,
        collections=list(collections) if collections is not None else None,
        keep=keep,
    )
    return Call("POST", "/v1/snapshots", SnapshotJob.model_validate, json=body.body())


def list_snapshots(source: str) -> Call[list[ListedSnapshot]]:
    parse = lambda d: [ListedSnapshot.model_validate(s) for s in d["snapshots"]]  # noqa: E731
    return Call("GET", "/v1/snapshots", parse, params={"from": source})


def snapshot_progress(snapshot_id: str, source: str) -> Call[SnapshotProgress]:
    path = f"/v1/snapshots/{seg(snapshot_id)}/progress"
    return Call("GET", path, SnapshotProgress.model_validate, params={"from": source})


def delete_snapshot(snapshot_id: str, source: str) -> Call[Deleted]:
    return Call("DELETE", f"/v1/snapshots/{seg(snapshot_id)}", Deleted.model_validate, params={"from": source})


def start_restore(
    source: str,
    snapshot_id: str,
    *,
    collections: Sequence[str] | None = None,
    rename: Mapping[str, str] | None = None,
    force: bool = False,
) -> Call[SnapshotJob]:
    """Answered 202 with the job, running."""
    body = RestoreRequest(
        source=source,
        id=snapshot_id,
        collections=list(collections) if collections is not None else None,
        rename=dict(rename) if rename is not None else None,
        force=force or None,
    )
    return Call("POST", "/v1/snapshots/restore", SnapshotJob.model_validate, json=body.body())


def snapshot_job(job_id: str) -> Call[SnapshotJob]:
    return Call("GET", f"/v1/snapshots/jobs/{seg(job_id)}", SnapshotJob.model_validate)


def snapshot_jobs() -> Call[list[SnapshotJob]]:
    return Call("GET", "/v1/snapshots/jobs", lambda d: [SnapshotJob.model_validate(j) for j in d["jobs"]])


def cancel_snapshot_job(job_id: str) -> Call[SnapshotJob]:
    return Call("POST", f"/v1/snapshots/jobs/{seg(job_id)}/cancel", SnapshotJob.model_validate)


def reembed_collection(name: str, embedder: str) -> Call[ReembedJob]:
    """Answered 202 with the job, running."""
    body = ReembedRequest(embedder=embedder)
    return Call("POST", f"{_collection(name)}/reembed", ReembedJob.model_validate, json=body.body())


def reembed_job(job_id: str) -> Call[ReembedJob]:
    return Call("GET", f"/v1/reembed/jobs/{seg(job_id)}", ReembedJob.model_validate)


def reembed_jobs() -> Call[list[ReembedJob]]:
    return Call("GET", "/v1/reembed/jobs", lambda d: [ReembedJob.model_validate(j) for j in d["jobs"]])


def cancel_reembed_job(job_id: str) -> Call[ReembedJob]:
    return Call("POST", f"/v1/reembed/jobs/{seg(job_id)}/cancel", ReembedJob.model_validate)


#: Seconds between two reads of a job (snapshot, restore, re-embedding) being waited for.
JOB_POLL_INTERVAL = 0.2


class _Job(Protocol):
    """What waiting reads of a job (:class:`SnapshotJob`, :class:`ReembedJob`)."""

    @property
    def id(self) -> str: ...

    @property
    def running(self) -> bool: ...


J = TypeVar("J", bound=_Job)


class _Wait(Generic[J]):
    """Waiting for a job to end, for both clients: they send :attr:`call` (which reads the job) and sleep what
    :meth:`pause` says until it says ``None``."""

    #: The job's kind and the client method that stops it, for the error of a wait past its timeout.
    kind: ClassVar[str]
    cancel: ClassVar[str]

    def __init__(self, call: Call[J], timeout: float | None, interval: float) -> None:
        self.call = call
        self.timeout = timeout
        self.interval = interval
        self._deadline = None if timeout is None else time.monotonic() + timeout

    def pause(self, job: J) -> float | None:
        """``None`` once ``job`` has ended; else the seconds to sleep before reading it again."""
        if not job.running:
            return None
        if self._deadline is None:
            return self.interval
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise AttestError(
                f"{self.kind} {job.id} is still running after {self.timeout:g} s (it goes on: "
                f"{self.cancel} stops it)",
                code="DEADLINE_EXCEEDED",
            )
        return min(self.interval, left)


class JobWait(_Wait[SnapshotJob]):
    """Waiting for a snapshot job to end, for both clients: they send :attr:`call` (which reads the job) and
    sleep what :meth:`pause` says until it says ``None``.

    Args:
        job_id: the job.
        timeout: seconds to wait at most (``None``: until it ends); past them :meth:`pause` raises an
            :class:`~attest.errors.AttestError` ``DEADLINE_EXCEEDED`` (the job goes on).
    """

    kind = "snapshot job"
    cancel = "cancel_snapshot_job"

    def __init__(self, job_id: str, timeout: float | None = None, interval: float = JOB_POLL_INTERVAL) -> None:
        super().__init__(snapshot_job(job_id), timeout, interval)


class ReembedWait(_Wait[ReembedJob]):
    """Waiting for a re-embedding job to end, as :class:`JobWait` waits for a snapshot job."""

    kind = "re-embedding job"
    cancel = "cancel_reembed_job"

    def __init__(self, job_id: str, timeout: float | None = None, interval: float = JOB_POLL_INTERVAL) -> None:
        super().__init__(reembed_job(job_id), timeout, interval)


def _succeeded(job: SnapshotJob) -> SnapshotJob:
    """``job`` if it succeeded; an AttestError ``CANCELLED`` or ``ABORTED`` (with the job's error) if not."""
    if job.state == "succeeded":
        return job
    if job.state == "cancelled":
        raise AttestError(f"snapshot job {job.id} ({job.kind} of {job.snapshot}) was cancelled", code="CANCELLED")
    raise AttestError(
        f"snapshot job {job.id} ({job.kind} of {job.snapshot}) {job.state}: {job.error or 'no error given'}",
        code="ABORTED",
    )


def job_manifest(job: SnapshotJob) -> SnapshotManifest:
    """The manifest of an ended create job; raises as :func:`_succeeded`."""
    manifest = _succeeded(job).manifest
    if manifest is None:
        raise AttestError(f"snapshot job {job.id} succeeded without a manifest", code="INTERNAL")
    return manifest


def job_restored(job: SnapshotJob) -> list[RestoredCollection]:
    """The collections of an ended restore job; raises as :func:`_succeeded`."""
    restored = _succeeded(job).restored
    if restored is None:
        raise AttestError(f"snapshot job {job.id} succeeded without its restored collections", code="INTERNAL")
    return restored


def cluster() -> Call[ClusterStatus]:
    return Call("GET", "/v1/cluster", ClusterStatus.model_validate)


def raw(method: str, path: str, *, json: Any = None, params: Mapping[str, str] | None = None) -> Call[Any]:
    return Call(method.upper(), path, lambda d: d, json=json, params=params)
