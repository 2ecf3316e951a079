"""The async client: :class:`AsyncClient`, the operations of :class:`attest.Client` awaited.

>>> async with AsyncClient("http://127.0.0.1:7700") as c:
...     hits = (await c.search("docs", "how are writes made durable?")).hits
...     async for delta in await c.ask("docs", "how are writes made durable?", stream=True):
...         print(delta.text)
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, overload

import httpx

from . import _ops as ops
from ._config import Settings
from ._transport import AsyncSender
from .bulk import DEFAULT_BATCH_SIZE, DEFAULT_MAX_BATCH_BYTES, DocumentLike, upload_plan
from .errors import AttestError, ConflictError
from .models import (
    ApiKey,
    AskResponse,
    ClusterStatus,
    Collection,
    CollectionStats,
    CreatedKey,
    Deleted,
    IndexRequest,
    ListedSnapshot,
    ReembedJob,
    RestoredCollection,
    SearchResponse,
    SnapshotJob,
    SnapshotManifest,
    SnapshotProgress,
    UploadReport,
)
from .retry import RetryPolicy
from .stream import AsyncAskStream


class AsyncClient:
    """The async (asyncio, httpx) client of one Attest HTTP endpoint (``attest dev``, a router, or an ingress in
    front of router and answer tier).

    Args:
        base_url: e.g. ``http://127.0.0.1:7700``; default ``$ATTEST_SERVER``, else that address.
        api_key: sent as ``Authorization: Bearer``; default ``$ATTEST_API_KEY`` (none: an open server).
        ca_cert: a PEM file of the CA that signed the server's certificate (a private CA); default
            ``$ATTEST_CA_CERT``, else the system's trust store.
        timeout: seconds for each request.
        retry: when to retry (default :class:`~attest.retry.RetryPolicy`: 429 and 503 up to 4 times, honouring
            ``Retry-After``).

    Errors are raised as :class:`~attest.errors.AttestError` (with ``code``, ``field``, ``status``).
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        ca_cert: str | os.PathLike[str] | None = None,
        timeout: float = 120.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.settings = Settings.resolve(base_url, api_key, ca_cert, timeout)
        self._http = httpx.AsyncClient(**self.settings.client_kwargs())
        self._sender = AsyncSender(self._http, retry or RetryPolicy())

    @property
    def base_url(self) -> str:
        return self.settings.base_url

    async def aclose(self) -> None:
        """Closes the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def request(
        self, method: str, path: str, *, json: Any = None, params: Mapping[str, str] | None = None
    ) -> Any:
        """Any route of the API (``path`` from ``/v1/...``): its JSON answer, or an AttestError."""
        return await self._sender.run(ops.raw(method, path, json=json, params=params))

    async def ready(self) -> bool:
        """The server answers ``/readyz`` with 200."""
        try:
            return (await self._http.get("/readyz")).status_code == 200
        except httpx.TransportError:
            return False

    # --- collections ----------------------------------------------------------------------------------------

    async def create_collection(
        self,
        name: str,
        *,
        shards: int | None = None,
        replication: int | None = None,
        index: IndexRequest | Mapping[str, float] | None = None,
        chunking: Mapping[str, Any] | None = None,
        embedder: str | None = None,
        exist_ok: bool = False,
    ) -> Collection:
        """Creates a collection (admin). ``index``: ``{nlist, m, nbits, nprobe, recall_target}``; left out: the
        defaults (``recall_target`` 0.95 unless ``nprobe`` is given: each shard tunes its search setting to reach it).
        ``embedder``: the model that embeds its text (a local model id, e.g. ``"bge-small-en-v1.5"``); left out: the
        router's configured embedder.

        The same request again answers the collection; one under an existing name with other settings raises
        ConflictError, unless ``exist_ok``: then the existing collection is answered if it has the settings given
        here (those left out do not matter), and a ConflictError names each one it has otherwise."""
        create = ops.create_collection(
            name, shards=shards, replication=replication, index=index, chunking=chunking, embedder=embedder
        )
        try:
            return await self._sender.run(create)
        except ConflictError as conflict:
            if not exist_ok or conflict.code != "ALREADY_EXISTS":
                raise
            return ops.existing_collection(create, await self._sender.run(ops.get_collection(name)), conflict)

    async def list_collections(self) -> list[Collection]:
        """The collections this key may see."""
        return await self._sender.run(ops.list_collections())

    async def get_collection(self, name: str) -> Collection:
        """One collection; NotFoundError if there is none."""
        return await self._sender.run(ops.get_collection(name))

    async def drop_collection(self, name: str) -> Deleted:
        """Drops a collection and every document in it (admin)."""
        return await self._sender.run(ops.drop_collection(name))

    async def stats(self, collection: str) -> CollectionStats:
        """Per-shard statistics."""
        return await self._sender.run(ops.stats(collection))

    async def maintain(self, collection: str, *, seal: bool = False, compact: bool = False) -> CollectionStats:
        """Seals the growing segments and/or compacts now (admin); answers the statistics after."""
        return await self._sender.run(ops.maintain(collection, seal=seal, compact=compact))

    async def set_thresholds(self, collection: str, min_confidence: float, **measured: Any) -> Collection:
        """Sets the collection's answer threshold (admin): the answer tier abstains below ``min_confidence``."""
        return await self._sender.run(ops.set_thresholds(collection, min_confidence, **measured))

    async def clear_thresholds(self, collection: str) -> Collection:
        """Clears the collection's answer thresholds (admin)."""
        return await self._sender.run(ops.clear_thresholds(collection))

    async def eval_report(self, collection: str) -> dict[str, Any]:
        """The collection's latest ``attest eval --json`` report kept by the router; NotFoundError if none."""
        return await self._sender.run(ops.eval_report(collection))

    # --- documents ------------------------------------------------------------------------------------------

    async def upload_documents(
        self,
        collection: str,
        documents: Iterable[DocumentLike],
        *,
        tenant: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        progress: bool | Mapping[str, Any] = True,
    ) -> UploadReport:
        """Uploads documents in batches with a progress bar (tqdm; ``progress`` False hides it, a mapping is
        passed to tqdm). Documents are :class:`~attest.models.Document` or mappings ``{id, text, title?,
        metadata?, tenant?, vector?}``; ``tenant`` fills in those without one. Rejected documents are returned in
        the report with their index and id, never raised."""
        plan = upload_plan(
            collection,
            documents,
            tenant=tenant,
            batch_size=batch_size,
            max_batch_bytes=max_batch_bytes,
            progress=progress,
        )
        try:
            call = next(plan)
            while True:
                try:
                    outcome: Any = await self._sender.run(call)
                except AttestError as e:
                    outcome = e
                call = plan.send(outcome)
        except StopIteration as done:
            return done.value

    async def delete_document(self, collection: str, doc_id: str | int, *, tenant: str | None = None) -> Deleted:
        """Deletes every chunk of a document; NotFoundError if it does not exist."""
        return await self._sender.run(ops.delete_document(collection, doc_id, tenant=tenant))

    # --- search and ask -------------------------------------------------------------------------------------

    async def search(
        self,
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
    ) -> SearchResponse:
        """Hybrid search: ``lanes`` ``["dense", "bm25"]`` (default both, or ``"dense"``/``"bm25"`` alone),
        ``weights`` per lane for RRF, ``filter`` on metadata, ``tenant`` among the key's, ``nprobe`` for the
        dense index, ``vector`` the query's own embedding (then ``query`` may be ``""`` for ``lanes="dense"``)."""
        return await self._sender.run(
            ops.search(
                collection, query, k=k, lanes=lanes, rrf_k=rrf_k, weights=weights, filter=filter, tenant=tenant,
                nprobe=nprobe, vector=vector,
            )
        )

    @overload
    async def ask(
        self,
        collection: str,
        question: str,
        *,
        history: Sequence[ops.HistoryItem] | None = ...,
        tenant: str | None = ...,
        stream: Literal[False] = ...,
    ) -> AskResponse: ...

    @overload
    async def ask(
        self,
        collection: str,
        question: str,
        *,
        history: Sequence[ops.HistoryItem] | None = ...,
        tenant: str | None = ...,
        stream: Literal[True],
    ) -> AsyncAskStream: ...

    async def ask(
        self,
        collection: str,
        question: str,
        *,
        history: Sequence[ops.HistoryItem] | None = None,
        tenant: str | None = None,
        stream: bool = False,
    ) -> AskResponse | AsyncAskStream:
        """A grounded answer with citations and verdicts, or an abstention (``status``, ``reason``,
        ``suggestions``). ``history``: earlier turns, oldest first (``(role, content)``, ``{"role", "content"}``
        or :class:`~attest.models.Turn`). With ``stream=True``, an :class:`~attest.stream.AsyncAskStream` to iterate
        for the deltas; its ``response`` is the final answer."""
        call = ops.ask(collection, question, history=history, tenant=tenant, stream=stream)
        if stream:
            return AsyncAskStream(lambda: self._sender.send(call, stream=True))
        return await self._sender.run(call)

    # --- keys, snapshots, re-embeddings, cluster ------------------------------------------------------------

    async def create_key(
        self,
        scopes: Sequence[str],
        tenants: Sequence[str],
        *,
        collections: Sequence[str] | None = None,
        expires_in: str | None = None,
    ) -> CreatedKey:
        """Mints an API key (admin); its secret is ``.key``, shown this once."""
        return await self._sender.run(ops.create_key(scopes, tenants, collections=collections, expires_in=expires_in))

    async def list_keys(self) -> list[ApiKey]:
        """The keys within this key's grant (admin)."""
        return await self._sender.run(ops.list_keys())

    async def revoke_key(self, key_id: str) -> ApiKey:
        """Revokes a key (admin): every router refuses it within seconds."""
        return await self._sender.run(ops.revoke_key(key_id))

    async def create_snapshot(
        self,
        destination: str,
        *,
        id: str | None = None,
        collections: Sequence[str] | None = None,
        keep: int | None = None,
        timeout: float | None = None,
    ) -> SnapshotManifest:
        """Snapshots collections (default all) to a directory every node reaches or ``s3://bucket/prefix``
        (``keep``: then delete the oldest snapshots there beyond this many), waiting for the job to end: its
        manifest, or an AttestError ``ABORTED`` (the job failed; its message has the job's id and error) or
        ``CANCELLED``. ``timeout``: seconds to wait at most (``DEADLINE_EXCEEDED``; the job goes on)."""
        job = await self.start_snapshot(destination, id=id, collections=collections, keep=keep)
        return ops.job_manifest(await self.wait_snapshot_job(job.id, timeout=timeout))

    async def start_snapshot(
        self,
        destination: str,
        *,
        id: str | None = None,
        collections: Sequence[str] | None = None,
        keep: int | None = None,
    ) -> SnapshotJob:
        """Starts a snapshot as :meth:`create_snapshot` does, without waiting: the job, running (follow it with
        :meth:`snapshot_job` or :meth:`wait_snapshot_job`)."""
        return await self._sender.run(ops.start_snapshot(destination, id=id, collections=collections, keep=keep))

    async def list_snapshots(self, source: str) -> list[ListedSnapshot]:
        """The snapshots in a destination (a damaged one has ``problem`` instead of ``manifest``)."""
        return await self._sender.run(ops.list_snapshots(source))

    async def snapshot_progress(self, snapshot_id: str, source: str) -> SnapshotProgress:
        """What each replica of a snapshot has uploaded."""
        return await self._sender.run(ops.snapshot_progress(snapshot_id, source))

    async def delete_snapshot(self, snapshot_id: str, source: str) -> Deleted:
        """Deletes a snapshot from its destination."""
        return await self._sender.run(ops.delete_snapshot(snapshot_id, source))

    async def restore_snapshot(
        self,
        source: str,
        snapshot_id: str,
        *,
        collections: Sequence[str] | None = None,
        rename: Mapping[str, str] | None = None,
        force: bool = False,
        timeout: float | None = None,
    ) -> list[RestoredCollection]:
        """Restores collections of a snapshot (``rename`` ``{old: new}``; ``force`` replaces existing ones),
        waiting for the job to end: the restored collections, or an AttestError as :meth:`create_snapshot`."""
        job = await self.start_restore(source, snapshot_id, collections=collections, rename=rename, force=force)
        return ops.job_restored(await self.wait_snapshot_job(job.id, timeout=timeout))

    async def start_restore(
        self,
        source: str,
        snapshot_id: str,
        *,
        collections: Sequence[str] | None = None,
        rename: Mapping[str, str] | None = None,
        force: bool = False,
    ) -> SnapshotJob:
        """Starts a restore as :meth:`restore_snapshot` does, without waiting: the job, running."""
        return await self._sender.run(
            ops.start_restore(source, snapshot_id, collections=collections, rename=rename, force=force)
        )

    async def snapshot_job(self, job_id: str) -> SnapshotJob:
        """A snapshot or restore job: its state, each replica's bytes, its result or error (admin)."""
        return await self._sender.run(ops.snapshot_job(job_id))

    async def snapshot_jobs(self) -> list[SnapshotJob]:
        """The snapshot and restore jobs meta keeps (running ones and the last ended ones), oldest first."""
        return await self._sender.run(ops.snapshot_jobs())

    async def cancel_snapshot_job(self, job_id: str) -> SnapshotJob:
        """Asks a running job to stop (a snapshot deletes what it uploaded, a restore discards what it staged; a
        restore already creating its collections finishes); answers the job, ``cancel_requested`` set while it
        runs. An ended job is left as it is."""
        return await self._sender.run(ops.cancel_snapshot_job(job_id))

    async def wait_snapshot_job(self, job_id: str, *, timeout: float | None = None) -> SnapshotJob:
        """Reads the job every 0.2 s until it ends, and answers it as it ended (``succeeded``, ``failed`` or
        ``cancelled``: check ``state``). ``timeout``: seconds to wait at most, then an AttestError
        ``DEADLINE_EXCEEDED`` (the job goes on)."""
        return await self._wait(ops.JobWait(job_id, timeout))

    async def reembed_collection(self, name: str, embedder: str) -> ReembedJob:
        """Starts re-embedding a collection with another model (admin, a key unlimited in tenants and collections):
        ``embedder`` is the router's configured embedder or a local model it loads (``"all-minilm-l6-v2"``,
        ``"bge-small-en-v1.5"``). New vectors and index are built beside the old ones while the collection serves
        and takes writes, then it switches to them at once. Answers the job, running (follow it with
        :meth:`reembed_job` or :meth:`wait_reembed_job`). InvalidArgumentError: ``field`` ``embedder`` for an
        unknown model or the collection's own, code ``FAILED_PRECONDITION`` while a re-embedding of it runs;
        NotFoundError: no such collection."""
        return await self._sender.run(ops.reembed_collection(name, embedder))

    async def reembed_job(self, job_id: str) -> ReembedJob:
        """A re-embedding job: its phase, documents copied per shard, its error (admin); NotFoundError if none."""
        return await self._sender.run(ops.reembed_job(job_id))

    async def reembed_jobs(self) -> list[ReembedJob]:
        """The re-embedding jobs meta keeps (running ones and the last ended ones), oldest first."""
        return await self._sender.run(ops.reembed_jobs())

    async def cancel_reembed_job(self, job_id: str) -> ReembedJob:
        """Asks a running re-embedding to stop (its copy is dropped and the collection serves as before; one
        already switching finishes); answers the job, ``cancel_requested`` set while it runs. An ended job is left
        as it is."""
        return await self._sender.run(ops.cancel_reembed_job(job_id))

    async def wait_reembed_job(self, job_id: str, *, timeout: float | None = None) -> ReembedJob:
        """Reads the job every 0.2 s until it ends, and answers it as it ended (``succeeded``, ``failed`` or
        ``cancelled``: check ``state``). ``timeout``: seconds to wait at most, then an AttestError
        ``DEADLINE_EXCEEDED`` (the job goes on)."""
        return await self._wait(ops.ReembedWait(job_id, timeout))

    async def _wait(self, wait: ops._Wait[ops.J]) -> ops.J:
        """Reads a job until ``wait`` says it ended."""
        while True:
            job = await self._sender.run(wait.call)
            pause = wait.pause(job)
            if pause is None:
                return job
            await asyncio.sleep(pause)

    async def cluster(self) -> ClusterStatus:
        """Meta voters, nodes, replica sets and their health (admin)."""
        return await self._sender.run(ops.cluster())
