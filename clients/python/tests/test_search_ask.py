"""Search and ask against a real `attest dev` holding a slice of the SQuAD sample."""

from __future__ import annotations

import pytest

import attest
from conftest import ANSWERABLE, UNANSWERABLE, sample


def test_search_hits_carry_score_lanes_and_provenance(client, squad):
    result = client.search(squad, "Where was Super Bowl 50 played?", k=5)
    assert 0 < len(result.hits) <= 5
    assert not result.degraded and not result.fallback_mode and result.missing_shards == []
    assert result.request_id and result.took_ms is not None
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)
    top = result.hits[0]
    assert top.doc_id.startswith("squad-dev-a0000-") and top.chunk_id.startswith(top.doc_id)
    assert top.title == "Super Bowl 50" and top.shard in (0, 1)
    assert top.lanes.dense is not None or top.lanes.bm25 is not None
    assert "Levi's Stadium" in " ".join(h.text for h in result.hits)


def test_search_one_lane_with_its_weight(client, squad):
    result = client.search(squad, "Levi's Stadium", k=3, lanes="bm25", weights={"bm25": 2.0}, rrf_k=60)
    assert result.hits and all(h.lanes.dense is None and h.lanes.bm25 for h in result.hits)
    # Weighted RRF with one lane: the first hit scores weight / (rrf_k + rank 1).
    assert result.hits[0].score == pytest.approx(2.0 / 61)
    dense = client.search(squad, "Levi's Stadium", k=3, lanes=["dense"], nprobe=1)
    assert dense.hits and all(h.lanes.bm25 is None and h.lanes.dense for h in dense.hits)


def test_search_tenant_and_filter_pass_through(client, tenants):
    assert [h.doc_id for h in client.search(tenants, "rockets").hits] == ["open-1"]
    acme = client.search(tenants, "rockets", tenant="acme")
    assert sorted(h.doc_id for h in acme.hits) == ["acme-1", "acme-2"]
    english = client.search(tenants, "rockets", tenant="acme", filter={"lang": "en"})
    assert [h.doc_id for h in english.hits] == ["acme-1"]
    assert english.hits[0].metadata == {"lang": "en", "year": 2001}
    old = client.search(tenants, "rockets", tenant="acme", filter={"year": {"lt": 2000}})
    assert [h.doc_id for h in old.hits] == ["acme-2"]


def test_ask_answers_with_citations_and_verdicts(client, squad):
    answer = client.ask(squad, ANSWERABLE)
    assert answer.status == "answered" and answer.answered and not answer.abstained
    assert "Levi's Stadium" in answer.answer and "[1]" in answer.answer
    assert answer.verdict == "supported" and answer.reason is None
    assert answer.verdicts.supported == len(answer.claims) >= 1
    assert answer.degraded is False and answer.fallback_mode is False
    cited = {c.n for c in answer.citations}
    for claim in answer.claims:
        assert claim.verdict == "supported" and claim.supported and 0 <= claim.support <= 1
        assert set(claim.citations) <= cited
    first = answer.citation(1)
    paragraphs = {d["id"]: d["text"] for d in sample(0, 20)}
    assert first.quote and first.quote in paragraphs[first.doc_id]
    assert 0 < answer.confidence <= 1 and answer.latency_ms and answer.request_id


def test_ask_abstains_when_the_corpus_does_not_hold_it(client, squad):
    answer = client.ask(squad, UNANSWERABLE)
    assert answer.status == "abstained" and answer.abstained
    assert answer.answer == "" and answer.citations == [] and answer.claims == []
    assert answer.reason in ("no_results", "low_confidence", "unsupported_claims")
    assert answer.verdict is None


def test_ask_with_history_rewrites_the_follow_up(client, squad):
    first = client.ask(squad, ANSWERABLE)
    follow = client.ask(squad, "Which teams played in it?",
                        history=[("user", ANSWERABLE), {"role": "assistant", "content": first.answer}])
    assert follow.rewritten_question and "Super Bowl 50" in follow.rewritten_question


def test_ask_as_a_tenant(client, tenants):
    answer = client.ask(tenants, "Who builds rockets for lunar missions?", tenant="acme")
    assert answer.answered and {c.doc_id for c in answer.citations} == {"acme-1"}


def test_delete_document(client, fresh):
    client.upload_documents(fresh, [
        {"id": "keep", "text": "Lighthouses guide ships along rocky coasts."},
        {"id": "drop/me 1", "text": "Glaciers carve valleys over thousands of years."},
    ], progress=False)
    assert client.delete_document(fresh, "drop/me 1").deleted == "drop/me 1"
    assert [h.doc_id for h in client.search(fresh, "glaciers valleys").hits] == ["keep"]
    with pytest.raises(attest.NotFoundError):
        client.delete_document(fresh, "drop/me 1")


def test_search_with_the_callers_own_vectors(client, fresh):
    # Two documents with vectors the caller made (nearly orthogonal unit vectors in 384-d); a search that brings
    # one of them finds its document by the dense lane alone, with no query text.
    import random

    def unit(seed: int) -> list[float]:
        rng = random.Random(seed)
        v = [rng.random() - 0.5 for _ in range(384)]
        norm = sum(x * x for x in v) ** 0.5
        return [x / norm for x in v]

    client.upload_documents(fresh, [
        {"id": "own-a", "text": "Tide tables for the northern harbour.", "vector": unit(1)},
        {"id": "own-b", "text": "Opening hours of the lighthouse museum.", "vector": unit(2)},
    ], progress=False)
    result = client.search(fresh, "", k=2, lanes="dense", vector=unit(2))
    assert [h.doc_id for h in result.hits][0] == "own-b"
    assert result.hits[0].lanes.dense.score > 0.99
    with pytest.raises(attest.InvalidArgumentError) as short:
        client.search(fresh, "", lanes="dense", vector=[1.0, 2.0])
    assert short.value.field == "vector"
