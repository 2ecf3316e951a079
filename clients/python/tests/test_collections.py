"""Collections, thresholds, statistics and maintenance against a real `attest dev`."""

from __future__ import annotations

import pytest

import attest
from attest.models import Collection


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
