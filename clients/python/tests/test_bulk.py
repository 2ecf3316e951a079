"""Bulk upload: batches, a progress bar, and per-document rejections returned (not raised)."""

from __future__ import annotations

import io

import pytest

import attest
from attest import Document
from conftest import sample


def test_ndjson_batches_return_each_rejection(client, fresh):
    docs: list = sample(20, 76)  # 56 distinct paragraphs
    docs.insert(7, {"id": "empty", "text": "   "})
    docs.insert(30, {"id": "coloured", "text": "Has a field no document has.", "colour": "red"})
    docs.insert(45, dict(docs[0], id="copy-of-first"))  # a near-duplicate
    docs.insert(50, "not a document")
    bar = io.StringIO()

    report = client.upload_documents(fresh, docs, batch_size=25, progress={"file": bar, "mininterval": 0})

    assert report.documents == 60 and report.accepted == 56 and report.duplicates == 1
    assert report.batches == 3 and not report.ok
    assert [(r.index, r.id) for r in report.rejected] == [
        (7, "empty"), (30, "coloured"), (45, "copy-of-first"), (50, None)]
    reasons = [r.reason for r in report.rejected]
    assert "empty" in reasons[0] and "colour" in reasons[1]
    assert docs[0]["id"] in reasons[2] and "not a document" in reasons[3]
    assert client.stats(fresh).live_documents == 56
    assert "60/60" in bar.getvalue()


def test_json_batches_for_vectors_reject_only_the_bad_document(client, fresh):
    docs = [Document(id=f"v{i}", title=d["title"], text=d["text"], vector=[0.0] * 383 + [1.0])
            for i, d in enumerate(sample(100, 105))]
    docs[3] = Document(id="short", text="A vector of the wrong size.", vector=[1.0, 0.0])

    report = client.upload_documents(fresh, docs, batch_size=10, progress=False)

    assert report.accepted == 4 and [(r.index, r.id) for r in report.rejected] == [(3, "short")]
    assert report.rejected[0].field == "documents[3].vector"
    assert "dimension" in report.rejected[0].reason
    assert client.stats(fresh).live_documents == 4


def test_tenant_fills_in_documents_without_one(client, fresh):
    report = client.upload_documents(fresh, [{"id": "t1", "text": "Owls hunt at night in silence."}],
                                     tenant="acme", progress=False)
    assert report.accepted == 1
    assert client.search(fresh, "owls").hits == []
    assert [h.doc_id for h in client.search(fresh, "owls", tenant="acme").hits] == ["t1"]


def test_errors_not_about_a_document_are_raised(client):
    with pytest.raises(attest.NotFoundError):
        client.upload_documents("no-such-collection", [{"id": "1", "text": "t"}], progress=False)


def test_a_generator_of_documents(client, fresh):
    report = client.upload_documents(fresh, (d for d in sample(80, 90)), batch_size=4, progress=False)
    assert (report.accepted, report.batches, report.documents) == (10, 3, 10)
