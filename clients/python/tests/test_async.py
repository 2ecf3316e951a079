"""AsyncClient does what Client does, awaited."""

from __future__ import annotations

import asyncio

import pytest

import attest
from conftest import ANSWERABLE, UNANSWERABLE, sample


def run(coro):
    return asyncio.run(coro)


def test_search_and_ask_match_the_sync_client(dev, client, squad):
    async def main():
        async with attest.AsyncClient(dev.url) as c:
            return await asyncio.gather(
                c.search(squad, "Where was Super Bowl 50 played?", k=5),
                c.ask(squad, ANSWERABLE),
                c.ask(squad, UNANSWERABLE),
            )

    hits, answered, abstained = run(main())
    sync_hits = client.search(squad, "Where was Super Bowl 50 played?", k=5)
    assert [h.chunk_id for h in hits.hits] == [h.chunk_id for h in sync_hits.hits]
    assert answered.answer == client.ask(squad, ANSWERABLE).answer and answered.verdict == "supported"
    assert abstained.abstained


def test_streamed_ask(dev, squad):
    async def main():
        async with attest.AsyncClient(dev.url) as c:
            stream = await c.ask(squad, ANSWERABLE, stream=True)
            deltas = [d async for d in stream]
            return deltas, stream.response

    deltas, final = run(main())
    assert deltas and " ".join(d.text for d in deltas) == final.plain_answer()
    assert [d.verdict for d in deltas] == [c.verdict for c in final.claims]


def test_collections_upload_and_errors(dev):
    async def main():
        async with attest.AsyncClient(dev.url) as c:
            created = await c.create_collection("async-docs", shards=1)
            docs = sample(140, 146) + [{"id": "blank", "text": ""}]
            report = await c.upload_documents("async-docs", docs, batch_size=3, progress=False)
            stats = await c.stats("async-docs")
            with pytest.raises(attest.InvalidArgumentError) as bad_k:
                await c.search("async-docs", "q", k=0)
            dropped = await c.drop_collection("async-docs")
            with pytest.raises(attest.NotFoundError):
                await c.get_collection("async-docs")
            return created, report, stats, bad_k.value, dropped

    created, report, stats, bad_k, dropped = run(main())
    assert created.name == "async-docs" and dropped.dropped == "async-docs"
    assert report.accepted == 6 and [(r.index, r.id) for r in report.rejected] == [(6, "blank")]
    assert stats.live_documents == 6
    assert (bad_k.status, bad_k.code, bad_k.field) == (400, "INVALID_ARGUMENT", "k")


def test_create_exist_ok(dev):
    async def main():
        async with attest.AsyncClient(dev.url) as c:
            made = await c.create_collection("async-exist", shards=1)
            again = await c.create_collection("async-exist", exist_ok=True)
            with pytest.raises(attest.ConflictError) as other:
                await c.create_collection("async-exist", shards=2, exist_ok=True)
            await c.drop_collection("async-exist")
            return made, again, other.value

    made, again, other = run(main())
    assert again == made
    assert other.code == "ALREADY_EXISTS" and "shards 1 (asked 2)" in other.message


def test_keys_and_cluster(dev_auth):
    from conftest import ADMIN_KEY

    async def main():
        async with attest.AsyncClient(dev_auth.url, api_key=ADMIN_KEY) as c:
            key = await c.create_key(["read"], ["acme"], expires_in="1h")
            listed = await c.list_keys()
            revoked = await c.revoke_key(key.id)
            return key, listed, revoked, await c.cluster()

    key, listed, revoked, cluster = run(main())
    assert key.expires_at_ms and key.id in [k.id for k in listed] and revoked.revoked
    assert cluster.nodes


def test_snapshot_and_restore_jobs(dev, tmp_path):
    async def main():
        async with attest.AsyncClient(dev.url) as c:
            await c.create_collection("async-snap", shards=1)
            await c.upload_documents("async-snap", [{"id": "a1", "text": "Awaited snapshots."}], progress=False)
            manifest = await c.create_snapshot(str(tmp_path), id="async-1", collections=["async-snap"])
            job = await c.start_snapshot(str(tmp_path), id="async-2", collections=["async-snap"])
            ended = await c.wait_snapshot_job(job.id, timeout=60)
            jobs = await c.snapshot_jobs()
            restored = await c.restore_snapshot(str(tmp_path), "async-1", rename={"async-snap": "async-snap-copy"})
            again = await c.cancel_snapshot_job(job.id)
            await c.drop_collection("async-snap-copy")
            await c.drop_collection("async-snap")
            return manifest, job, ended, jobs, restored, again, await c.snapshot_job(job.id)

    manifest, job, ended, jobs, restored, again, read = run(main())
    assert manifest.id == "async-1" and [c.name for c in manifest.collections] == ["async-snap"]
    assert job.state == "running" and ended.state == "succeeded" and ended.manifest.id == "async-2"
    assert ended.transfers[0].skipped_bytes > 0 and ended.manifest.collections[0].replicas[0].skipped_bytes > 0
    assert job.id in [j.id for j in jobs]
    assert [(r.name, r.from_, r.live_documents) for r in restored] == [("async-snap-copy", "async-snap", 1)]
    assert again.state == "succeeded" and read == ended
