"""Collections, thresholds, statistics and maintenance against a real `attest dev`."""

from __future__ import annotations

import pytest

import attest
from attest._ops import JobWait
from attest.models import Collection, SnapshotJob


def test_create_get_list_drop(client):
    created = client.create_collection("coll-crud", shards=1, index={"nlist": 16, "nprobe": 4})
    assert isinstance(created, Collection)
    assert (created.name, created.shards, created.index.nlist, created.index.nprobe) == ("coll-crud", 1, 16, 4)
    assert created.dimension == 384 and created.index.m > 0
    assert client.get_collection("coll-crud") == created
    assert "coll-crud" in [c.name for c in client.list_collections()]

    with pytest.raises(attest.ConflictError) as again:
        client.create_collection("coll-crud")
    assert (again.value.status, again.value.code) == (409, "ALREADY_EXISTS")

    assert client.drop_collection("coll-crud").dropped == "coll-crud"
    with pytest.raises(attest.NotFoundError) as gone:
        client.get_collection("coll-crud")
    assert (gone.value.status, gone.value.code) == (404, "NOT_FOUND")
    assert gone.value.request_id


def test_a_recall_target_is_asked_for_and_shown(client):
    """``index.recall_target`` (issue 73): named, defaulted (0.95 when the index names no nprobe), or absent (an
    nprobe named alone); the shards' statistics carry the tuned setting once something is sealed (nothing here)."""
    targeted = client.create_collection("coll-target", shards=1, index={"nlist": 16, "recall_target": 0.9})
    fixed = client.create_collection("coll-fixed", shards=1, index={"nprobe": 4})
    plain = client.create_collection("coll-plain", shards=1)
    try:
        assert (targeted.index.recall_target, fixed.index.recall_target, plain.index.recall_target) == (0.9, None, 0.95)
        assert client.get_collection("coll-target") == targeted
        stats = client.stats("coll-target")
        assert [(s.tuned, s.recall_retrains) for s in stats.shards] == [(None, 0)]
        with pytest.raises(attest.AttestError) as refused:
            client.create_collection("coll-low", index={"recall_target": 0.3})
        assert refused.value.status == 400 and "recall_target" in str(refused.value)
    finally:
        for name in ("coll-target", "coll-fixed", "coll-plain"):
            client.drop_collection(name)


def test_create_exist_ok_returns_the_collection_that_has_the_settings_asked_for(client):
    made = client.create_collection("coll-exist", shards=1, index={"nlist": 16, "nprobe": 8})
    try:
        # A bare create conflicts on the server (its default is 2 shards, this one has 1): exist_ok lets it be.
        with pytest.raises(attest.ConflictError):
            client.create_collection("coll-exist")
        assert client.create_collection("coll-exist", exist_ok=True) == made
        assert client.create_collection("coll-exist", shards=1, index={"nlist": 16}, exist_ok=True) == made
        assert client.create_collection("coll-exist", index={"nprobe": 8}, exist_ok=True) == made

        with pytest.raises(attest.ConflictError) as other:
            client.create_collection("coll-exist", shards=2, index={"nlist": 16, "nprobe": 4}, exist_ok=True)
        assert (other.value.status, other.value.code) == (409, "ALREADY_EXISTS")
        assert "shards 1 (asked 2)" in other.value.message and "index.nprobe 8 (asked 4)" in other.value.message
        assert "nlist" not in other.value.message  # what matches is not named
    finally:
        client.drop_collection("coll-exist")


def test_a_collection_names_its_embedder_and_shows_its_identity(client):
    made = client.create_collection("coll-bge", shards=1, embedder="bge-small-en-v1.5")
    try:
        identity = made.embedder_identity
        assert (made.embedder, identity.model, identity.pooling, identity.dimension) == (
            "bge-small-en-v1.5", "bge-small-en-v1.5", "cls", 384)
        assert len(identity.checksum) == 64 and identity.query_prefix.startswith("Represent this sentence")
        assert client.create_collection("coll-bge", shards=1, embedder="bge-small-en-v1.5", exist_ok=True) == made
        with pytest.raises(attest.InvalidArgumentError) as unknown:
            client.create_collection("coll-unknown", embedder="gte-base")
        assert unknown.value.field == "embedder"
    finally:
        client.drop_collection("coll-bge")


def test_create_exist_ok_creates_what_is_not_there(client):
    made = client.create_collection("coll-exist-new", shards=1, exist_ok=True)
    assert (made.name, made.shards) == ("coll-exist-new", 1)
    assert client.get_collection("coll-exist-new") == made
    client.drop_collection("coll-exist-new")


def test_an_explicit_zero_is_refused_naming_the_field(client):
    with pytest.raises(attest.InvalidArgumentError) as e:
        client.create_collection("coll-zero", index={"nlist": 0})
    assert (e.value.status, e.value.code, e.value.field) == (400, "INVALID_ARGUMENT", "index.nlist")


def test_thresholds_set_and_clear(client, fresh):
    assert client.set_thresholds(fresh, 0.55).thresholds.min_confidence == 0.55
    assert client.get_collection(fresh).thresholds.min_confidence == 0.55
    assert client.clear_thresholds(fresh).thresholds is None
    with pytest.raises(attest.InvalidArgumentError) as e:
        client.set_thresholds(fresh, 5)
    assert e.value.field == "min_confidence"


def test_stats_and_maintain(client, fresh):
    client.upload_documents(fresh, [{"id": "s1", "text": "Sealing moves growing rows into a segment."}],
                            progress=False)
    stats = client.stats(fresh)
    assert stats.collection == fresh and len(stats.shards) == 1
    assert stats.live_documents == 1
    after = client.maintain(fresh, seal=True)
    assert after.live_documents == 1 and after.shards[0].shard == 0


def test_cluster(client):
    state = client.cluster()
    assert state.leader is not None and state.term
    assert len(state.nodes) == 2 and all(n.alive and n.role == "shard" for n in state.nodes)


def test_snapshot_create_list_progress_restore(client, fresh, tmp_path):
    client.upload_documents(fresh, [{"id": "k1", "text": "Snapshots copy every shard's files."}], progress=False)
    manifest = client.create_snapshot(str(tmp_path), id="snap-1", collections=[fresh])
    assert manifest.id == "snap-1" and [c.name for c in manifest.collections] == [fresh]
    assert manifest.checksum.startswith("sha256:")

    listed = client.list_snapshots(str(tmp_path))
    assert [(s.id, s.problem) for s in listed] == [("snap-1", None)]
    assert listed[0].manifest == manifest

    progress = client.snapshot_progress("snap-1", str(tmp_path))
    assert progress.replicas and all(r.complete and r.collection == fresh for r in progress.replicas)

    restored = client.restore_snapshot(str(tmp_path), "snap-1", rename={fresh: f"{fresh}-copy"})
    assert [(r.name, r.from_, r.live_documents) for r in restored] == [(f"{fresh}-copy", fresh, 1)]
    hits = client.search(f"{fresh}-copy", "snapshots copy files").hits
    assert [h.doc_id for h in hits] == ["k1"]
    client.drop_collection(f"{fresh}-copy")

    assert client.delete_snapshot("snap-1", str(tmp_path)).deleted == "snap-1"
    assert client.list_snapshots(str(tmp_path)) == []


def test_snapshot_jobs(client, fresh, tmp_path):
    client.upload_documents(fresh, [{"id": "j1", "text": "A snapshot job runs after the request."}], progress=False)
    dest = str(tmp_path)
    started = client.start_snapshot(dest, id="job-snap-1", collections=[fresh])
    assert (started.kind, started.snapshot, started.location) == ("create", "job-snap-1", dest)
    assert started.state == "running" and started.running and started.manifest is None
    assert started.id.startswith("job-")

    first = client.wait_snapshot_job(started.id, timeout=60)
    assert (first.id, first.state, first.error) == (started.id, "succeeded", None) and not first.running
    assert [(t.collection, t.shard, t.state) for t in first.transfers] == [(fresh, 0, "done")]
    transfer = first.transfers[0]
    assert transfer.node_id > 0 and transfer.bytes > 0 and transfer.skipped_bytes == 0
    assert transfer.total_bytes >= transfer.bytes
    manifest = first.manifest
    assert manifest is not None and manifest.id == "job-snap-1" and [c.name for c in manifest.collections] == [fresh]
    assert manifest.blobs and manifest.collections[0].replicas[0].skipped_bytes == 0
    assert client.snapshot_job(started.id) == first

    # The second snapshot finds the same files in the destination (content-addressed): nothing is sent again.
    second = client.create_snapshot(dest, id="job-snap-2", collections=[fresh], timeout=60)
    replica = second.collections[0].replicas[0]
    assert 0 < replica.skipped_bytes <= replica.bytes

    jobs = client.snapshot_jobs()
    assert all(isinstance(j, SnapshotJob) for j in jobs)
    ours = [(j.snapshot, j.kind, j.state) for j in jobs if j.location == dest]
    assert ours == [("job-snap-1", "create", "succeeded"), ("job-snap-2", "create", "succeeded")]
    second_job = next(j for j in jobs if j.snapshot == "job-snap-2")
    assert second_job.manifest == second and second_job.transfers[0].skipped_bytes == replica.skipped_bytes

    # An ended job is left as it is.
    cancelled = client.cancel_snapshot_job(started.id)
    assert (cancelled.state, cancelled.manifest) == ("succeeded", manifest)
    with pytest.raises(attest.NotFoundError):
        client.snapshot_job("job-none")

    restore = client.start_restore(dest, "job-snap-2", rename={fresh: f"{fresh}-jobs"})
    assert (restore.kind, restore.snapshot, restore.location) == ("restore", "job-snap-2", dest)
    restored = client.wait_snapshot_job(restore.id, timeout=60)
    assert restored.state == "succeeded" and restored.transfers
    assert all(t.state == "done" and t.collection == f"{fresh}-jobs" for t in restored.transfers)
    assert [(r.name, r.from_, r.live_documents) for r in restored.restored] == [(f"{fresh}-jobs", fresh, 1)]
    client.drop_collection(f"{fresh}-jobs")


def test_a_failed_restore_job_raises_its_error(client, fresh, tmp_path):
    client.upload_documents(fresh, [{"id": "d1", "text": "Damaged snapshots are refused."}], progress=False)
    manifest = client.create_snapshot(str(tmp_path), id="damaged", collections=[fresh])
    # Same size, other bytes: only the restore's staging (a job's transfer) finds it out.
    blob = max((p for p in (tmp_path / manifest.blobs).rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    blob.write_bytes(b"x" * blob.stat().st_size)

    with pytest.raises(attest.AttestError) as failed:
        client.restore_snapshot(str(tmp_path), "damaged", rename={fresh: f"{fresh}-damaged"})
    assert failed.value.code == "ABORTED" and failed.value.status is None
    job = next(j for j in reversed(client.snapshot_jobs()) if j.kind == "restore" and j.snapshot == "damaged")
    assert job.state == "failed" and job.error and "damaged" in job.error and job.restored is None
    assert job.id in failed.value.message and job.error in failed.value.message
    assert "failed" in [t.state for t in job.transfers]
    with pytest.raises(attest.NotFoundError):
        client.get_collection(f"{fresh}-damaged")


def test_waiting_for_a_job_times_out():
    running = SnapshotJob(id="job-x", kind="create", snapshot="s", location="/d", state="running")
    assert JobWait("job-x").pause(running) == 0.2
    assert JobWait("job-x", timeout=60).pause(running) <= 0.2
    assert JobWait("job-x", timeout=0).pause(running.model_copy(update={"state": "failed"})) is None
    with pytest.raises(attest.AttestError) as late:
        JobWait("job-x", timeout=0).pause(running)
    assert late.value.code == "DEADLINE_EXCEEDED" and "job-x" in late.value.message
