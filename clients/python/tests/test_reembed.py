"""Re-embedding a collection with another model (``reembed_collection`` and its jobs) against a real `attest dev`.

The server runs the job after the request that started it: the tests wait for it with ``wait_reembed_job`` (it
polls until the job ends, with a timeout), never with a bare sleep.
"""

from __future__ import annotations

import asyncio

import pytest

import attest
from attest._ops import ReembedWait
from conftest import sample

#: The local models the router loads for a collection that names one.
MODELS = ("all-minilm-l6-v2", "bge-small-en-v1.5")
#: Each model's pooling, as the collection's embedder identity shows it.
POOLING = {"all-minilm-l6-v2": "mean", "bge-small-en-v1.5": "cls"}
#: Seconds a job over a few documents may take at most, on a loaded machine.
JOB_TIMEOUT = 45

DOCS = [
    {"id": "log", "text": "Writes are made durable by the ingest log before they are acknowledged."},
    {"id": "rockets", "text": "Acme builds rockets for lunar missions in the desert."},
    {"id": "bread", "text": "Sourdough bread rises slowly because of the wild yeast in its starter."},
]


def other_model(model: str | None) -> str:
    assert model in MODELS, f"the collection is embedded with {model!r}, not one of the local models"
    return next(m for m in MODELS if m != model)


def dense_ids(client: attest.Client, collection: str, query: str) -> list[str]:
    """The documents a dense-only search finds, best first (the new vectors, not BM25, rank them)."""
    return [h.doc_id for h in client.search(collection, query, k=len(DOCS) + 1, lanes="dense").hits]


def test_reembed_switches_the_collection_to_the_other_model(client, fresh):
    assert client.upload_documents(fresh, DOCS, progress=False).accepted == len(DOCS)
    before = client.get_collection(fresh)
    target = other_model(before.embedder)

    started = client.reembed_collection(fresh, target)
    assert isinstance(started, attest.ReembedJob)
    assert started.id.startswith("reembed-") and started.copy_.startswith(f"{fresh}~")
    assert (started.collection, started.embedder, started.from_embedder) == (fresh, target, before.embedder)
    assert (started.state, started.phase, started.error) == ("running", "copying", None) and started.running
    assert [s.shard for s in started.shards] == [0] and started.router

    ended = client.wait_reembed_job(started.id, timeout=JOB_TIMEOUT)
    assert (ended.id, ended.state, ended.phase, ended.error) == (started.id, "succeeded", "ended", None)
    assert not ended.running and not ended.cancel_requested
    # The first pass copies every document; the second finds nothing to repair (nothing was written meanwhile).
    assert ended.passes == 2
    assert [(s.shard, s.documents, s.copied, s.repaired) for s in ended.shards] == [(0, len(DOCS), len(DOCS), 0)]
    assert ended.updated_ms >= ended.created_ms
    assert client.reembed_job(started.id) == ended
    assert ended in client.reembed_jobs()
    # Re-embeddings are listed on their own, not among the snapshot jobs that share meta's job table.
    assert started.id not in [j.id for j in client.snapshot_jobs()]
    # An ended job is left as it is.
    assert client.cancel_reembed_job(started.id) == ended

    after = client.get_collection(fresh)
    identity = after.embedder_identity
    assert (after.name, after.embedder, identity.model, identity.pooling) == (fresh, target, target, POOLING[target])
    assert identity.checksum != before.embedder_identity.checksum and len(identity.checksum) == 64
    assert (after.shards, after.dimension, after.index.nlist) == (before.shards, before.dimension, before.index.nlist)
    assert not any("~" in c.name for c in client.list_collections()), "the copy is listed as a collection"
    assert client.stats(fresh).live_documents == len(DOCS)

    found = dense_ids(client, fresh, "how are writes made durable?")
    assert found[0] == "log" and sorted(found) == sorted(d["id"] for d in DOCS)
    assert dense_ids(client, fresh, "rocket launches to the moon")[0] == "rockets"
    # A write after the switch is embedded with the new model too.
    client.upload_documents(fresh, [{"id": "glacier", "text": "Glaciers carve deep valleys into mountains."}],
                            progress=False)
    assert dense_ids(client, fresh, "how do glaciers shape valleys?")[0] == "glacier"

    with pytest.raises(attest.InvalidArgumentError) as own:
        client.reembed_collection(fresh, target)
    assert (own.value.status, own.value.code, own.value.field) == (400, "INVALID_ARGUMENT", "embedder")
    assert "already" in own.value.message


def test_refusals_are_raised_as_the_clients_errors(client, fresh):
    with pytest.raises(attest.InvalidArgumentError) as unknown:
        client.reembed_collection(fresh, "gte-base")
    assert (unknown.value.status, unknown.value.code, unknown.value.field) == (400, "INVALID_ARGUMENT", "embedder")
    assert "gte-base" in unknown.value.message and unknown.value.request_id
    with pytest.raises(attest.InvalidArgumentError) as malformed:
        client.reembed_collection(fresh, "no such model!")
    assert malformed.value.field == "embedder"
    with pytest.raises(attest.NotFoundError) as no_collection:
        client.reembed_collection("reembed-no-such-collection", MODELS[0])
    assert (no_collection.value.status, no_collection.value.code) == (404, "NOT_FOUND")
    for job_id in ("reembed-000000000000", "job-none"):
        with pytest.raises(attest.NotFoundError) as no_job:
            client.reembed_job(job_id)
        assert no_job.value.message == f"no re-embedding job `{job_id}`"
        with pytest.raises(attest.NotFoundError) as no_job:
            client.cancel_reembed_job(job_id)
        assert no_job.value.message == f"no re-embedding job `{job_id}`"
    # Nothing was started.
    assert fresh not in [j.collection for j in client.reembed_jobs()]


def test_a_cancelled_reembedding_leaves_the_collection_as_it_was(client):
    # Enough documents that the job is still copying when it learns of the cancel (it copies 64 at a time and
    # reads the cancel from meta when it next reports its progress, within a second); embedded first with the
    # smaller model, so that the ingest is quick and the copy (with the larger) slow.
    name, source, target = "reembed-cancel", "all-minilm-l6-v2", "bge-small-en-v1.5"
    docs = sample(0, 256)
    before = client.create_collection(name, shards=1, embedder=source)
    try:
        assert client.upload_documents(name, docs, progress=False).accepted == len(docs)

        started = client.reembed_collection(name, target)
        with pytest.raises(attest.ConflictError) as again:
            client.reembed_collection(name, target)
        assert (again.value.status, again.value.code) == (409, "ALREADY_EXISTS")
        assert "re-embedded already" in again.value.message

        asked = client.cancel_reembed_job(started.id)
        assert (asked.id, asked.state, asked.cancel_requested) == (started.id, "running", True)
        ended = client.wait_reembed_job(started.id, timeout=JOB_TIMEOUT)
        if ended.state == "succeeded":
            assert client.get_collection(name).embedder == target
            pytest.skip(f"the job copied all {len(docs)} documents before it learned of the cancel: a faster "
                        "machine than this test expects, the cancel not exercised")
        assert (ended.state, ended.phase, ended.error, ended.cancel_requested) == ("cancelled", "ended", None, True)
        assert sum(s.copied for s in ended.shards) < len(docs)
        assert client.reembed_job(started.id) == ended

        # The copy is dropped; the collection serves with its model as before.
        assert client.get_collection(name) == before
        assert not any("~" in c.name for c in client.list_collections()), "the cancelled copy is still listed"
        assert client.stats(name).live_documents == len(docs)
        hits = client.search(name, "Where was Super Bowl 50 played?", k=3, lanes="dense").hits
        assert hits and hits[0].doc_id.startswith("squad-dev-a0000-")
    finally:
        client.drop_collection(name)


def test_waiting_for_a_reembed_job_times_out():
    running = attest.ReembedJob(id="reembed-x", collection="c", embedder="a", copy="c~x", from_embedder="b",
                                state="running", phase="copying")
    assert ReembedWait("reembed-x").call.path == "/v1/reembed/jobs/reembed-x"
    assert ReembedWait("reembed-x", timeout=60).pause(running) <= 0.2
    assert ReembedWait("reembed-x", timeout=0).pause(running.model_copy(update={"state": "cancelled"})) is None
    with pytest.raises(attest.AttestError) as late:
        ReembedWait("reembed-x", timeout=0).pause(running)
    assert late.value.code == "DEADLINE_EXCEEDED" and late.value.status is None
    assert "re-embedding job reembed-x" in late.value.message and "cancel_reembed_job" in late.value.message


def test_async_reembed(dev):
    name = "reembed-async"

    async def main():
        async with attest.AsyncClient(dev.url) as c:
            # Created with one local model by name, re-embedded with the other.
            created = await c.create_collection(name, shards=1, embedder=MODELS[0])
            try:
                await c.upload_documents(name, DOCS, progress=False)
                started = await c.reembed_collection(name, MODELS[1])
                ended = await c.wait_reembed_job(started.id, timeout=JOB_TIMEOUT)
                read, jobs, left = await asyncio.gather(
                    c.reembed_job(started.id), c.reembed_jobs(), c.cancel_reembed_job(started.id)
                )
                with pytest.raises(attest.NotFoundError):
                    await c.reembed_job("reembed-000000000000")
                hits = await c.search(name, "how are writes made durable?", k=3, lanes="dense")
                return created, started, ended, read, jobs, left, await c.get_collection(name), hits
            finally:
                await c.drop_collection(name)

    created, started, ended, read, jobs, left, after, hits = asyncio.run(main())
    assert created.embedder == MODELS[0]
    assert (started.state, started.from_embedder, started.embedder) == ("running", MODELS[0], MODELS[1])
    assert (ended.state, ended.error) == ("succeeded", None)
    assert [(s.documents, s.copied) for s in ended.shards] == [(len(DOCS), len(DOCS))]
    assert read == ended == left and ended in jobs
    assert (after.embedder, after.embedder_identity.pooling) == (MODELS[1], POOLING[MODELS[1]])
    assert hits.hits[0].doc_id == "log"
